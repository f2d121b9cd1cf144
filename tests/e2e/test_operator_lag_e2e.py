"""Beside the real cocoon-operator (issue 24): never act ahead of it, never cost a VM its state.

The operator here is `devstack.sim_operator.UpstreamOperator`: cocoon-operator's
own reconcile (its slot release and wake for `hibernatePolicy: release` sets,
then its normal flow), reacting to pod changes at once, with its 5 s requeue,
its DELETE of `:hibernate` by tag (refused by Distribution), and an informer
view that can be paused, lag, or be thrown away by a restart. The simulator
plays the scheduler and vk-cocoon; the functions are the project's reconciler,
run for every set on every round as the audit events would deliver them, with
`COCOON_OPERATOR=present`.

Checked on every round of every run (`Invariants`):
- no VM boots fresh where a snapshot exists: no main pod appears without the
  restore marker while its VM's `:hibernate` is in the registry (vk-cocoon's
  CreatePod clones the base image unless told to restore:
  vk-cocoon provider/cocoon/create.go);
- no `:hibernate` is overwritten by another VM instance: such a pod never gets
  a hibernate request;
- no phase flaps (within one user action no phase comes back after another);
- no generation stamp on a pod goes backwards;
and at the end of each action: every seat freed, every wake landed warm.

`test_without_the_rule_*` run the same story with the functions alone
(`COCOON_OPERATOR=absent`, what main did): they show the data loss the rule
prevents, so the harness is known to catch it.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Any

import pytest

from devstack.kubehttp import pod_path, set_path
from devstack.sim_operator import UpstreamOperator
from devstack.simulator import NodeSpec, Simulator
from devstack.upstream import Upstream
from shared import constants as k
from shared.config import OperatorMode, Settings
from shared.errors import TransientError
from shared.models import CocoonSet, parse_go_int
from shared.names import SetRef, vm_names
from shared.reconcile import reconcile_set, request_wake
from shared.sweep.decide import IdleState, evaluate_idle
from tests.fixtures.cocoon_objects import NS, set_manifest
from tests.fixtures.reconcile_world import World

pytestmark = pytest.mark.e2e

SETS = [f"lag-{i}" for i in range(3)]
# Phases the operator writes on the way up: its wake arm writes the derived phase
# (Scaling for a not-yet-Ready main), its normal flow Pending; one step, not a flap.
_STARTING = {"Pending": "Starting", "Scaling": "Starting"}


@dataclass
class Invariants:
    world: World
    violations: list[str] = field(default_factory=list)
    _pods: dict[str, dict[str, Any]] = field(default_factory=dict)
    _stamps: dict[str, int] = field(default_factory=dict)
    _phases: dict[str, list[str]] = field(default_factory=dict)

    def mark(self) -> None:
        """A new user action: phases start a new sequence."""
        self._phases.clear()

    def _bad(self, text: str) -> None:
        if text not in self.violations:
            self.violations.append(text)

    def observe(self, api: Any) -> None:
        for cs in api.list_items(set_path(NS)):
            name = cs["metadata"]["name"]
            phase = (cs.get("status") or {}).get("phase") or ""
            phase = _STARTING.get(phase, phase)
            seq = self._phases.setdefault(name, [])
            if phase and (not seq or seq[-1] != phase):
                if phase in seq:
                    self._bad(f"{name}: phase flapped {' -> '.join([*seq, phase])}")
                seq.append(phase)
        for pod in api.list_items(pod_path(NS)):
            meta = pod["metadata"]
            uid, ann = meta["uid"], meta.get("annotations") or {}
            vm = ann.get(k.ANN_VM_NAME, "")
            seen = self._pods.get(uid)
            if seen is None:
                fresh_over = ann.get(k.ANN_RESTORE) != k.TRUE and self.world.snapshot_present(vm)
                seen = self._pods[uid] = {"name": meta["name"], "fresh_over": fresh_over}
                if fresh_over:
                    self._bad(f"{meta['name']}: created without restore intent over {vm}:hibernate")
            if seen["fresh_over"] and ann.get(k.ANN_HIBERNATE) == k.TRUE:
                self._bad(f"{meta['name']}: a fresh VM asked to hibernate over {vm}:hibernate")
            stamp = parse_go_int(ann.get(k.ANN_GENERATION, ""))
            if stamp < self._stamps.get(uid, 0):
                self._bad(f"{meta['name']}: stamp went back {self._stamps[uid]} -> {stamp}")
            self._stamps[uid] = max(stamp, self._stamps.get(uid, 0))


@dataclass
class Cluster:
    world: World
    sim: Simulator
    op: UpstreamOperator
    settings: Settings
    inv: Invariants
    kubes: list[Any]
    # False: the functions sit out the rounds (no invocation reaches them), so a scenario
    # can have the operator act first for certain; otherwise who wins is a race.
    functions: bool = True

    def round(self) -> None:
        self.sim.step()
        self.op.step()
        if self.functions:
            for name, kube in zip(SETS, self.kubes, strict=True):
                # A TransientError is a 503: the platform redelivers (the next round).
                with contextlib.suppress(TransientError):
                    reconcile_set(
                        SetRef(NS, name),
                        kube=kube,
                        registry=self.world.snapshots,
                        settings=self.settings,
                        publisher=None,
                    )
        self.inv.observe(self.sim.api)

    def drive(self, what: str, until: Callable[[], bool], seconds: float = 40.0) -> None:
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            self.round()
            if until():
                return
            time.sleep(0.02)
        state = {n: (self.phase(n), self.pod_names(n)) for n in SETS}
        raise AssertionError(f"{what}: not reached in {seconds}s: {state}; op: {self.op.errors}")

    def hold(self, seconds: float) -> None:
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            self.round()
            time.sleep(0.02)

    def phase(self, name: str) -> str | None:
        out: str | None = self.world.get_set(NS, name).get("status", {}).get("phase")
        return out

    def pod_names(self, name: str) -> list[str]:
        return [p.metadata.name for p in self.world.pods(NS, name)]

    def all_running(self) -> bool:
        return all(self.phase(n) == "Running" for n in SETS)

    def all_released(self) -> bool:
        return all(self.phase(n) == "Suspended" and not self.pod_names(n) for n in SETS)

    def all_woken(self) -> bool:
        for name in SETS:
            cs = self.world.get_set(NS, name)
            if cs.get("status", {}).get("phase") != "Running":
                return False
            if cs["metadata"].get("annotations", {}).get(k.ANN_HIBERNATED_ON_NODE):
                return False
            # A completed wake leaves no `:hibernate` under either name: today's vk-cocoon
            # restores from any it finds the next time the VM starts unmarked.
            if any(self.world.snapshot_present(vm) for vm in vm_names(NS, name, 0)):
                return False
        return True

    def suspend_all(self) -> None:
        self.inv.mark()
        for name in SETS:
            self.world.patch_set(NS, name, {"spec": {"suspend": True}})

    def wake_all(self) -> None:
        self.inv.mark()
        for name, kube in zip(SETS, self.kubes, strict=True):
            request_wake(
                SetRef(NS, name),
                kube=kube,
                registry=self.world.snapshots,
                settings=self.settings,
                publisher=None,
            )

    def assert_warm(self) -> None:
        for name in SETS:
            (pod,) = self.world.pods(NS, name)
            ann = pod.metadata.annotations
            assert ann.get(k.ANN_RESTORE) == k.TRUE, f"{name}: woke without restore intent"
            assert ann.get(k.ANN_LIFECYCLE_MESSAGE, "").startswith("restored warm"), (
                f"{name}: {ann.get(k.ANN_LIFECYCLE_MESSAGE)}"
            )

    def start(self, annotations: dict[str, str] | None = None) -> None:
        for name in SETS:
            self.world.create_set(
                set_manifest(name, suspend=None, phase=None, annotations=annotations or {})
            )
        self.drive("created and running", self.all_running)


def make_cluster(
    world: World, mode: OperatorMode, upstream: Upstream = Upstream.TODAY
) -> Iterator[Cluster]:
    from shared.clients.kube import KubeClient

    sim = Simulator(
        api=world.http(),
        registry_url=world.registry.url,
        registry_prefix=world.prefix,
        nodes=[NodeSpec("node-1", seats=3), NodeSpec("node-2", seats=3)],
        play_operator=False,
        upstream=upstream,
    )
    sim.register_nodes()
    op = UpstreamOperator(
        api=world.http(),
        registry_url=world.registry.url,
        registry_prefix=world.prefix,
        upstream=upstream,
    )
    cluster = Cluster(
        world=world,
        sim=sim,
        op=op,
        settings=replace(world.settings, operator=mode),
        inv=Invariants(world),
        kubes=[KubeClient.from_kubeconfig(str(world.kubeconfig)) for _ in SETS],
    )
    try:
        yield cluster
    finally:
        sim.api.close()
        op.api.close()


@pytest.fixture(params=list(Upstream), ids=[u.value for u in Upstream])
def cluster(world: World, request: pytest.FixtureRequest) -> Iterator[Cluster]:
    """Beside the operator and vk-cocoon of each generation (docs/compatibility.md)."""
    yield from make_cluster(world, OperatorMode.PRESENT, request.param)


@pytest.fixture
def alone(world: World) -> Iterator[Cluster]:
    """The functions as on main: no rule (they act whatever the operator has seen)."""
    yield from make_cluster(world, OperatorMode.ABSENT)


def release(c: Cluster, how: str) -> None:
    """Suspend every set while the operator is `how`; every seat must free."""
    if how == "paused":
        c.op.pause()
        c.suspend_all()
        c.hold(1.5)  # the functions, vk-cocoon and the scheduler run on
        c.op.resume(stale_sets_for=1.0)
    elif how == "lagging":
        c.op.lag = 1.5
        c.suspend_all()
    elif how == "restarted":
        c.suspend_all()
        c.round()
        c.op.restart()
    c.drive("released", c.all_released)
    c.op.lag = 0.0


def wake(c: Cluster, how: str) -> None:
    """Wake every set while the operator is `how`; every wake must land warm."""
    if how == "paused":
        c.op.pause()
        c.wake_all()
        c.hold(1.5)
        c.op.resume(stale_sets_for=1.0)
    elif how == "lagging":
        c.op.lag = 1.5
        c.wake_all()
    elif how == "restarted":
        c.wake_all()
        c.round()
        c.op.restart()
    c.drive("woken", c.all_woken)
    c.op.lag = 0.0


HOW = ["paused", "lagging", "restarted"]


@pytest.mark.parametrize("how", HOW)
def test_release_and_wake_beside_an_operator_that_is(cluster: Cluster, how: str) -> None:
    cluster.start()
    release(cluster, how)
    assert cluster.inv.violations == []
    wake(cluster, how)
    cluster.hold(1.0)  # nothing comes back to undo it
    assert cluster.all_woken()
    cluster.assert_warm()
    assert cluster.inv.violations == []


def test_without_the_rule_a_stalled_operator_boots_fresh_over_the_snapshot(alone: Cluster) -> None:
    """Issue 24, 1: the functions release while the operator's cache still says "running"."""
    alone.start()
    alone.op.pause()
    alone.suspend_all()
    alone.drive("released by the functions alone", alone.all_released)
    alone.op.resume(stale_sets_for=1.0)
    alone.hold(2.0)
    assert any("without restore intent" in v for v in alone.inv.violations), alone.inv.violations


