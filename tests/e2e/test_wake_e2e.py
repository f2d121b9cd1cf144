"""Wake (docs/design.md#wake) end to end: wake requests and change events through
functions-framework, the embedded Kubernetes API and a real Distribution
registry. The test plays vk-cocoon (reporting the restored VM live) and the
user (unsuspending).
"""

from __future__ import annotations

import socket
import threading
import uuid
from typing import Any

import pytest
from cloudevents.http import CloudEvent, to_binary, to_structured

from shared import constants as k
from shared.errors import TransientError
from shared.reconcile import reconcile_set
from shared.reconcile.steps import CreateMain, RereadMain, Step
from tests.e2e.test_release_e2e import metric_lines, successful
from tests.fixtures.cocoon_objects import NS, SET, VM0, pod_manifest, set_manifest
from tests.fixtures.reconcile_world import World, ref_of

pytestmark = pytest.mark.e2e

POD = f"{SET}-0"
PODS_PATH = f"/api/v1/namespaces/{NS}/pods"
STATUS_PATH = f"/apis/{k.GROUP}/{k.VERSION}/namespaces/{NS}/{k.PLURAL}/{SET}/status"


def released_set(
    world: World,
    *,
    suspend: bool = True,
    phase: str = "Suspended",
    hint: str | None = "node-a",
    snapshot: bool = True,
    **kw: Any,
) -> dict[str, Any]:
    """A set whose seat was released: no pods, the hint and stash on the set, the tag pushed."""
    annotations = {k.ANN_DELETE_VM_NAMES: VM0}
    manifest = set_manifest(suspend=suspend, phase=phase, hint=hint, annotations=annotations, **kw)
    cs = world.create_set(manifest)
    if snapshot:
        world.push_snapshot(VM0)
    return cs


def wake_event(name: str = SET) -> CloudEvent:
    return CloudEvent(
        {"type": k.CE_WAKE_REQUESTED, "source": "//tests/user", "id": uuid.uuid4().hex},
        {"namespace": NS, "name": name},
    )


def changed_event() -> CloudEvent:
    return CloudEvent(
        {"type": k.CE_SET_CHANGED, "source": "//tests", "id": uuid.uuid4().hex},
        {"namespace": NS, "name": SET},
    )


def post(client: Any, event: CloudEvent, *, structured: bool = False) -> Any:
    headers, body = to_structured(event) if structured else to_binary(event)
    return client.post("/", headers=headers, data=body)


def main_pod(world: World) -> Any:
    pods = [p for p in world.pods(NS, SET) if p.metadata.name == POD]
    return pods[0] if pods else None


def report_live(world: World, *, node: str = "node-a", ready: bool = True) -> None:
    """vk-cocoon restored the VM: id annotation, a running container, maybe Ready."""
    world.annotate_pod(NS, POD, {k.ANN_VM_ID: "vm-42"})
    status: dict[str, Any] = {
        "phase": "Running",
        "containerStatuses": [
            {
                "name": k.MAIN_CONTAINER,
                "ready": ready,
                "image": k.PLACEHOLDER_IMAGE,
                "imageID": "",
                "restartCount": 0,
                "state": {"running": {"startedAt": "2026-01-01T00:00:00Z"}},
            }
        ],
        "conditions": [{"type": "Ready", "status": "True" if ready else "False"}],
    }
    if main_pod(world).spec.node_name is None:
        # The scheduler's part (the emulator runs none): bind the pod to a node.
        world.core.create_namespaced_pod_binding(
            POD,
            NS,
            {
                "apiVersion": "v1",
                "kind": "Binding",
                "metadata": {"name": POD},
                "target": {"apiVersion": "v1", "kind": "Node", "name": node},
            },
            _preload_content=False,
        )
    world.pod_status(NS, POD, status)


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


# --- starting a wake --------------------------------------------------------------


