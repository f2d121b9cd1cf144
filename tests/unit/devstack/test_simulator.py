"""The simulator's stand-ins must not fight the functions (docs/design.md#operator)."""

from __future__ import annotations

from typing import Any

import pytest

from devstack.kubeapi.builtin import default_pod
from devstack.placement import NodeInfo
from devstack.sim_normal_flow import (
    AnnotatePod,
    CreatePod,
    DeletePod,
    WriteSetStatus,
    decide_operator,
)
from devstack.sim_pods import main_pod_body
from devstack.sim_scheduler import BindPod, MarkUnschedulable, decide_scheduler
from devstack.sim_vkcocoon import (
    AUTO,
    COLD,
    FRESH,
    WARM,
    BootVM,
    FinalizeDelete,
    HibernateVM,
    RepublishState,
    decide_vk,
)
from devstack.upstream import Upstream
from shared import constants as k
from shared.names import vm_name

NODES = [
    NodeInfo("node-1", {k.LABEL_HOSTNAME: "node-1", k.LABEL_POOL: "default"}, 1),
    NodeInfo("node-2", {k.LABEL_HOSTNAME: "node-2", k.LABEL_POOL: "default"}, 1),
]

VM_A = vm_name("demo", "a", 0)


def a_set(
    *,
    policy: str = "release",
    phase: str | None = None,
    suspend: bool = False,
    hint: str = "",
    generation: int = 1,
) -> dict[str, Any]:
    ann = {k.ANN_HIBERNATED_ON_NODE: hint} if hint else {}
    obj: dict[str, Any] = {
        "apiVersion": k.API_VERSION,
        "kind": k.KIND,
        "metadata": {
            "name": "a",
            "namespace": "demo",
            "uid": "uid-a",
            "resourceVersion": "7",
            "generation": generation,
            "annotations": ann,
        },
        "spec": {"hibernatePolicy": policy, "suspend": suspend, "agent": {"image": "img"}},
        "status": {},
    }
    if phase:
        obj["status"]["phase"] = phase
    return obj