def test_without_the_rule_a_stalled_operator_rehibernates_the_woken_vm(alone: Cluster) -> None:
    """Issue 24, 2: the functions wake while the operator's cache still says "suspended"."""
    alone.start()
    release(alone, "restarted")
    alone.op.pause()
    alone.wake_all()
    alone.drive("woken by the functions alone", alone.all_woken)
    alone.op.resume(stale_sets_for=1.0)
    alone.hold(2.0)
    found = " ".join(alone.inv.violations)
    assert "stamp went back" in found or "flapped" in found, alone.inv.violations


def reasons(c: Cluster, name: str, reason: str) -> int:
    return sum(
        1 for e in c.world.events(NS) if e.involved_object.name == name and e.reason == reason
    )


def test_what_the_operator_completes_first_is_booked_once(cluster: Cluster) -> None:
    """Issue 24, 4 and 8: on a registry that deletes tags the operator finishes
    the wake first; before, the functions never booked it (no `last-wake-completed`,
    so the idle sweep suspended the just-woken set again; no WakeCompleted), and a
    release the operator did earned no SeatReleased."""
    from shared.constants import ANN_SEAT_WAIT

    cluster.op.registry_deletes_tags = True
    cluster.start({k.ANN_IDLE_TIMEOUT: "3s"})
    cluster.hold(3.5)  # idle for longer than its timeout before the suspend
    # The operator wins the release for certain: the functions' invocations come after
    # (with both running, either may win the delete; this is the case where it did).
    cluster.functions = False
    release(cluster, "restarted")
    assert [a for a in cluster.op.actions if a.kind == "delete"], "the operator released"
    cluster.functions = True
    cluster.hold(0.5)
    for name in SETS:
        assert reasons(cluster, name, k.REASON_SEAT_RELEASED) == 1, name
    cluster.functions = False  # and the wake: the operator completes it first
    wake(cluster, "restarted")
    assert [a for a in cluster.op.actions if a.kind == "untag"], "the operator completed"
    cluster.functions = True
    cluster.hold(0.5)
    for name in SETS:
        # The idle clock restarts at the wake: the sweep must not suspend it again at once
        # (before, it measured from the creation and found it idle past its timeout).
        cs = CocoonSet.model_validate(cluster.world.get_set(NS, name))
        assert evaluate_idle(cs, now=datetime.now(UTC)).state is IdleState.ACTIVE, name
    for name in SETS:
        ann = cluster.world.get_set(NS, name)["metadata"].get("annotations") or {}
        (pod,) = cluster.world.pods(NS, name)
        assert ann.get(k.ANN_LAST_WAKE), name  # the idle clock restarts at the wake
        assert ann.get(k.ANN_LAST_WAKE_POD) == pod.metadata.uid
        assert k.ANN_WAKE_STARTED not in ann and ANN_SEAT_WAIT not in ann
        assert reasons(cluster, name, k.REASON_WAKE_COMPLETED) == 1, name
    assert cluster.inv.violations == []


