"""A seat reclaim beside a stalled cocoon-operator (issue 24), on both backends.

One node, one seat, held by an idle set that opted in with `reclaimable-after`;
a released set is woken while the operator is paused. The functions wait for
the operator to observe the wake; once it resumes (set cache still stale for a
second), its restore pod finds no seat, the functions reclaim the idle set's
seat, the operator's own slot release frees it, and the wake lands warm. The
invariants of `test_operator_lag_e2e` hold on every round.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from devstack.sim_operator import UpstreamOperator
from devstack.simulator import NodeSpec, Simulator
from devstack.upstream import Upstream
from shared import constants as k
from shared.config import OperatorMode
from shared.errors import TransientError
from shared.names import SetRef
from shared.reconcile import reconcile_set, request_wake
from shared.seats.reclaim.executor import forget_candidates
from tests.e2e.test_operator_lag_e2e import Invariants
from tests.fixtures.cocoon_objects import NS, set_manifest
from tests.fixtures.reconcile_world import World

pytestmark = pytest.mark.e2e

NAMES = ["waker", "idle"]
# The functions' clock runs ahead, so the idle set has been idle for hours.
SKEW = timedelta(hours=3)


@pytest.fixture(autouse=True)
def _fresh_candidates() -> Iterator[None]:
    forget_candidates()
    yield
    forget_candidates()


@pytest.mark.parametrize("upstream", list(Upstream), ids=[u.value for u in Upstream])
def test_a_reclaim_beside_a_paused_operator_lands_warm(world: World, upstream: Upstream) -> None:
    from shared.clients.kube import KubeClient

    sim = Simulator(
        api=world.http(),
        registry_url=world.registry.url,
        registry_prefix=world.prefix,
        nodes=[NodeSpec("node-1", seats=1)],
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
    settings = replace(
        world.settings, operator=OperatorMode.PRESENT, seat_reclaim_grace=timedelta(milliseconds=1)
    )
    kubes = {n: KubeClient.from_kubeconfig(str(world.kubeconfig)) for n in NAMES}
    inv = Invariants(world)

    def phase(name: str) -> str | None:
        out: str | None = world.get_set(NS, name).get("status", {}).get("phase")
        return out

    def pods(name: str) -> list[Any]:
        return world.pods(NS, name)

    def round_() -> None:
        sim.step()
        op.step()
        for name in NAMES:
            with contextlib.suppress(TransientError):  # a 503: redelivered next round
                reconcile_set(
                    SetRef(NS, name),
                    kube=kubes[name],
                    registry=world.snapshots,
                    settings=settings,
                    publisher=None,
                    now=datetime.now(UTC) + SKEW,
                )
        inv.observe(sim.api)

    def drive(what: str, until: Callable[[], bool], seconds: float = 40.0) -> None:
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            round_()
            if until():
                return
            time.sleep(0.02)
        state = {n: (phase(n), [p.metadata.name for p in pods(n)]) for n in NAMES}
        raise AssertionError(f"{what}: not reached: {state}; violations {inv.violations}")

    try:
        world.create_set(set_manifest("waker", suspend=None, phase=None, annotations={}))
        drive("waker running", lambda: phase("waker") == "Running")
        world.patch_set(NS, "waker", {"spec": {"suspend": True}})
        drive("waker released", lambda: phase("waker") == "Suspended" and not pods("waker"))
        world.create_set(
            set_manifest(
                "idle", suspend=None, phase=None, annotations={k.ANN_RECLAIMABLE_AFTER: "1h"}
            )
        )
        drive("idle holds the seat", lambda: phase("idle") == "Running")
        inv.mark()

        op.pause()
        request_wake(
            SetRef(NS, "waker"),
            kube=kubes["waker"],
            registry=world.snapshots,
            settings=settings,
            publisher=None,
        )
        deadline = time.monotonic() + 1.5
        while time.monotonic() < deadline:
            round_()
            time.sleep(0.02)
        # Nothing was done ahead of the operator: no restore pod, the idle set untouched.
        assert not pods("waker") and phase("idle") == "Running"
        op.resume(stale_sets_for=1.0)

        def landed() -> bool:
            woken = pods("waker")
            return (
                phase("waker") == "Running"
                and len(woken) == 1
                and bool(woken[0].metadata.annotations.get(k.ANN_VM_ID))
                and phase("idle") == "Suspended"
                and not pods("idle")
            )

        drive("the reclaim landed", landed)
        (pod,) = pods("waker")
        assert pod.metadata.annotations[k.ANN_RESTORE] == k.TRUE
        assert pod.metadata.annotations[k.ANN_LIFECYCLE_MESSAGE].startswith("restored warm")
        idle = world.get_set(NS, "idle")
        assert idle["metadata"]["annotations"].get(k.ANN_RECLAIMED_BY) == f"{NS}/waker"
        assert inv.violations == []
    finally:
        sim.api.close()
        op.api.close()
