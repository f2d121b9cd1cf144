"""Seat reclaim end to end: the embedded Kubernetes API, a real Distribution registry,
the cluster simulator (scheduler, operator, vk-cocoon) and the project's own reconciler.

Five released sets are woken at once into a pool whose five seats are all held
by idle sets that opted in with `reclaimable-after`. The test plays only the
event delivery: it reconciles every set concurrently, round after round, as the
audit-log events would.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from devstack.simulator import NodeSpec, Simulator
from shared import constants as k
from shared.durations import format_rfc3339
from shared.names import SetRef, vm_name
from shared.reconcile import reconcile_set, request_wake
from shared.seats.reclaim.executor import forget_candidates
from tests.fixtures.cocoon_objects import NS, set_manifest
from tests.fixtures.reconcile_world import World

pytestmark = pytest.mark.e2e

# The functions' clock runs ahead of the API server's (whose creation timestamps
# are its real now), so the idle sets have been idle for hours.
SKEW = timedelta(hours=3)
WAKERS = [f"waker-{i}" for i in range(5)]
IDLE = [f"idle-{i}" for i in range(5)]


@pytest.fixture(autouse=True)
def _fresh_candidates() -> Iterator[None]:
    # The reclaimer shares a search's list for two seconds within a process; each
    # test is a new cluster.
    forget_candidates()
    yield
    forget_candidates()


@pytest.fixture
def sim(world: World) -> Iterator[Simulator]:
    s = Simulator(
        api=world.http(),
        registry_url=world.registry.url,
        registry_prefix=world.prefix,
        nodes=[NodeSpec("node-1", seats=3), NodeSpec("node-2", seats=2)],
    )
    s.register_nodes()
    yield s
    s.api.close()


def clients(world: World, n: int) -> list[Any]:
    from shared.clients.kube import KubeClient

    # One client per concurrent invocation, as separate function instances would have.
    return [KubeClient.from_kubeconfig(str(world.kubeconfig)) for _ in range(n)]


def phase(world: World, name: str) -> str | None:
    out: str | None = world.get_set(NS, name).get("status", {}).get("phase")
    return out


def drive(
    world: World,
    sim: Simulator,
    names: list[str],
    until: Callable[[], bool],
    *,
    settings: Any,
    rounds: int = 80,
) -> None:
    """Simulator tick, then every set reconciled concurrently (the events), until `until`."""
    kubes = clients(world, len(names))
    # Bounded by rounds and by time: on a loaded machine a round takes longer.
    deadline = time.monotonic() + rounds * 0.6
    with ThreadPoolExecutor(len(names)) as pool:
        while time.monotonic() < deadline:
            sim.step()
            if until():
                return
            list(
                pool.map(
                    lambda pair: reconcile_set(
                        SetRef(NS, pair[0]),
                        kube=pair[1],
                        registry=world.snapshots,
                        settings=settings,
                        publisher=None,
                        now=datetime.now(UTC) + SKEW,
                    ),
                    zip(names, kubes, strict=True),
                )
            )
            time.sleep(0.01)
    raise AssertionError(f"not converged: {[(n, phase(world, n)) for n in names]}")


def test_five_concurrent_wakes_each_take_one_idle_seat_and_land(
    world: World, sim: Simulator
) -> None:
    settings = replace(world.settings, seat_reclaim_grace=timedelta(milliseconds=1))
    everyone = WAKERS + IDLE

    # The wakers ran, then were released (a full cycle through the real flow).
    for name in WAKERS:
        world.create_set(set_manifest(name, suspend=None, phase=None, annotations={}))
    drive(
        world,
        sim,
        WAKERS,
        lambda: all(phase(world, n) == "Running" for n in WAKERS),
        settings=settings,
    )
    for name in WAKERS:
        world.patch_set(NS, name, {"spec": {"suspend": True}})
    drive(
        world,
        sim,
        WAKERS,
        lambda: all(phase(world, n) == "Suspended" for n in WAKERS),
        settings=settings,
    )

    # Five idle sets take every seat of the pool.
    for name in IDLE:
        world.create_set(
            set_manifest(
                name, suspend=None, phase=None, annotations={k.ANN_RECLAIMABLE_AFTER: "1h"}
            )
        )
    drive(
        world, sim, IDLE, lambda: all(phase(world, n) == "Running" for n in IDLE), settings=settings
    )
    generations = {n: world.get_set(NS, n)["metadata"]["generation"] for n in IDLE}

    # Five concurrent wake requests into the full pool.
    kubes = clients(world, len(WAKERS))
    with ThreadPoolExecutor(len(WAKERS)) as pool:
        list(
            pool.map(
                lambda pair: request_wake(
                    SetRef(NS, pair[0]),
                    kube=pair[1],
                    registry=world.snapshots,
                    settings=settings,
                    publisher=None,
                    now=datetime.now(UTC) + SKEW,
                ),
                zip(WAKERS, kubes, strict=True),
            )
        )

    def all_woken() -> bool:
        return all(
            phase(world, n) == "Running"
            and k.ANN_HIBERNATED_ON_NODE not in world.get_set(NS, n)["metadata"]["annotations"]
            for n in WAKERS
        )

    drive(world, sim, everyone, all_woken, settings=settings, rounds=150)

    # Every wake landed on a node of the pool.
    for name in WAKERS:
        [main] = [p for p in world.pods(NS, name) if p.metadata.deletion_timestamp is None]
        assert main.spec.node_name in ("node-1", "node-2")
    # Every idle set gave its seat exactly once, each to a different wake.
    takers = {}
    for name in IDLE:
        cs = world.get_set(NS, name)
        assert cs["spec"]["suspend"] is True
        assert cs["metadata"]["generation"] == generations[name] + 1, "suspended more than once"
        takers[name] = cs["metadata"]["annotations"][k.ANN_RECLAIMED_BY]
    assert sorted(takers.values()) == sorted(f"{NS}/{w}" for w in WAKERS)
    reclaimed = [e for e in world.events(NS) if e.reason == k.REASON_SEAT_RECLAIMED]
    by_set: dict[str, list[str]] = {}
    for e in reclaimed:
        by_set.setdefault(e.involved_object.name, []).append(e.message)
    assert sorted(by_set) == sorted(everyone)
    for victim, waker in takers.items():
        [on_victim] = by_set[victim]
        [on_waker] = by_set[waker.split("/", 1)[1]]
        assert waker in on_victim and f"{NS}/{victim}" in on_waker


def test_the_grace_period_then_the_longest_idle_quiet_set_gives_its_seat(
    world: World, sim: Simulator
) -> None:
    """Grace from the first unschedulable observation; a busy VM (by CPU) is kept even
    though it is the longest idle by its stamps; the next in line gives its seat."""
    sim.metrics_interval = 0.001
    settings = world.settings  # the default grace: 30 s
    world.create_set(set_manifest("waker", suspend=None, phase=None, annotations={}))
    drive(world, sim, ["waker"], lambda: phase(world, "waker") == "Running", settings=settings)
    world.patch_set(NS, "waker", {"spec": {"suspend": True}})
    drive(world, sim, ["waker"], lambda: phase(world, "waker") == "Suspended", settings=settings)
    # Fill the five seats: the busy one is the longest idle by its stamps.
    for name in ("busy", "quiet", "pinned", "young", "other"):
        world.create_set(
            set_manifest(
                name, suspend=None, phase=None, annotations={k.ANN_RECLAIMABLE_AFTER: "1h"}
            )
        )
    sim_names = ["busy", "quiet", "pinned", "young", "other"]
    for _ in range(80):
        sim.step()
        if all(phase(world, n) == "Running" for n in sim_names):
            break
    # Hours idle as the functions' clock sees it (under SKEW: creation is older still;
    # "young" is under its reclaimable-after).
    stamps = {"busy": 2.9, "quiet": 2.5, "pinned": 2.8, "young": 0.5, "other": 1.5}
    for name, hours in stamps.items():
        ann = {
            k.ANN_LAST_ACTIVITY: format_rfc3339(datetime.now(UTC) + SKEW - timedelta(hours=hours))
        }
        if name == "busy":
            ann[k.ANN_IDLE_CPU_BELOW] = "50m"
        world.patch_set(NS, name, {"metadata": {"annotations": ann}})
    world.patch_set(NS, "pinned", {"spec": {"nodeName": "node-2"}})
    sim.cpu_load[vm_name(NS, "busy", 0)] = "400m"
    sim.step()

    t0 = datetime.now(UTC) + SKEW
    kube = clients(world, 1)[0]
    request_wake(
        SetRef(NS, "waker"),
        kube=kube,
        registry=world.snapshots,
        settings=settings,
        publisher=None,
        now=t0,
    )
    for _ in range(20):
        sim.step()
        if world.pods(NS, "waker") and world.pods(NS, "waker")[0].status.conditions:
            break
    # Unschedulable, first observation: the clock starts, nobody is suspended.
    reconcile_set(
        SetRef(NS, "waker"),
        kube=kube,
        registry=world.snapshots,
        settings=settings,
        publisher=None,
        now=t0,
    )
    wait = world.get_set(NS, "waker")["metadata"]["annotations"][k.ANN_SEAT_WAIT]
    assert '"since"' in wait and '"victim"' not in wait
    out = reconcile_set(
        SetRef(NS, "waker"),
        kube=kube,
        registry=world.snapshots,
        settings=settings,
        publisher=None,
        now=t0 + timedelta(seconds=29),
    )
    assert "grace" in out.reason
    assert not any(world.get_set(NS, n)["spec"].get("suspend") for n in sim_names)

    out = reconcile_set(
        SetRef(NS, "waker"),
        kube=kube,
        registry=world.snapshots,
        settings=settings,
        publisher=None,
        now=t0 + timedelta(seconds=31),
    )

    # busy (CPU) and pinned (another node) are kept; quiet is next by idle time.
    suspended = [n for n in sim_names if world.get_set(NS, n)["spec"].get("suspend")]
    assert suspended == ["quiet"], out.reason
    # One reclaim per wake: more reconciles while it releases take nothing else.
    for s in range(32, 40):
        reconcile_set(
            SetRef(NS, "waker"),
            kube=kube,
            registry=world.snapshots,
            settings=settings,
            publisher=None,
            now=t0 + timedelta(seconds=s),
        )
    assert [n for n in sim_names if world.get_set(NS, n)["spec"].get("suspend")] == ["quiet"]


@pytest.mark.embedded_only("counts requests in the emulator's request log")
def test_one_list_serves_the_searches_of_many_waiting_wakes(world: World) -> None:
    """The sweep reconciles every waiting wake in one run; each search must not list
    every set again. Real client, real API: the request log counts the LISTs."""
    from shared.seats.reclaim.executor import reclaim_for

    settings = replace(world.settings, seat_reclaim_grace=timedelta(seconds=30))
    now = datetime.now(UTC) + SKEW
    since = now - timedelta(minutes=5)
    wakers = []
    for i in range(4):
        wait = json.dumps({"pod": f"pod-{i}", "since": format_rfc3339(since)})
        wakers.append(
            world.create_set(
                set_manifest(
                    f"w{i}", suspend=False, phase="Waking", annotations={k.ANN_SEAT_WAIT: wait}
                )
            )
        )
    world.reset_log()
    for i, body in enumerate(wakers):
        cs = world.client.get_set(SetRef(NS, body["metadata"]["name"]))
        res = reclaim_for(
            cs, f"pod-{i}", kube=world.client, settings=settings, now=now, publisher=None
        )
        assert res.action == "none"
    lists = [
        r
        for r in world.api_requests()
        if r["method"] == "GET" and r["path"].endswith(f"/{k.PLURAL}")
    ]
    assert len(lists) == 1, lists


def test_the_longest_waiting_wake_gets_the_one_reclaimable_seat(
    world: World, sim: Simulator
) -> None:
    """Two wakes wait in a full pool with one reclaimable seat. The younger wake is
    reconciled first (as an event would have it) and defers; the older one claims."""
    settings = world.settings  # the default grace: 30 s
    for name in ("older", "younger"):
        world.create_set(set_manifest(name, suspend=None, phase=None, annotations={}))
    drive(
        world,
        sim,
        ["older", "younger"],
        lambda: all(phase(world, n) == "Running" for n in ("older", "younger")),
        settings=settings,
    )
    for name in ("older", "younger"):
        world.patch_set(NS, name, {"spec": {"suspend": True}})
    drive(
        world,
        sim,
        ["older", "younger"],
        lambda: all(phase(world, n) == "Suspended" for n in ("older", "younger")),
        settings=settings,
    )
    # Five seats: one reclaimable idle set, four that are not reclaimable.
    fillers = ["idle", "busy-1", "busy-2", "busy-3", "busy-4"]
    for name in fillers:
        ann = {k.ANN_RECLAIMABLE_AFTER: "1h"} if name == "idle" else {}
        world.create_set(set_manifest(name, suspend=None, phase=None, annotations=ann))
    for _ in range(80):
        sim.step()
        if all(phase(world, n) == "Running" for n in fillers):
            break

    kube = clients(world, 1)[0]
    t0 = datetime.now(UTC) + SKEW

    def reconcile(name: str, at: datetime) -> str:
        out = reconcile_set(
            SetRef(NS, name),
            kube=kube,
            registry=world.snapshots,
            settings=settings,
            publisher=None,
            now=at,
        )
        return out.reason

    for name, at in (("older", t0), ("younger", t0 + timedelta(seconds=10))):
        request_wake(
            SetRef(NS, name),
            kube=kube,
            registry=world.snapshots,
            settings=settings,
            publisher=None,
            now=at,
        )
        for _ in range(20):
            sim.step()
            if any(p.status.conditions for p in world.pods(NS, name)):
                break
        reconcile(name, at)  # the first unschedulable observation: the clock starts

    later = t0 + timedelta(seconds=45)  # both past the grace
    reason = reconcile("younger", later)
    assert f"{NS}/older has waited longer" in reason
    assert not world.get_set(NS, "idle")["spec"].get("suspend")
    reconcile("older", later)
    idle = world.get_set(NS, "idle")
    assert idle["spec"]["suspend"] is True
    assert idle["metadata"]["annotations"][k.ANN_RECLAIMED_BY] == f"{NS}/older"
