"""Issue 13 end to end: the functions beside the real cocoon-operator and vk-cocoon.

Each test is a situation a new user hit, replayed through functions-framework,
the embedded Kubernetes API and a real Distribution registry. The test plays
vk-cocoon exactly as its source behaves where it matters: it echoes the
*pod's* generation stamp, never the set's.
"""

from __future__ import annotations

from typing import Any

import pytest
from cloudevents.http import to_binary
from prometheus_client.parser import text_string_to_metric_families

from functions.serve import create_app
from shared import constants as k
from tests.e2e.test_release_e2e import (
    POD,
    gone_or_terminating,
    hibernated_main,
    post,
    pushed_event,
    suspended_set,
)
from tests.e2e.test_wake_e2e import changed_event, released_set, report_live, wake_event
from tests.fixtures.cocoon_objects import NS, SET, VM0, pod_manifest
from tests.fixtures.ingest import serve_doors, signed
from tests.fixtures.reconcile_world import REPO_ROOT, World

pytestmark = pytest.mark.e2e


def pod_annotations(world: World, name: str = POD) -> dict[str, str]:
    pod = next(p for p in world.pods(NS, SET) if p.metadata.name == name)
    return dict(pod.metadata.annotations or {})


def vk_echoes_the_pods_stamp(world: World, name: str = POD) -> None:
    """vk-cocoon's hibernated report: the observed generation is the pod's own stamp."""
    stamp = pod_annotations(world, name).get(k.ANN_GENERATION, "0")
    world.annotate_pod(
        NS, name, {k.ANN_LIFECYCLE_STATE: "hibernated", k.ANN_LIFECYCLE_GENERATION: stamp}
    )


def test_a_lagging_stamp_is_brought_current_so_the_release_completes(
    world: World, function_app: Any
) -> None:
    """Defect 1: set at generation 2, pod stamped 1, vk reporting hibernated at 1."""
    cs = suspended_set(world)
    assert cs["metadata"]["generation"] == 2
    hibernated_main(world, cs, stamp=1, generation=1)
    world.push_snapshot(VM0)
    release = function_app("release")

    assert post(release, pushed_event(world)).status_code == 200
    # Not released on the stale report, but the stamp is now the set's generation...
    assert not gone_or_terminating(world)
    assert pod_annotations(world)[k.ANN_GENERATION] == "2"
    # ...so vk-cocoon's next report (it echoes the pod) passes the gate.
    vk_echoes_the_pods_stamp(world)
    assert post(release, pushed_event(world)).status_code == 200
    assert gone_or_terminating(world)
    assert world.get_set(NS, SET)["status"]["phase"] == "Suspended"


def test_a_labelled_pod_the_set_does_not_control_is_never_deleted(
    world: World, function_app: Any
) -> None:
    """Defect 2: a second pod with the set's labels and no owner reference."""
    cs = suspended_set(world)
    hibernated_main(world, cs)
    stranger_vm = "vk-team-a-stranger"
    world.create_pod(
        pod_manifest(
            name="stranger",
            vm=stranger_vm,
            owner_uid=None,
            hibernate=True,
            state="hibernated",
            generation=2,
            stamp=1,
        )
    )
    world.push_snapshot(VM0)
    world.push_snapshot(stranger_vm)

    assert post(function_app("release"), pushed_event(world)).status_code == 200

    assert gone_or_terminating(world)  # the set's own pod
    assert not gone_or_terminating(world, "stranger")
    stranger = pod_annotations(world, "stranger")
    assert stranger[k.ANN_GENERATION] == "1"  # never stamped
    assert k.ANN_KEEP_SNAPSHOT not in stranger  # never flagged
    after = world.get_set(NS, SET)
    assert after["metadata"]["annotations"][k.ANN_DELETE_VM_NAMES] == VM0  # never stashed
    assert after["status"]["phase"] == "Suspended"


def test_a_woken_pod_carries_the_storage_the_operator_would_write(
    world: World, function_app: Any
) -> None:
    """Defect 3: `1024Mi` on the woken pod beside the operator's `1Gi` is drift."""
    released_set(world, agent={"storage": "1024Mi"})
    assert post(function_app("wake"), wake_event()).status_code == 200
    pod = next(p for p in world.pods(NS, SET) if p.metadata.name == POD)
    assert pod.metadata.annotations[k.ANN_STORAGE] == "1Gi"
    assert str(pod.spec.containers[0].resources.requests["ephemeral-storage"]) == "1Gi"


def test_a_woken_pod_as_stored_is_not_drift_for_the_operator(
    world: World, function_app: Any
) -> None:
    """The operator deletes a main pod that fails its podSpecMatchesAgent: the woken pod,
    as the API server stored it (quantities, defaults), must pass it."""
    from devstack.sim_pods import pod_spec_drifted

    released_set(
        world,
        agent={
            "storage": "1024Mi",
            "resources": {"limits": {"cpu": "1500m", "memory": "2Gi"}},
            "envFrom": [{"configMapRef": {"name": "agent-env"}}],
        },
        spec={"nodePool": "gpu", "snapshotCompatibilityClass": "zen4"},
    )
    assert post(function_app("wake"), wake_event()).status_code == 200
    stored = world.core.api_client.sanitize_for_serialization(
        world.core.read_namespaced_pod(POD, NS)
    )
    assert not pod_spec_drifted(world.get_set(NS, SET), stored)


