"""On a real kube-apiserver (RBAC, admission, audit webhook): the functions with exactly the
rights `infra/k8s/rbac.yaml` + `gke-binding.yaml` + `namespace-binding.yaml` give them.

The control plane is the session's real one (tests/fixtures/kube.py); the registry is the
real Distribution server. The test plays the user (admin identity), vk-cocoon and the
scheduler (pod annotations, status, binding): no kubelet or scheduler runs there. Each
function call runs as the identity of its target (token file users, as on GKE).
"""

from __future__ import annotations

import json
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from cloudevents.http import CloudEvent, to_binary

from devstack.realkube import AUDIT_TOKEN, PROJECT_ID, REPO_ROOT
from shared import constants as k
from shared.durations import format_rfc3339
from shared.names import vm_name
from tests.fixtures.cocoon_objects import NS, SET, VM0, pod_manifest, set_manifest
from tests.fixtures.reconcile_world import World

pytestmark = pytest.mark.e2e

UNBOUND = "team-unbound"
POD = f"{SET}-0"
K8S = REPO_ROOT / "infra" / "k8s"


def _manifest(name: str, namespace: str = "") -> str:
    text = (K8S / name).read_text().replace("PROJECT_ID", PROJECT_ID)
    return text.replace("NAMESPACE", namespace) if namespace else text


@pytest.fixture
def real(real_kube_session: Any) -> Any:
    real_kube_session.reset()
    real_kube_session.apply_manifest(_manifest("rbac.yaml"))
    real_kube_session.apply_manifest(_manifest("gke-binding.yaml"))
    return real_kube_session


@pytest.fixture
def rworld(real: Any, registry: Any, tmp_path: Path) -> Iterator[World]:
    """`NS` bound by namespace-binding.yaml; `UNBOUND` exists without a binding."""
    admin = real.write_kubeconfig(tmp_path / "admin.kubeconfig")
    w = World(kube=real, registry=registry, kubeconfig=admin, prefix=f"r{uuid.uuid4().hex[:10]}")
    w.ensure_namespace(NS)
    w.ensure_namespace(UNBOUND)
    real.apply_manifest(_manifest("namespace-binding.yaml", NS))
    try:
        yield w
    finally:
        w.close()