@pytest.mark.embedded_only("asserts on the emulator's request log")
def test_wake_recreates_the_main_pod_with_restore_intent_and_a_preferred_affinity(
    world: World, function_app: Any
) -> None:
    released_set(world, spec={"snapshotCompatibilityClass": "zen4"})
    world.reset_log()

    assert post(function_app("wake"), wake_event()).status_code == 200

    cs = world.get_set(NS, SET)
    assert cs["spec"]["suspend"] is False
    assert cs["status"]["phase"] == "Waking"
    pod = main_pod(world)
    assert pod.metadata.annotations[k.ANN_RESTORE] == k.TRUE
    preferred = pod.spec.affinity.node_affinity.preferred_during_scheduling_ignored_during_execution
    assert preferred[0].weight == 100
    assert preferred[0].preference.match_expressions[0].values == ["node-a"]
    assert (
        pod.spec.affinity.node_affinity.required_during_scheduling_ignored_during_execution is None
    )
    assert pod.spec.node_selector == {k.LABEL_POOL: "default", k.LABEL_SNAPSHOT_CPU_CLASS: "zen4"}
    assert pod.spec.node_name is None
    # Waking is durable before the pod exists.
    log = [(r["method"], r["path"], r["status"]) for r in world.api_requests()]
    assert log.index(("PATCH", STATUS_PATH, 200)) < log.index(("POST", PODS_PATH, 201))


def test_a_node_name_pin_wins_over_the_hint(world: World, function_app: Any) -> None:
    released_set(world, spec={"nodeName": "node-pinned"})

    assert post(function_app("wake"), wake_event(), structured=True).status_code == 200

    affinity = main_pod(world).spec.affinity.node_affinity
    assert affinity.preferred_during_scheduling_ignored_during_execution is None
    terms = affinity.required_during_scheduling_ignored_during_execution.node_selector_terms
    assert terms[0].match_expressions[0].values == ["node-pinned"]


def test_a_fast_unsuspend_from_suspending_with_a_hint_restores(
    world: World, function_app: Any
) -> None:
    released_set(world, suspend=False, phase="Suspending")

    assert post(function_app("wake"), changed_event()).status_code == 200

    assert main_pod(world).metadata.annotations[k.ANN_RESTORE] == k.TRUE
    assert world.get_set(NS, SET)["status"]["phase"] == "Waking"


def test_suspending_without_a_hint_is_left_alone(world: World, function_app: Any) -> None:
    released_set(world, suspend=False, phase="Suspending", hint=None)

    assert post(function_app("wake"), changed_event()).status_code == 200

    assert main_pod(world) is None
    assert world.get_set(NS, SET)["status"]["phase"] == "Suspending"


def test_no_snapshot_means_nothing_is_created(world: World, function_app: Any) -> None:
    released_set(world, snapshot=False, hint=None)

    assert post(function_app("wake"), wake_event()).status_code == 200

    assert main_pod(world) is None
    assert world.get_set(NS, SET)["status"]["phase"] == "Suspended"


