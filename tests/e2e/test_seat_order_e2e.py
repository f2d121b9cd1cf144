"""Fair order among waiting wakes, end to end: the Kubernetes API (embedded or real),
a real Distribution registry, the cluster simulator and the project's reconciler.

The simulator's scheduler is set to NEWEST_FIRST: when a seat frees, the pod
that entered its queue last is tried first, which is what kube-scheduler's
per-pod backoff does at its least kind (a new waiter has the shortest backoff).
Three wakes wait in a full pool; seats are then freed one at a time. With the
scheduling gate the seats go in wake order; with COCOON_SEAT_ORDER=off the
same scheduler gives the first seat to the newest wake (the control: it shows
the scheduler in this test is unfair, so the first test can fail).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

import pytest

from devstack.sim_scheduler import NEWEST_FIRST
from devstack.simulator import NodeSpec, Simulator
from shared.constants import GATE_SEAT_ORDER as GATE
from shared.constants import LABEL_SEAT_LINE
from shared.models import Pod
from shared.names import SetRef
from shared.reconcile import reconcile_set, request_wake
from tests.e2e.test_seat_reclaim_e2e import phase
from tests.fixtures.cocoon_objects import NS, set_manifest
from tests.fixtures.reconcile_world import World

pytestmark = pytest.mark.e2e

WAKERS = ["w1", "w2", "w3"]
HOLDERS = ["h1", "h2", "h3"]


@pytest.fixture
def sim(world: World) -> Iterator[Simulator]:
    s = Simulator(
        api=world.http(),
        registry_url=world.registry.url,
        registry_prefix=world.prefix,
        nodes=[NodeSpec("node-1", seats=3)],
        scheduler_order=NEWEST_FIRST,
    )
    s.register_nodes()
    yield s
    s.api.close()


def main(world: World, name: str) -> Pod | None:
    # The project's own Pod model (its gates and conditions as the reconciler reads them).
    pods = [p for p in world.client.list_pods(SetRef(NS, name)) if not p.terminating]
    return pods[0] if pods else None


def main_of(world: World, name: str) -> Pod:
    pod = main(world, name)
    assert pod is not None, name
    return pod


def drive(
    world: World,
    sim: Simulator,
    names: list[str],
    until: Callable[[], bool],
    *,
    settings: Any,
    seconds: float = 40,
) -> None:
    """A simulator tick, then each set reconciled (the events), until `until`."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        sim.step()
        if until():
            return
        for name in names:
            reconcile_set(
                SetRef(NS, name),
                kube=world.client,
                registry=world.snapshots,
                settings=settings,
                publisher=None,
                now=datetime.now(UTC),
            )
    raise AssertionError(f"not converged: {[(n, phase(world, n)) for n in names]}")


def settle(world: World, sim: Simulator, names: list[str], want: str, settings: Any) -> None:
    """Drive `names` until every one of them is in phase `want`."""
    drive(world, sim, names, lambda: all(phase(world, n) == want for n in names), settings=settings)


def wake(world: World, name: str, settings: Any) -> None:
    request_wake(
        SetRef(NS, name),
        kube=world.client,
        registry=world.snapshots,
        settings=settings,
        publisher=None,
        now=datetime.now(UTC),
    )


def bound(world: World) -> list[str]:
    return [n for n in WAKERS if (p := main(world, n)) is not None and p.spec.node_name]


def full_pool_with_three_waiting_wakes(world: World, sim: Simulator, settings: Any) -> None:
    """w1..w3 ran and were released; h1..h3 hold every seat; w1, w2, w3 wake in turn."""
    for name in WAKERS:
        world.create_set(set_manifest(name, suspend=None, phase=None, annotations={}))
    settle(world, sim, WAKERS, "Running", settings)
    for name in WAKERS:
        world.patch_set(NS, name, {"spec": {"suspend": True}})
    settle(world, sim, WAKERS, "Suspended", settings)
    for name in HOLDERS:
        world.create_set(set_manifest(name, suspend=None, phase=None, annotations={}))
    settle(world, sim, HOLDERS, "Running", settings)
    for name in WAKERS:
        # Each wake is requested once the one before it is known to wait: the
        # scheduler has judged it (unschedulable), or it is in line behind it.
        wake(world, name, settings)

        def waits(n: str = name) -> bool:
            p = main(world, n)
            return p is not None and (
                p.unschedulable_message() is not None or GATE in p.scheduling_gates
            )

        drive(world, sim, WAKERS, waits, settings=settings)
        # The line is read from the API server's watch cache (resourceVersion=0), which
        # trails etcd by a moment: the next wake must see this one waiting.
        time.sleep(0.2)
    assert bound(world) == []


def free_seats_one_by_one(world: World, sim: Simulator, settings: Any) -> list[str]:
    """Release h1, h2, h3 in turn; after each, the waker that got the seat."""
    order: list[str] = []
    everyone = WAKERS + HOLDERS
    for holder in HOLDERS:
        world.patch_set(NS, holder, {"spec": {"suspend": True}})
        before = set(bound(world))
        drive(
            world,
            sim,
            everyone,
            lambda b=before: len(set(bound(world)) - b) >= 1,
            settings=settings,
        )
        [got] = sorted(set(bound(world)) - before)
        order.append(got)
    return order