@pytest.fixture
def as_target(
    real: Any, rworld: World, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[Callable[[str], Any]]:
    """`as_target(t)`: a functions-framework client of target `t`, running as t's identity."""
    import functions_framework

    from functions import process

    for key, value in rworld.env.items():
        monkeypatch.setenv(key, value)
    monkeypatch.setenv("COCOON_AUDIT_TOKEN", AUDIT_TOKEN)

    def make(target: str) -> Any:
        identity = {"release": "release", "wake": "wake", "sweep": "sweep"}.get(target, "ingest")
        path = real.write_kubeconfig(tmp_path / f"{identity}.kubeconfig", identity=identity)
        monkeypatch.setenv("KUBECONFIG", str(path))
        process.reset()
        app = functions_framework.create_app(target=target, source=str(REPO_ROOT / "main.py"))
        return app.test_client()

    yield make
    process.reset()


def _post(client: Any, event: CloudEvent) -> Any:
    headers, body = to_binary(event)
    return client.post("/", headers=headers, data=body)


def _pushed(world: World, vm: str = VM0) -> CloudEvent:
    return CloudEvent(
        {"type": k.CE_SNAPSHOT_PUSHED, "source": "//tests/registry", "id": uuid.uuid4().hex},
        {
            "repository": f"{world.prefix}/{vm}",
            "tag": k.TAG_HIBERNATE,
            "digest": "sha256:" + "0" * 64,
        },
    )


def _wake(ns: str = NS) -> CloudEvent:
    return CloudEvent(
        {"type": k.CE_WAKE_REQUESTED, "source": "//tests/user", "id": uuid.uuid4().hex},
        {"namespace": ns, "name": SET},
    )


def _changed(ns: str = NS) -> CloudEvent:
    return CloudEvent(
        {"type": k.CE_SET_CHANGED, "source": "//tests", "id": uuid.uuid4().hex},
        {"namespace": ns, "name": SET},
    )


def _hibernated(world: World, ns: str = NS, state: str = "hibernated") -> dict[str, Any]:
    """A suspended release set whose main pod vk-cocoon hibernated, snapshot pushed.

    `state="hibernating"`: pushed, the VM removed, vk-cocoon's report still to come.
    """
    world.create_set(set_manifest(namespace=ns, suspend=False, phase="Running"))
    world.patch_set(ns, SET, {"spec": {"suspend": True}})
    cs = world.set_status(ns, SET, {"phase": "Suspending"})
    vm = vm_name(ns, SET, 0)
    manifest = pod_manifest(
        namespace=ns,
        vm=vm,
        hibernate=True,
        state=state,
        generation=cs["metadata"]["generation"],
    )
    world.create_pod(manifest, owner=cs)
    world.push_snapshot(vm)
    return cs


def _pod(world: World, ns: str = NS) -> Any:
    pods = [p for p in world.pods(ns, SET) if p.metadata.name == POD]
    return pods[0] if pods else None


def _released(world: World, ns: str = NS) -> bool:
    p = _pod(world, ns)
    return p is None or p.metadata.deletion_timestamp is not None


def _log_records(out: str) -> list[dict[str, Any]]:
    records = []
    for line in out.splitlines():
        try:
            records.append(json.loads(line))
        except ValueError:
            continue
    return records


def _kubelet_finalizes(world: World, ns: str = NS) -> None:
    """The kubelet's part after a graceful delete: the final delete with grace 0."""
    p = _pod(world, ns)
    if p is not None and p.metadata.deletion_timestamp is not None:
        world.core.delete_namespaced_pod(POD, ns, grace_period_seconds=0)


def _report_live(world: World, node: str = "node-a") -> None:
    """The scheduler binds the restored pod; vk-cocoon reports the VM live and Ready."""
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
    world.annotate_pod(NS, POD, {k.ANN_VM_ID: "vm-42"})
    world.pod_status(
        NS,
        POD,
        {
            "phase": "Running",
            "containerStatuses": [
                {
                    "name": k.MAIN_CONTAINER,
                    "ready": True,
                    "image": k.PLACEHOLDER_IMAGE,
                    "imageID": "",
                    "restartCount": 0,
                    "state": {"running": {"startedAt": "2026-01-01T00:00:00Z"}},
                }
            ],
            "conditions": [{"type": "Ready", "status": "True"}],
        },
    )


# --- release, wake and sweep with exactly the granted rights ------------------------


def test_release_then_wake_with_exactly_the_manifests_rights(
    rworld: World, as_target: Callable[[str], Any]
) -> None:
    _hibernated(rworld)
    assert _post(as_target("release"), _pushed(rworld)).status_code == 200
    assert _released(rworld)
    cs = rworld.get_set(NS, SET)
    assert cs["status"]["phase"] == "Suspended"
    assert cs["metadata"]["annotations"][k.ANN_HIBERNATED_ON_NODE] == "node-a"
    assert [e.reason for e in rworld.events(NS)] == [k.REASON_SEAT_RELEASED]
    _kubelet_finalizes(rworld)

    # The wake's pod carries a controller ownerReference with blockOwnerDeletion:
    # OwnerReferencesPermissionEnforcement demands `update` on cocoonsets/finalizers.
    assert _post(as_target("wake"), _wake()).status_code == 200
    pod = _pod(rworld)
    assert pod is not None and pod.metadata.annotations[k.ANN_RESTORE] == k.TRUE
    (ref,) = pod.metadata.owner_references
    assert (ref.kind, ref.name, ref.block_owner_deletion) == ("CocoonSet", SET, True)
    assert rworld.get_set(NS, SET)["status"]["phase"] == "Waking"

    _report_live(rworld)
    assert _post(as_target("wake"), _changed()).status_code == 200
    cs = rworld.get_set(NS, SET)
    assert k.ANN_HIBERNATED_ON_NODE not in cs["metadata"].get("annotations", {})
    assert not rworld.snapshot_present(VM0)
    assert k.REASON_WAKE_COMPLETED in [e.reason for e in rworld.events(NS)]


def test_a_push_that_beats_the_report_watches_the_pod_with_exactly_the_manifests_rights(
    rworld: World, as_target: Callable[[str], Any], capsys: pytest.CaptureFixture[str]
) -> None:
    # vk-cocoon pushes, removes the VM and only then reports: the push's invocation
    # waits for the report on a WATCH of the pod (shared/reconcile/report_wait.py), which
    # rbac.yaml must allow, or the seat stays held until the next event or sweep.
    _hibernated(rworld, state="hibernating")
    release = as_target("release")
    report = threading.Timer(
        1.0, rworld.annotate_pod, args=(NS, POD, {k.ANN_LIFECYCLE_STATE: "hibernated"})
    )
    report.start()
    try:
        started = time.monotonic()
        response = _post(release, _pushed(rworld))
        took = time.monotonic() - started
    finally:
        report.join()

    assert response.status_code == 200
    assert _released(rworld), "the seat was not freed by the push's own invocation"
    assert took < 4.0  # inside COCOON_REPORT_WAIT: freed right after the report
    assert "pod watch not opened" not in capsys.readouterr().out


def test_sweep_idle_suspends_with_exactly_the_manifests_rights(
    real: Any, rworld: World, tmp_path: Path
) -> None:
    from functions.sweep import run_sweep
    from shared.clients.kube import KubeClient

    old = format_rfc3339(datetime.now(UTC) - timedelta(hours=2))
    rworld.create_set(
        set_manifest(
            suspend=None,
            phase="Running",
            annotations={k.ANN_IDLE_TIMEOUT: "30m", k.ANN_LAST_ACTIVITY: old},
        )
    )
    sweeper = KubeClient.from_kubeconfig(
        str(real.write_kubeconfig(tmp_path / "sweep.kubeconfig", identity="sweep"))
    )
    summary = run_sweep(
        settings=rworld.settings,
        dry_run=False,
        kube=sweeper,
        registry=rworld.snapshots,
        now=datetime.now(UTC) + timedelta(hours=3),
    )
    assert rworld.get_set(NS, SET)["spec"]["suspend"] is True
    assert [e.reason for e in rworld.events(NS)] == [k.REASON_IDLE_SUSPENDED]
    assert summary is not None


# --- 403 is two things ------------------------------------------------------------------


def test_unbound_namespace_is_a_config_error_naming_namespace_and_verb(
    rworld: World, as_target: Callable[[str], Any], capsys: pytest.CaptureFixture[str]
) -> None:
    _hibernated(rworld, UNBOUND)
    capsys.readouterr()
    response = _post(as_target("release"), _pushed(rworld, vm_name(UNBOUND, SET, 0)))
    # Retried (non-2xx): a RoleBinding applied later lets the redelivery succeed.
    assert response.status_code >= 500
    failed = [r for r in _log_records(capsys.readouterr().out) if r.get("outcome") == "config"]
    assert failed, "the refusal must be logged as a configuration error"
    reason = failed[0]["reason"]
    assert f"in namespace {UNBOUND}" in reason
    assert "may not patch" in reason
    assert f"cocoon-release@{PROJECT_ID}" in reason
    # Nothing was written: the pod is untouched, no hibernate flag either.
    assert not _released(rworld, UNBOUND)


def _full_quota(world: World) -> None:
    world.core.create_namespaced_resource_quota(
        NS, {"metadata": {"name": "seats"}, "spec": {"hard": {"pods": "0"}}}
    )
    # No controller-manager: the quota's status is what the admission plugin reads;
    # the admin writes it as the quota controller would.
    world.core.patch_namespaced_resource_quota_status(
        "seats", NS, {"status": {"hard": {"pods": "0"}, "used": {"pods": "0"}}}
    )


def _restricted(world: World) -> None:
    world.core.patch_namespace(
        NS, {"metadata": {"labels": {"pod-security.kubernetes.io/enforce": "restricted"}}}
    )


def _no_service_account(world: World) -> None:
    # On a full cluster the ServiceAccount controller soon recreates it: a refusal that
    # fixes itself, which the sweep's next run then finds (the fixture recreates none).
    world.core.delete_namespaced_service_account("default", NS)


@pytest.mark.parametrize(
    ("refuse", "expected"),
    [
        pytest.param(_full_quota, "exceeded quota: seats", id="resourcequota"),
        pytest.param(_restricted, 'violates PodSecurity "restricted:latest"', id="podsecurity"),
        pytest.param(
            _no_service_account,
            f"error looking up service account {NS}/default",
            id="serviceaccount",
        ),
    ],
)
def test_admission_refusal_is_acknowledged_with_a_warning_event(
    real: Any,
    rworld: World,
    as_target: Callable[[str], Any],
    refuse: Callable[[World], None],
    expected: str,
) -> None:
    _hibernated(rworld)
    assert _post(as_target("release"), _pushed(rworld)).status_code == 200
    _kubelet_finalizes(rworld)
    refuse(rworld)  # the wake's pod create will be refused by an admission plugin
    assert _post(as_target("wake"), _wake()).status_code == 200  # acknowledged
    assert _pod(rworld) is None
    warnings = [e for e in rworld.events(NS) if e.reason == k.REASON_WRITE_REFUSED]
    assert len(warnings) == 1 and warnings[0].type == "Warning"
    assert expected in warnings[0].message
    # A redelivery (or the sweep) tries again and does not repeat the Warning.
    assert _post(as_target("wake"), _changed()).status_code == 200
    assert len([e for e in rworld.events(NS) if e.reason == k.REASON_WRITE_REFUSED]) == 1


# --- the real audit webhook -------------------------------------------------------------


def test_real_audit_webhook_drives_a_release_end_to_end(
    real: Any, rworld: World, as_target: Callable[[str], Any]
) -> None:
    from tests.conformance.helpers import wait_for

    _hibernated(rworld)
    ingest = as_target("ingest")
    answers: list[int] = []

    def forward(body: bytes, headers: dict[str, str]) -> None:
        # What the real server sent, as it sent it (the committed webhook kubeconfig's token).
        r = ingest.post(
            "/kubernetes/audit",
            data=body,
            headers={
                "Authorization": headers.get("Authorization", ""),
                "Content-Type": headers.get("Content-Type", "application/json"),
            },
        )
        answers.append(r.status_code)

    real.audit_sink.clear()
    real.audit_sink.forward = forward
    # vk-cocoon's last word on the pod (a pods patch: audited by infra/k8s/audit/policy.yaml).
    rworld.annotate_pod(NS, POD, {k.ANN_LIFECYCLE_MESSAGE: "snapshot pushed"})
    wait_for(lambda: bool(answers), timeout=20, interval=0.1)
    wait_for(lambda: _released(rworld), timeout=20, interval=0.1)
    assert answers and all(a == 202 for a in answers)
    batches = list(real.audit_sink.batches)
    assert {(b["apiVersion"], b["kind"]) for b in batches} == {("audit.k8s.io/v1", "EventList")}
    events = real.audit_sink.events()
    assert all(e["level"] == "Metadata" and e["stage"] == "ResponseComplete" for e in events)
    import os

    if os.environ.get("C14_RECORD"):
        Path(os.environ["C14_RECORD"]).write_bytes(real.audit_sink.raw[0])
    assert {e["objectRef"]["resource"] for e in events} <= {"pods", "cocoonsets"}
    wait_for(lambda: rworld.get_set(NS, SET)["status"].get("phase") == "Suspended", timeout=20)


# --- the whole story: simulator + real audit webhook, no test-driven triggers ---------


def test_simulated_cluster_hibernates_and_wakes_through_the_real_audit_webhook(
    real: Any, rworld: World, as_target: Callable[[str], Any], registry: Any
) -> None:
    """The cluster simulator (scheduler, kubelet, operator, vk-cocoon) talks to the real
    kube-apiserver over https as admin; every function call is driven by what the real
    audit webhook sends to `ingest`, except the user's wake request."""
    from devstack.kubehttp import KubeHTTP
    from devstack.simulator import NodeSpec, Simulator
    from tests.conformance.helpers import wait_for

    ingest = as_target("ingest")
    wake = as_target("wake")
    answers: list[int] = []

    def forward(body: bytes, headers: dict[str, str]) -> None:
        r = ingest.post(
            "/kubernetes/audit",
            data=body,
            headers={
                "Authorization": headers.get("Authorization", ""),
                "Content-Type": "application/json",
            },
        )
        answers.append(r.status_code)

    real.audit_sink.forward = forward
    api = KubeHTTP(real.url, token=real.tokens["admin"], ca_file=str(real.dir / "ca.crt"))
    sim = Simulator(
        api=api,
        registry_url=registry.url,
        registry_prefix=rworld.prefix,
        nodes=[NodeSpec("node-a"), NodeSpec("node-b")],
        interval=0.05,
        # The real fixture serves no metrics.k8s.io: with vk-cocoon's push -> report gap
        # the run outlasts the first metrics tick, whose PUT would 404.
        metrics_interval=0,
    )
    sim.start()
    try:
        manifest = set_manifest(suspend=False, phase=None)
        for f in ("uid", "resourceVersion", "generation"):
            manifest["metadata"].pop(f, None)
        rworld.create_set(manifest)

        def phase() -> str | None:
            got: str | None = rworld.get_set(NS, SET).get("status", {}).get("phase")
            return got

        wait_for(lambda: phase() == "Running", timeout=30, interval=0.1)
        rworld.patch_set(NS, SET, {"spec": {"suspend": True}})
        # ingest -> release: hibernate request, vk-cocoon pushes, registry-verified delete,
        # the simulator's kubelet finalizes the pod: the seat is free.
        wait_for(lambda: phase() == "Suspended" and _pod(rworld) is None, timeout=60)
        assert rworld.snapshot_present(vm_name(NS, SET, 0))
        assert _post(wake, _wake()).status_code == 200
        wait_for(lambda: phase() == "Running", timeout=60, interval=0.1)
        assert not rworld.snapshot_present(vm_name(NS, SET, 0))
        assert [(r.how, r.node) for r in sim.restores] == [("warm", "node-a")]
        assert answers and set(answers) == {202}
        assert not sim.errors, sim.errors
    finally:
        sim.stop()
        api.close()