@pytest.fixture
def today(world: World) -> Iterator[Cluster]:
    yield from make_cluster(world, OperatorMode.PRESENT, Upstream.TODAY)


def test_an_image_change_wake_beside_an_operator_that_cannot_untag(today: Cluster) -> None:
    """Today's operator discards the snapshot of an image-changed set before writing any
    status, and Distribution refuses its DELETE by tag: it never observes the wake's
    generation. The functions do the discard for it, so the set boots fresh on the new
    image instead of staying Suspended forever (seen beside the real operator binary)."""
    c = today
    c.start()
    release(c, "restarted")
    for name in SETS:
        c.world.patch_set(NS, name, {"spec": {"agent": {"image": "ghcr.io/acme/agent:2"}}})
    c.wake_all()
    c.drive("woken fresh on the new image", c.all_running)
    for name in SETS:
        (pod,) = c.world.pods(NS, name)
        ann = pod.metadata.annotations
        assert ann.get(k.ANN_RESTORE) != k.TRUE, name
        assert ann.get(k.ANN_IMAGE) == "ghcr.io/acme/agent:2", name
        assert not any(c.world.snapshot_present(vm) for vm in vm_names(NS, name, 0)), name
        cs_ann = c.world.get_set(NS, name)["metadata"].get("annotations") or {}
        assert k.ANN_HIBERNATED_IMAGE not in cs_ann and k.ANN_HIBERNATED_ON_NODE not in cs_ann
        assert k.ANN_WAKE_REQUESTED_BY not in cs_ann
        assert reasons(c, name, k.REASON_SNAPSHOT_DISCARDED) == 1, name
    assert c.inv.violations == []