def test_freed_seats_go_to_waiting_wakes_in_wake_order(world: World, sim: Simulator) -> None:
    settings = replace(world.settings, seat_reclaim_grace=None, seat_order=True)
    full_pool_with_three_waiting_wakes(world, sim, settings)

    # The line: w1 judged unschedulable; w2 and w3 created gated behind it.
    first = main_of(world, "w1")
    assert first.unschedulable_message() is not None and not first.scheduling_gates
    for name in ("w2", "w3"):
        pod = main_of(world, name)
        assert pod.scheduling_gates == (GATE,), name
        assert pod.labels[LABEL_SEAT_LINE] == "default"

    assert free_seats_one_by_one(world, sim, settings) == WAKERS
    settle(world, sim, WAKERS, "Running", settings)
    # Nothing is left gated, and every waker restored its own VM.
    for name in WAKERS:
        assert main_of(world, name).scheduling_gates == ()
    assert sorted(r.pod for r in sim.restores if r.pod.rsplit("-", 1)[0] in WAKERS) == [
        f"{n}-0" for n in WAKERS
    ]


def test_without_the_gate_this_scheduler_gives_the_first_seat_to_the_newest_wake(
    world: World, sim: Simulator
) -> None:
    settings = replace(world.settings, seat_reclaim_grace=None, seat_order=False)
    full_pool_with_three_waiting_wakes(world, sim, settings)
    assert all(main_of(world, n).scheduling_gates == () for n in WAKERS)
    order = free_seats_one_by_one(world, sim, settings)
    assert order[0] == "w3", order


def test_a_lost_hand_off_is_caught_up_by_the_next_sweep(world: World, sim: Simulator) -> None:
    """The events after a bind are lost (no reconcile at all): the next waiter stays
    gated until one sweep run, whose safety net reconciles every Waking set."""
    from functions.sweep import run_sweep

    settings = replace(world.settings, seat_reclaim_grace=None, seat_order=True)
    full_pool_with_three_waiting_wakes(world, sim, settings)
    world.patch_set(NS, "h1", {"spec": {"suspend": True}})
    # h1's release alone (its own events), then only the simulator: w1 is bound.
    drive(world, sim, ["h1"], lambda: bound(world) == ["w1"], settings=settings)
    for _ in range(5):
        sim.step()
    assert main_of(world, "w2").scheduling_gates == (GATE,)

    run_sweep(settings=settings, dry_run=False, kube=world.client, registry=world.snapshots)

    # w2's turn: ungated (and then judged by the scheduler); w3 still waits behind it.
    assert main_of(world, "w2").scheduling_gates == ()
    assert main_of(world, "w3").scheduling_gates == (GATE,)
    sim.step()
    assert main_of(world, "w2").unschedulable_message() is not None


@pytest.mark.embedded_only("injects a fault on the line's LIST through the emulator")
def test_a_line_that_cannot_be_read_never_fails_a_wake(world: World, sim: Simulator) -> None:
    settings = replace(world.settings, seat_reclaim_grace=None, seat_order=True)
    full_pool_with_three_waiting_wakes(world, sim, settings)
    # A fourth set, run and released, woken while the cluster-wide pod LIST fails.
    world.create_set(set_manifest("w4", suspend=None, phase=None, annotations={}))
    world.patch_set(NS, "h3", {"spec": {"suspend": True}})
    drive(world, sim, ["w4", "h3"], lambda: phase(world, "w4") == "Running", settings=settings)
    world.patch_set(NS, "w4", {"spec": {"suspend": True}})
    settle(world, sim, ["w4"], "Suspended", settings)
    world.kube.add_fault(method="GET", path=r"^/api/v1/pods$", status=503, times=None)

    wake(world, "w4", settings)

    # Created, in the line for those after it, but not gated: fairness is worth a
    # LIST, not a failed wake.
    pod = main_of(world, "w4")
    assert pod.labels[LABEL_SEAT_LINE] == "default"
    assert pod.scheduling_gates == ()
    assert phase(world, "w4") == "Waking"


def test_turning_the_order_off_releases_gated_pods_at_their_next_reconcile(
    world: World, sim: Simulator
) -> None:
    settings = replace(world.settings, seat_reclaim_grace=None, seat_order=True)
    full_pool_with_three_waiting_wakes(world, sim, settings)
    assert main_of(world, "w2").scheduling_gates == (GATE,)

    off = replace(settings, seat_order=False)
    out = reconcile_set(
        SetRef(NS, "w2"),
        kube=world.client,
        registry=world.snapshots,
        settings=off,
        publisher=None,
        now=datetime.now(UTC),
    )

    # Nobody would ever remove a gate this project put there: it goes now.
    assert "ungated" in out.reason
    assert main_of(world, "w2").scheduling_gates == ()
    assert main_of(world, "w3").scheduling_gates == (GATE,)  # its own reconcile frees it


def test_a_run_without_settings_also_releases_a_gated_pod(world: World, sim: Simulator) -> None:
    # A library caller (no settings) has no line to wait in: a gated restore pod must not
    # stay gated forever, exactly as with the order turned off.
    settings = replace(world.settings, seat_reclaim_grace=None, seat_order=True)
    full_pool_with_three_waiting_wakes(world, sim, settings)
    assert main_of(world, "w2").scheduling_gates == (GATE,)

    out = reconcile_set(
        SetRef(NS, "w2"),
        kube=world.client,
        registry=world.snapshots,
        settings=None,
        publisher=None,
        now=datetime.now(UTC),
    )

    assert out.reason == "w2-0: not in a seat line: ungated"
    assert main_of(world, "w2").scheduling_gates == ()