def test_a_vm_whose_hibernate_failed_is_kept_and_its_timeout_never_flipped(
    world: World, function_app: Any
) -> None:
    """Today's operator checks suspend first and counts only kubelet-Failed pods as
    terminal (docs/compatibility.md): a VM vk-cocoon reports `failed` during its hibernate
    still holds the user's state, so the release waits; the operator's SuspendTimedOut
    writes `Failed`, and the functions never write over it."""
    cs = suspended_set(world)
    hibernated_main(world, cs, state="failed")
    world.push_snapshot(VM0)
    release = function_app("release")

    assert post(release, pushed_event(world)).status_code == 200
    assert world.get_set(NS, SET)["status"]["phase"] == "Suspending"
    assert not gone_or_terminating(world)
    world.set_status(NS, SET, {"phase": "Failed"})  # the operator's suspend timeout
    version = world.get_set(NS, SET)["metadata"]["resourceVersion"]
    # Another event (or the sweep) leaves it as it is: no flip, no write.
    assert post(release, changed_event()).status_code == 200
    assert world.get_set(NS, SET)["metadata"]["resourceVersion"] == version
    assert not gone_or_terminating(world)


def test_the_status_beside_suspended_is_the_operators(world: World, function_app: Any) -> None:
    """Defect 6: no Ready=True and no stale observedGeneration on a Suspended set."""
    cs = suspended_set(world)
    world.set_status(
        NS,
        SET,
        {
            "observedGeneration": 1,
            "conditions": [
                {
                    "type": "Ready",
                    "status": "True",
                    "reason": "AllAgentsReady",
                    "message": "1/1 agents ready, 0/0 toolboxes ready",
                    "observedGeneration": 1,
                    "lastTransitionTime": "2026-01-01T00:00:00Z",
                }
            ],
        },
    )
    hibernated_main(world, cs)
    world.push_snapshot(VM0)

    assert post(function_app("release"), pushed_event(world)).status_code == 200
    status = world.get_set(NS, SET)["status"]
    assert status["phase"] == "Suspended"
    assert status["observedGeneration"] == 2
    assert status["readyAgents"] == 0 and status["desiredAgents"] == 1
    ready = next(c for c in status["conditions"] if c["type"] == "Ready")
    assert (ready["status"], ready["reason"], ready["observedGeneration"]) == (
        "False",
        "AgentsNotReady",
        2,
    )


def _post_to(client: Any, path: str, event: Any) -> Any:
    headers, body = to_binary(event)
    return client.post(path, headers=signed(headers, event["type"]), data=body)


def _scrape(client: Any) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    resp = client.get("/metrics")
    assert resp.status_code == 200
    assert resp.headers["Content-Type"].startswith("text/plain")
    samples = {}
    for family in text_string_to_metric_families(resp.get_data(as_text=True)):
        for sample in family.samples:
            samples[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return samples


def test_serve_exposes_the_operator_counters_after_a_release_and_a_wake(
    world: World, function_app: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Defect 7: `GET /metrics` on `serve`, in Prometheus text format, under the
    operator's names and labels (counters are per process: compare before/after)."""
    function_app("release")  # sets the environment for `world`
    serve_doors(monkeypatch)
    client = create_app(REPO_ROOT / "main.py").test_client()
    ours = (("cocoonset", SET), ("namespace", NS))
    deleted = ("cocoon_operator_slot_release_pods_deleted_total", ours)
    woken = (
        "cocoon_operator_slot_release_wake_total",
        (("cocoonset", SET), ("namespace", NS), ("placement", "hint-node")),
    )
    unschedulable = ("cocoon_operator_slot_release_wake_unschedulable_total", ours)
    before = _scrape(client)

    cs = suspended_set(world)
    hibernated_main(world, cs, node="node-a")
    world.push_snapshot(VM0)
    assert _post_to(client, "/release", pushed_event(world)).status_code == 200
    assert gone_or_terminating(world)
    # The kubelet's part (the emulator runs none): the released pod goes away.
    world.core.delete_namespaced_pod(POD, NS, grace_period_seconds=0)

    assert _post_to(client, "/wake", wake_event()).status_code == 200
    world.pod_status(
        NS,
        POD,
        {
            "phase": "Pending",
            "conditions": [
                {
                    "type": "PodScheduled",
                    "status": "False",
                    "reason": "Unschedulable",
                    "message": "0/1 nodes are available: 1 Too many pods.",
                }
            ],
        },
    )
    assert _post_to(client, "/wake", changed_event()).status_code == 200
    report_live(world, node="node-a")
    assert _post_to(client, "/wake", changed_event()).status_code == 200

    after = _scrape(client)
    for key in (deleted, woken, unschedulable):
        assert after[key] == before.get(key, 0.0) + 1, key