def a_pod(
    *,
    node: str = "",
    ready: bool = False,
    annotations: dict[str, str] | None = None,
    terminating: bool = False,
    name: str = "a-0",
    created: str = "2026-01-01T00:00:00Z",
) -> dict[str, Any]:
    body = main_pod_body(a_set())
    body["metadata"]["name"] = name
    body["metadata"]["uid"] = f"uid-{name}"
    body["metadata"]["creationTimestamp"] = created
    body["metadata"]["annotations"].update(annotations or {})
    if terminating:
        body["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:01Z"
    if node:
        body["spec"]["nodeName"] = node
    body["status"] = {"conditions": [{"type": "Ready", "status": "True" if ready else "False"}]}
    return body


def test_the_august_operator_names_the_vm_without_the_hash() -> None:
    actions = decide_operator(a_set(), [], Upstream.AUGUST)
    create = next(a for a in actions if isinstance(a, CreatePod))
    assert create.body["metadata"]["annotations"][k.ANN_VM_NAME] == "vk-demo-a-0"


def test_first_creation_builds_the_main_pod_without_restore_marker() -> None:
    actions = decide_operator(a_set(), [])
    create = next(a for a in actions if isinstance(a, CreatePod))
    meta = create.body["metadata"]
    assert meta["name"] == "a-0"
    assert meta["labels"][k.LABEL_ROLE] == k.ROLE_MAIN
    assert meta["labels"][k.LABEL_SET_NAME] == "a"
    # Today's operator names the VM with the hash (cocoon-common's VMNameForDeployment).
    assert meta["annotations"][k.ANN_VM_NAME] == vm_name("demo", "a", 0)
    assert k.ANN_RESTORE not in meta["annotations"]
    assert meta["ownerReferences"][0]["uid"] == "uid-a"
    assert create.body["spec"]["nodeSelector"] == {k.LABEL_POOL: "default"}
    status = next(a for a in actions if isinstance(a, WriteSetStatus))
    assert status.status["phase"] == "Pending"
    assert status.resource_version == "7"


@pytest.mark.parametrize(
    "the_set",
    [
        pytest.param(a_set(phase="Suspended"), id="suspended-unsuspended-awaiting-wake"),
        pytest.param(a_set(phase="Waking", hint="node-1"), id="waking"),
        pytest.param(a_set(phase="Suspending", suspend=True), id="suspending"),
        pytest.param(a_set(phase="Running", suspend=True), id="just-suspended"),
        pytest.param(a_set(phase="Running", hint="node-1"), id="hint-present-without-pod"),
    ],
)
def test_operator_never_creates_a_pod_the_functions_own(the_set: dict[str, Any]) -> None:
    actions = decide_operator(the_set, [])
    assert not [a for a in actions if isinstance(a, CreatePod)]
    assert not [
        a
        for a in actions
        if isinstance(a, WriteSetStatus)
        and a.status.get("phase") in ("Suspending", "Suspended", "Waking")
    ]


def test_phase_goes_running_when_the_main_is_ready() -> None:
    actions = decide_operator(a_set(phase="Pending"), [a_pod(node="node-1", ready=True)])
    status = next(a for a in actions if isinstance(a, WriteSetStatus))
    assert status.status["phase"] == "Running"
    assert not [a for a in actions if isinstance(a, CreatePod)]


def test_retain_suspend_hibernates_in_place() -> None:
    actions = decide_operator(
        a_set(policy="retain", phase="Running", suspend=True), [a_pod(node="node-1")]
    )
    assert AnnotatePod("demo", "a-0", {k.ANN_HIBERNATE: k.TRUE}) in actions
    assert any(isinstance(a, WriteSetStatus) and a.status["phase"] == "Suspending" for a in actions)


def test_scheduler_binds_one_and_marks_the_other_unschedulable_once() -> None:
    held = a_pod(name="c-0", node="node-2")
    first = a_pod(name="b-0", created="2026-01-01T00:00:01Z")
    second = a_pod(name="a-0", created="2026-01-01T00:00:02Z")
    actions = decide_scheduler([held, first, second], NODES)
    assert BindPod("demo", "b-0", "node-1") in actions
    unsched = [a for a in actions if isinstance(a, MarkUnschedulable)]
    assert unsched == [
        MarkUnschedulable("demo", "a-0", "0/2 nodes are available: 2 Insufficient seats.")
    ]
    # Already marked with the same message: no rewrite (no audit/event storm).
    second["status"]["conditions"] = [
        {
            "type": "PodScheduled",
            "status": "False",
            "reason": "Unschedulable",
            "message": unsched[0].message,
        }
    ]
    again = decide_scheduler([held, a_pod(name="b-0", node="node-1"), second], NODES)
    assert again == []


def test_a_terminating_pod_still_holds_its_seat() -> None:
    leaving = a_pod(name="x-0", node="node-1", terminating=True)
    waiting = a_pod(name="a-0")
    actions = decide_scheduler([leaving, a_pod(name="c-0", node="node-2"), waiting], NODES)
    assert not [a for a in actions if isinstance(a, BindPod)]


RESTORE = {k.ANN_RESTORE: k.TRUE}


@pytest.mark.parametrize(
    ("pod", "snapshots", "want"),
    [
        # No marker: vk-cocoon asks the registry at boot (restore if tagged, else fresh).
        pytest.param(a_pod(node="node-1"), {}, AUTO, id="no-marker"),
        pytest.param(
            a_pod(node="node-1", annotations={k.ANN_MANAGED: "false"}), {}, FRESH, id="unmanaged"
        ),
        pytest.param(
            a_pod(node="node-1", annotations=RESTORE),
            {"node-1": {VM_A}},
            WARM,
            id="restore-on-the-node-with-the-snapshot",
        ),
        pytest.param(
            a_pod(node="node-2", annotations=RESTORE),
            {"node-1": {VM_A}},
            COLD,
            id="restore-elsewhere-pulls",
        ),
    ],
)
def test_vk_boots_warm_cold_or_fresh(
    pod: dict[str, Any], snapshots: dict[str, set[str]], want: str
) -> None:
    actions = decide_vk([pod], snapshots)
    assert actions == [BootVM("demo", "a-0", VM_A, pod["spec"]["nodeName"], want)]


def test_vk_hibernates_a_running_vm_once_and_echoes_the_pods_stamp() -> None:
    """vk-cocoon never reads the set: the observed generation is the pod's stamp."""
    running = {
        k.ANN_VM_ID: "vm-1",
        k.ANN_LIFECYCLE_STATE: "ready",
        k.ANN_HIBERNATE: k.TRUE,
        k.ANN_GENERATION: "1",  # the set may be at 3: vk-cocoon cannot know
    }
    actions = decide_vk([a_pod(node="node-1", annotations=running)], {})
    assert actions == [HibernateVM("demo", "a-0", VM_A, "node-1", 1)]
    # Hibernated: the VM is gone, nothing is snapshotted again. August's vk-cocoon leaves
    # the report at the old stamp; today's re-marks its state at the new one.
    done = {
        **running,
        k.ANN_LIFECYCLE_STATE: "hibernated",
        k.ANN_LIFECYCLE_GENERATION: "1",
        k.ANN_GENERATION: "3",
    }
    assert decide_vk([a_pod(node="node-1", annotations=done)], {}) == []
    republished = decide_vk([a_pod(node="node-1", annotations=done)], {}, republish=True)
    assert republished == [RepublishState("demo", "a-0", 3)]
    current = {**done, k.ANN_LIFECYCLE_GENERATION: "3"}
    assert decide_vk([a_pod(node="node-1", annotations=current)], {}, republish=True) == []


def test_vk_finalizes_a_terminating_pod() -> None:
    actions = decide_vk([a_pod(node="node-1", terminating=True)], {})
    assert actions == [FinalizeDelete("demo", "a-0", "uid-a-0")]


def _sim() -> Any:
    from devstack.kubehttp import KubeHTTP
    from devstack.simulator import Simulator

    # The API client is never called by the bookkeeping under test.
    return Simulator(api=KubeHTTP("http://127.0.0.1:9"), registry_url="http://127.0.0.1:9")


@pytest.mark.parametrize(
    ("flagged", "warm_after"),
    [
        pytest.param(True, True, id="seat-release-keeps-the-warm-copy"),
        pytest.param(False, False, id="plain-delete-drops-it"),
    ],
)
def test_node_local_snapshot_survives_only_a_flagged_delete(
    flagged: bool, warm_after: bool
) -> None:
    sim = _sim()
    sim.node_snapshots = {"node-1": {VM_A}}
    ann = {k.ANN_VM_ID: "vm-1", k.ANN_LIFECYCLE_STATE: "hibernated"}
    if flagged:
        ann[k.ANN_KEEP_SNAPSHOT] = k.TRUE
    sim._remember([a_pod(node="node-1", annotations=ann)])
    sim._remember([])  # the pod is gone
    restore = a_pod(node="node-1", annotations=RESTORE)
    (boot,) = decide_vk([restore], sim.node_snapshots)
    assert isinstance(boot, BootVM)
    assert boot.how == (WARM if warm_after else COLD)


# --- the operator as its source behaves (issue 13) ---------------------------------------


def test_operator_stamps_the_generation_on_every_owned_pod_first() -> None:
    pod = a_pod(node="node-1", ready=True, annotations={k.ANN_GENERATION: "1"})
    actions = decide_operator(a_set(phase="Running", generation=4, suspend=True), [pod])
    assert actions[0] == AnnotatePod("demo", "a-0", {k.ANN_GENERATION: "4"})


def test_operator_ignores_a_labelled_pod_it_does_not_control() -> None:
    stranger = a_pod(node="node-1", ready=True)
    stranger["metadata"]["ownerReferences"] = []
    actions = decide_operator(a_set(phase="Pending", generation=4), [stranger])
    assert not [a for a in actions if isinstance(a, AnnotatePod)]
    # For the operator the set has no pod: it creates its own main.
    assert [a for a in actions if isinstance(a, CreatePod)]


def test_operator_deletes_a_main_whose_vm_spec_drifted_as_a_string() -> None:
    the_set = a_set(phase="Running")
    the_set["spec"]["agent"]["storage"] = "1024Mi"
    drifted = a_pod(node="node-1", ready=True, annotations={k.ANN_STORAGE: "1024Mi"})
    assert DeletePod("demo", "a-0", "uid-a-0") in decide_operator(the_set, [drifted])
    same = a_pod(node="node-1", ready=True, annotations={k.ANN_STORAGE: "1Gi"})
    assert not [a for a in decide_operator(the_set, [same]) if isinstance(a, DeletePod)]


@pytest.mark.parametrize(
    ("agent", "spec", "pod_change", "drifted"),
    [
        ({}, {}, {}, False),
        # Resources: CPU and memory, compared as amounts; requests default to limits.
        (
            {"resources": {"limits": {"cpu": "1"}}},
            {},
            {"limits": {"cpu": "1000m"}, "requests": {"cpu": "1"}},
            False,
        ),
        (
            {"resources": {"limits": {"cpu": "1"}}},
            {},
            {"limits": {"cpu": "2"}, "requests": {"cpu": "2"}},
            True,
        ),
        ({"resources": {"requests": {"memory": "1Gi"}}}, {}, {}, True),
        # ephemeral-storage is never compared (the API server defaults it into both).
        ({}, {}, {"limits": {"ephemeral-storage": "9Gi"}}, False),
        # "" and "default" are the same service account.
        ({"serviceAccountName": "default"}, {}, {}, False),
        ({"serviceAccountName": "agent"}, {}, {}, True),
        ({"envFrom": [{"secretRef": {"name": "s"}}]}, {}, {}, True),
        ({"envFrom": []}, {}, {}, False),
        # Scheduling: the pool and the snapshot CPU class of the nodeSelector.
        ({}, {"nodePool": "gpu"}, {}, True),
        ({}, {"snapshotCompatibilityClass": "zen4"}, {}, False),  # a live pod is adopted
    ],
)
def test_operator_drift_is_its_pod_spec_matches_agent(
    agent: dict[str, Any], spec: dict[str, Any], pod_change: dict[str, Any], drifted: bool
) -> None:
    the_set = a_set(phase="Running")
    pod = a_pod(node="node-1", ready=True)
    the_set["spec"]["agent"].update(agent)
    the_set["spec"].update(spec)
    if pod_change:
        pod["spec"]["containers"][0]["resources"] = pod_change
    deleted = [a for a in decide_operator(the_set, [pod]) if isinstance(a, DeletePod)]
    assert bool(deleted) is drifted
    # What the operator builds from the set, as the API server stores it (requests
    # defaulted from limits), is never drift for itself.
    own = main_pod_body(the_set)
    default_pod(own)
    own["spec"]["nodeName"] = "node-1"
    assert not [a for a in decide_operator(the_set, [own]) if isinstance(a, DeletePod)]


def test_operator_leaves_an_unfinished_wake_to_the_functions() -> None:
    the_set = a_set(phase="Running", hint="node-1")
    the_set["spec"]["agent"]["storage"] = "1024Mi"
    restoring = a_pod(node="node-1", annotations={k.ANN_RESTORE: k.TRUE, k.ANN_STORAGE: "x"})
    assert not [a for a in decide_operator(the_set, [restoring]) if isinstance(a, DeletePod)]


def test_the_august_operator_writes_failed_for_a_failed_main_before_suspend() -> None:
    failed = a_pod(node="node-1", annotations={k.ANN_LIFECYCLE_STATE: "failed"})
    actions = decide_operator(a_set(phase="Suspending", suspend=True), [failed], Upstream.AUGUST)
    (write,) = [a for a in actions if isinstance(a, WriteSetStatus)]
    assert write.status["phase"] == "Failed"
    # The whole status the operator builds beside it (no Ready=True on a failed set).
    ready = next(c for c in write.status["conditions"] if c["type"] == "Ready")
    assert ready["status"] == "False"


def test_todays_operator_checks_suspend_before_the_failed_main() -> None:
    failed = a_pod(node="node-1", annotations={k.ANN_LIFECYCLE_STATE: "failed"})
    actions = decide_operator(a_set(phase="Suspending", suspend=True), [failed])
    assert not [a for a in actions if isinstance(a, WriteSetStatus)]


@pytest.mark.parametrize(("upstream", "peer"), [(Upstream.TODAY, True), (Upstream.AUGUST, False)])
def test_a_restore_off_the_pushing_node_is_a_peer_transfer_only_today(
    upstream: Upstream, peer: bool
) -> None:
    sim = _sim()
    sim.upstream = upstream
    sim.node_snapshots = {"node-1": {VM_A}}
    assert sim._peer_has(VM_A, "node-2") is peer
    assert sim._peer_has(VM_A, "node-1") is False  # its own copy is a warm restore