def test_a_registry_probe_error_creates_nothing_and_retries(
    world: World, function_app: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    released_set(world)
    monkeypatch.setenv("COCOON_REGISTRY_BASE", f"127.0.0.1:{_closed_port()}/{world.prefix}")

    assert post(function_app("wake"), wake_event()).status_code == 500

    assert main_pod(world) is None
    assert world.get_set(NS, SET)["status"]["phase"] == "Suspended"


def test_a_stale_main_is_waited_out_then_restored(world: World) -> None:
    cs = released_set(world, suspend=False)
    world.create_pod(pod_manifest(hibernate=True, state="hibernated"), owner=cs)

    def vanish(step: Step) -> None:
        # The listed main was the ghost of the pod the release deleted.
        if isinstance(step, RereadMain):
            world.core.delete_namespaced_pod(POD, NS, grace_period_seconds=0)

    with pytest.raises(TransientError):
        reconcile_set(ref_of(cs), kube=world.client, registry=world.snapshots, hook=vanish)
    assert main_pod(world) is None

    out = reconcile_set(ref_of(cs), kube=world.client, registry=world.snapshots)  # the redelivery
    assert out.created_main
    assert main_pod(world).metadata.annotations[k.ANN_RESTORE] == k.TRUE


@pytest.mark.embedded_only("asserts on the emulator's request log")
def test_an_old_main_still_terminating_is_waited_out_then_restored(
    world: World, function_app: Any
) -> None:
    cs = released_set(world, phase="Suspending")
    old = pod_manifest(hibernate=True, state="hibernated")
    old["metadata"]["finalizers"] = ["tests.cocoonstack.io/hold"]
    world.create_pod(old, owner=cs)
    # The release's delete landed but the pod is still leaving (held by a finalizer).
    world.core.delete_namespaced_pod(POD, NS, grace_period_seconds=0)
    world.patch_set(NS, SET, {"spec": {"suspend": False}})  # the user unsuspends
    world.reset_log()
    wake = function_app("wake")

    assert post(wake, changed_event()).status_code == 500  # retry shortly, no create storm

    assert successful(world, "POST", PODS_PATH) == []
    assert len(world.api_requests()) < 10
    assert world.get_set(NS, SET)["status"]["phase"] == "Waking"  # durable for the sweep
    world.core.patch_namespaced_pod(
        POD, NS, {"metadata": {"finalizers": None}}, _content_type="application/merge-patch+json"
    )
    assert main_pod(world) is None  # the old pod is gone

    assert post(wake, changed_event()).status_code == 200  # the redelivery

    assert main_pod(world).metadata.annotations[k.ANN_RESTORE] == k.TRUE


@pytest.mark.embedded_only("asserts on the emulator's request log")
def test_a_main_pod_name_taken_by_a_foreign_pod_ends_the_run(world: World) -> None:
    cs = released_set(world, suspend=False, phase="Waking")
    taken: list[str] = []

    def squat(step: Step) -> None:
        # Another workload (say a StatefulSet also named "agent") takes the name
        # between the decision and the create; the pod is not the set's.
        if isinstance(step, CreateMain) and not taken:
            world.core.create_namespaced_pod(
                NS,
                {
                    "metadata": {"name": POD},
                    "spec": {"containers": [{"name": "c", "image": "busybox"}]},
                },
            )
            taken.append(POD)

    world.reset_log()
    with pytest.raises(TransientError, match="name is taken"):
        reconcile_set(ref_of(cs), kube=world.client, registry=world.snapshots, hook=squat)

    refused = [r for r in world.api_requests() if r["method"] == "POST" and r["status"] == 409]
    assert len(refused) == 1  # one create, answered AlreadyExists, then the run ends
    # Still the foreign pod, untouched.
    assert world.core.read_namespaced_pod(POD, NS).metadata.labels is None


def test_a_truly_alive_hibernated_main_is_left_to_the_in_place_wake(
    world: World, function_app: Any
) -> None:
    cs = released_set(world, suspend=False)
    original = world.create_pod(pod_manifest(hibernate=True, state="hibernated"), owner=cs)

    assert post(function_app("wake"), changed_event()).status_code == 200

    pod = main_pod(world)
    assert pod.metadata.uid == original.metadata.uid
    assert k.ANN_RESTORE not in (pod.metadata.annotations or {})
    cs_now = world.get_set(NS, SET)
    assert cs_now["status"]["phase"] == "Suspended"
    assert world.snapshot_present(VM0)
    # Nothing was released: the hint would only block idle suspend forever; the
    # VM-name stash stays for teardown.
    assert k.ANN_HIBERNATED_ON_NODE not in cs_now["metadata"]["annotations"]
    assert cs_now["metadata"]["annotations"][k.ANN_DELETE_VM_NAMES] == VM0


@pytest.mark.embedded_only("asserts on the emulator's request log")
def test_a_suspended_retain_placeholder_is_left_alone(world: World, function_app: Any) -> None:
    cs = released_set(world, suspend=False, hint=None, policy="retain")
    world.create_pod(pod_manifest(hibernate=True, state="hibernated"), owner=cs)
    world.reset_log()

    assert post(function_app("wake"), changed_event()).status_code == 200

    assert [r["method"] for r in world.api_requests()] == ["GET", "GET"]  # the set, its pods
    assert world.snapshot_present(VM0)


# --- restoring and completing -----------------------------------------------------


def test_restoring_keeps_the_tag(world: World, function_app: Any) -> None:
    released_set(world)
    wake = function_app("wake")
    assert post(wake, wake_event()).status_code == 200

    assert post(wake, changed_event()).status_code == 200  # re-entry while not live

    assert world.snapshot_present(VM0)
    cs = world.get_set(NS, SET)
    assert cs["status"]["phase"] == "Waking"
    assert cs["metadata"]["annotations"][k.ANN_HIBERNATED_ON_NODE] == "node-a"


def test_live_drops_the_tag_and_clears_the_hint(
    world: World, function_app: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    released_set(world)
    wake = function_app("wake")
    assert post(wake, wake_event()).status_code == 200
    report_live(world, node="node-a")

    assert post(wake, changed_event()).status_code == 200

    assert not world.snapshot_present(VM0)
    cs = world.get_set(NS, SET)
    annotations = cs["metadata"]["annotations"]
    assert k.ANN_HIBERNATED_ON_NODE not in annotations
    assert k.ANN_LAST_WAKE in annotations
    assert cs["status"]["phase"] == "Running"
    # One request, one completion: who asked, then that it landed, each once.
    assert sorted(e.reason for e in world.events(NS)) == [
        k.REASON_WAKE_COMPLETED,
        k.REASON_WAKE_REQUESTED,
    ]
    counted = metric_lines(capsys.readouterr().out, k.METRIC_WAKE)
    assert [c["labels"]["placement"] for c in counted] == [k.PLACEMENT_HINT_NODE]


def test_a_wake_landing_elsewhere_counts_pool_placement(
    world: World, function_app: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    released_set(world)
    wake = function_app("wake")
    assert post(wake, wake_event()).status_code == 200
    report_live(world, node="node-z", ready=False)

    assert post(wake, changed_event()).status_code == 200

    assert world.get_set(NS, SET)["status"]["phase"] == "Pending"  # live, not Ready yet
    counted = metric_lines(capsys.readouterr().out, k.METRIC_WAKE)
    assert [c["labels"]["placement"] for c in counted] == [k.PLACEMENT_POOL]


def test_running_never_consults_the_registry(
    world: World, function_app: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    released_set(world, suspend=False, phase="Running")
    # Any registry call would now fail the invocation.
    monkeypatch.setenv("COCOON_REGISTRY_BASE", f"127.0.0.1:{_closed_port()}/{world.prefix}")

    assert post(function_app("wake"), changed_event()).status_code == 200

    assert main_pod(world) is None


def test_completion_survives_a_stale_phase(world: World, function_app: Any) -> None:
    released_set(world)
    wake = function_app("wake")
    assert post(wake, wake_event()).status_code == 200
    report_live(world)
    world.set_status(NS, SET, {"phase": "Pending"})  # a stale writer overwrote Waking

    assert post(wake, changed_event()).status_code == 200

    assert not world.snapshot_present(VM0)
    cs = world.get_set(NS, SET)
    assert k.ANN_HIBERNATED_ON_NODE not in cs["metadata"]["annotations"]
    assert cs["status"]["phase"] == "Running"


def test_a_stale_phase_while_restoring_re_enters_waiting(world: World, function_app: Any) -> None:
    released_set(world)
    wake = function_app("wake")
    assert post(wake, wake_event()).status_code == 200
    world.set_status(NS, SET, {"phase": "Pending"})

    assert post(wake, changed_event()).status_code == 200

    assert world.get_set(NS, SET)["status"]["phase"] == "Waking"
    assert world.snapshot_present(VM0)
    assert len(world.pods(NS, SET)) == 1


@pytest.mark.embedded_only("asserts on the emulator's request log")
def test_a_completed_wake_disengages(world: World, function_app: Any) -> None:
    released_set(world)
    wake = function_app("wake")
    assert post(wake, wake_event()).status_code == 200
    report_live(world)
    assert post(wake, changed_event()).status_code == 200
    before = world.get_set(NS, SET)
    world.reset_log()

    assert post(wake, changed_event()).status_code == 200

    # Read-only: the set and its pods; nothing written, nothing asked of the registry.
    assert [r["method"] for r in world.api_requests()] == ["GET", "GET"]
    after = world.get_set(NS, SET)
    assert after["metadata"]["resourceVersion"] == before["metadata"]["resourceVersion"]
    # The request's WakeRequested and the landing's WakeCompleted, nothing more.
    assert len(world.events(NS)) == 2


def test_placement_is_counted_once_across_a_re_entry(
    world: World, function_app: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    released_set(world)
    wake = function_app("wake")
    assert post(wake, wake_event()).status_code == 200
    report_live(world, ready=False)

    for _ in range(3):
        assert post(wake, changed_event()).status_code == 200
    world.set_status(NS, SET, {"phase": "Waking"})  # a stale writer puts Waking back
    assert post(wake, changed_event()).status_code == 200

    assert len(metric_lines(capsys.readouterr().out, k.METRIC_WAKE)) == 1
    # One request, one completion: who asked, then that it landed, each once.
    assert sorted(e.reason for e in world.events(NS)) == [
        k.REASON_WAKE_COMPLETED,
        k.REASON_WAKE_REQUESTED,
    ]


def test_an_unschedulable_restore_warns_once_per_situation(
    world: World, function_app: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    released_set(world)
    wake = function_app("wake")
    assert post(wake, wake_event()).status_code == 200
    unschedulable = {
        "phase": "Pending",
        "conditions": [
            {
                "type": "PodScheduled",
                "status": "False",
                "reason": "Unschedulable",
                "message": "0/3 nodes are available: 3 Insufficient cpu.",
            }
        ],
    }
    world.pod_status(NS, POD, unschedulable)

    for _ in range(3):
        assert post(wake, changed_event()).status_code == 200

    warnings = [e for e in world.events(NS) if e.reason == k.REASON_WAKE_NO_CAPACITY]
    assert len(warnings) == 1
    assert warnings[0].type == "Warning"
    # Worded as the operator words it (issue 13).
    assert (
        warnings[0].message
        == "main pod agent-0 unschedulable: 0/3 nodes are available: 3 Insufficient cpu."
    )
    assert len(metric_lines(capsys.readouterr().out, k.METRIC_WAKE_UNSCHEDULABLE)) == 1
    assert world.get_set(NS, SET)["status"]["phase"] == "Waking"
    assert world.snapshot_present(VM0)


def test_a_wake_request_for_a_missing_or_retain_set_is_acknowledged(
    world: World, function_app: Any
) -> None:
    world.create_set(set_manifest(name="keeper", policy="retain", phase="Suspended"))
    wake = function_app("wake")

    assert post(wake, wake_event("nobody")).status_code == 200
    assert post(wake, wake_event("keeper")).status_code == 200

    assert world.get_set(NS, "keeper")["spec"]["suspend"] is True


def test_a_wake_request_restores_a_set_edited_to_retain_while_released(
    world: World, function_app: Any
) -> None:
    # The policy was edited release -> retain after the seat was released: the
    # hint and the snapshot are the evidence, not the policy value.
    released_set(world, policy="retain")

    assert post(function_app("wake"), wake_event()).status_code == 200

    cs = world.get_set(NS, SET)
    assert cs["spec"]["suspend"] is False
    assert cs["status"]["phase"] == "Waking"
    assert main_pod(world).metadata.annotations[k.ANN_RESTORE] == k.TRUE


@pytest.mark.embedded_only("asserts on the emulator's request log")
def test_twenty_concurrent_wake_requests_create_one_pod(
    world: World, function_app: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    released_set(world)
    wake = function_app("wake")
    world.reset_log()
    statuses: list[int] = []
    lock = threading.Lock()

    def burst(make_event: Any) -> None:
        start = threading.Barrier(20)

        def deliver() -> None:
            client = wake.application.test_client()
            start.wait()
            code = post(client, make_event()).status_code
            with lock:
                statuses.append(code)

        threads = [threading.Thread(target=deliver) for _ in range(20)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()

    burst(wake_event)
    assert statuses == [200] * 20
    assert len(successful(world, "POST", PODS_PATH)) == 1
    assert len(successful(world, "PATCH", STATUS_PATH)) == 1  # one Waking transition
    assert world.get_set(NS, SET)["status"]["phase"] == "Waking"

    report_live(world)
    statuses.clear()
    burst(changed_event)
    assert statuses == [200] * 20
    assert len(metric_lines(capsys.readouterr().out, k.METRIC_WAKE)) == 1
    assert world.get_set(NS, SET)["status"]["phase"] == "Running"
