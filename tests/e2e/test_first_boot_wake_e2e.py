"""A wake of a release set suspended before its first boot (no snapshot ever existed).

The functions leave it to the normal flow (a fresh boot, no WakeCompleted), so the
requester the wake recorded must go too: otherwise the next wake the operator completes
alone is booked to this caller. On both backends; the simulator plays both generations
of the operator and vk-cocoon.
"""

from __future__ import annotations

import time

import pytest

from devstack.sim_operator import UpstreamOperator
from devstack.simulator import NodeSpec, Simulator
from devstack.upstream import Upstream
from shared import constants as k
from shared.names import SetRef
from shared.reconcile import request_wake
from tests.fixtures.cocoon_objects import NS, SET, set_manifest
from tests.fixtures.reconcile_world import World

pytestmark = pytest.mark.e2e


@pytest.mark.parametrize("upstream", list(Upstream), ids=[u.value for u in Upstream])
def test_the_requester_is_forgotten_when_the_normal_flow_boots_fresh(
    world: World, upstream: Upstream
) -> None:
    world.create_set(set_manifest(suspend=True, phase="Suspended", annotations={}))
    ref = SetRef(NS, SET)

    out = request_wake(
        ref, kube=world.client, registry=world.snapshots, publisher=None, requester="alice"
    )

    assert "suspended before first boot" in out.reason
    assert k.ANN_WAKE_REQUESTED_BY not in world.get_set(NS, SET)["metadata"].get("annotations", {})
    sim = Simulator(
        api=world.http(),
        registry_url=world.registry.url,
        registry_prefix=world.prefix,
        nodes=[NodeSpec("node-1", seats=1)],
        play_operator=False,
        upstream=upstream,
    )
    op = UpstreamOperator(
        api=world.http(),
        registry_url=world.registry.url,
        registry_prefix=world.prefix,
        upstream=upstream,
    )
    try:
        sim.register_nodes()
        deadline = time.monotonic() + 20
        while world.get_set(NS, SET).get("status", {}).get("phase") != "Running":
            assert time.monotonic() < deadline, world.get_set(NS, SET).get("status")
            sim.step()
            op.step()
            time.sleep(0.02)
    finally:
        sim.api.close()
        op.api.close()
    (pod,) = world.pods(NS, SET)
    assert pod.metadata.annotations.get(k.ANN_RESTORE) != k.TRUE
    assert not [e for e in world.events(NS) if e.reason == k.REASON_WAKE_COMPLETED]
    assert k.ANN_WAKE_REQUESTED_BY not in world.get_set(NS, SET)["metadata"].get("annotations", {})
