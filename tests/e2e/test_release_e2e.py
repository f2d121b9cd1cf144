"""Release (docs/design.md#release) end to end: CloudEvents through functions-framework, the
embedded Kubernetes API (request log = proof of ordering) and a real
Distribution registry. vk-cocoon is played by the test: it annotates the pod
hibernated and pushes the `:hibernate` snapshot, as the real one would.
"""

from __future__ import annotations

import json
import socket
import threading
import uuid
from typing import Any

import pytest
from cloudevents.http import CloudEvent, to_binary, to_structured

from shared import constants as k
from shared.reconcile import reconcile_set
from shared.reconcile.steps import FlagAndDelete, Stash, Step
from tests.fixtures.cocoon_objects import NS, SET, VM0, pod_manifest, set_manifest
from tests.fixtures.reconcile_world import World, ref_of

pytestmark = pytest.mark.e2e

POD = f"{SET}-0"
POD_PATH = f"/api/v1/namespaces/{NS}/pods/{POD}"
SET_PATH = f"/apis/{k.GROUP}/{k.VERSION}/namespaces/{NS}/{k.PLURAL}/{SET}"


def suspended_set(world: World, **kw: Any) -> dict[str, Any]:
    """A release-policy set the user just suspended (generation 2: the spec changed)."""
    manifest = set_manifest(suspend=False, phase="Running", **kw)
    world.create_set(manifest)
    world.patch_set(NS, SET, {"spec": {"suspend": True}})
    return world.set_status(NS, SET, {"phase": "Suspending"})


def hibernated_main(world: World, cs: dict[str, Any], **kw: Any) -> Any:
    """The main pod after vk-cocoon hibernated it for the set's current generation."""
    fields: dict[str, Any] = {
        "hibernate": True,
        "state": "hibernated",
        "generation": cs["metadata"]["generation"],
        **kw,
    }
    return world.create_pod(pod_manifest(**fields), owner=cs)


def pushed_event(world: World, vm: str = VM0, digest: str = "sha256:" + "0" * 64) -> CloudEvent:
    return CloudEvent(
        {"type": k.CE_SNAPSHOT_PUSHED, "source": "//tests/registry", "id": uuid.uuid4().hex},
        {"repository": f"{world.prefix}/{vm}", "tag": k.TAG_HIBERNATE, "digest": digest},
    )


def post(client: Any, event: CloudEvent, *, structured: bool = False) -> Any:
    headers, body = to_structured(event) if structured else to_binary(event)
    return client.post("/", headers=headers, data=body)


def gone_or_terminating(world: World, name: str = POD) -> bool:
    pods = [p for p in world.pods(NS, SET) if p.metadata.name == name]
    return not pods or pods[0].metadata.deletion_timestamp is not None


def successful(world: World, method: str, path: str) -> list[dict[str, Any]]:
    return [
        r
        for r in world.api_requests()
        if r["method"] == method and r["path"] == path and 200 <= r["status"] < 300
    ]


def metric_lines(out: str, metric: str) -> list[dict[str, Any]]:
    lines = []
    for line in out.splitlines():
        try:
            rec = json.loads(line)
        except ValueError:
            continue
        if isinstance(rec, dict) and rec.get("metric") == metric:
            lines.append(rec)
    return lines


def test_pods_survive_until_the_snapshot_is_registry_verified(
    world: World, function_app: Any
) -> None:
    cs = suspended_set(world)
    hibernated_main(world, cs)
    release = function_app("release")

    # vk-cocoon says hibernated and the push was announced, but the registry does not
    # serve the tag yet (a real Distribution notifies before it links the tag): keep
    # the pod, and answer "retry" so the announcement is redelivered, not dropped.
    assert post(release, pushed_event(world)).status_code == 500
    assert not gone_or_terminating(world)
    assert world.get_set(NS, SET)["status"]["phase"] == "Suspending"

    digest = world.push_snapshot(VM0)
    assert post(release, pushed_event(world, digest=digest), structured=True).status_code == 200
    assert gone_or_terminating(world)
    assert world.get_set(NS, SET)["status"]["phase"] == "Suspended"


@pytest.mark.embedded_only("asserts on the emulator's request log")
def test_a_stale_lifecycle_generation_does_not_release(world: World, function_app: Any) -> None:
    cs = suspended_set(world)
    assert cs["metadata"]["generation"] == 2
    # Hibernated — but for the previous suspend round (generation 1); the tag is old too.
    hibernated_main(world, cs, generation=1)
    world.push_snapshot(VM0)

    assert post(function_app("release"), pushed_event(world)).status_code == 200
    assert not gone_or_terminating(world)
    assert successful(world, "DELETE", POD_PATH) == []


def test_a_verified_pod_is_deleted_and_hint_and_names_are_stashed(
    world: World, function_app: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    cs = suspended_set(world, agents_status=None)
    hibernated_main(world, cs, node="node-7")
    world.push_snapshot(VM0)

    assert post(function_app("release"), pushed_event(world)).status_code == 200

    after = world.get_set(NS, SET)
    assert after["metadata"]["annotations"][k.ANN_HIBERNATED_ON_NODE] == "node-7"
    assert after["metadata"]["annotations"][k.ANN_DELETE_VM_NAMES] == VM0
    assert after["status"]["phase"] == "Suspended"
    assert gone_or_terminating(world)
    reasons = [e.reason for e in world.events(NS)]
    assert reasons == [k.REASON_SEAT_RELEASED]
    counted = metric_lines(capsys.readouterr().out, k.METRIC_PODS_DELETED)
    assert [c["labels"] for c in counted] == [{"namespace": NS, "cocoonset": SET}]


@pytest.mark.embedded_only("asserts on the emulator's request log")
def test_the_stash_lands_before_the_first_delete(world: World, function_app: Any) -> None:
    cs = suspended_set(world)
    hibernated_main(world, cs)
    world.push_snapshot(VM0)
    world.reset_log()

    assert post(function_app("release"), pushed_event(world)).status_code == 200

    log = [(r["method"], r["path"]) for r in world.api_requests()]
    assert log.index(("PATCH", SET_PATH)) < log.index(("DELETE", POD_PATH))


def test_a_terminal_pod_is_kept_and_the_set_still_settles_suspended(
    world: World, function_app: Any
) -> None:
    cs = suspended_set(world)
    hibernated_main(world, cs)
    # A failed toolbox-like pod of the same set, kept for triage.
    world.create_pod(
        pod_manifest(
            name=f"{SET}-1",
            role=k.ROLE_SUB_AGENT,
            slot="1",
            vm=f"vk-{NS}-{SET}-1",
            hibernate=True,
            phase="Failed",
        ),
        owner=cs,
    )
    world.push_snapshot(VM0)

    assert post(function_app("release"), pushed_event(world)).status_code == 200

    assert gone_or_terminating(world)
    kept = [p for p in world.pods(NS, SET) if p.metadata.name == f"{SET}-1"]
    assert kept and kept[0].metadata.deletion_timestamp is None
    after = world.get_set(NS, SET)
    assert after["status"]["phase"] == "Suspended"
    assert after["metadata"]["annotations"][k.ANN_DELETE_VM_NAMES] == f"{VM0},vk-{NS}-{SET}-1"


def test_no_pods_at_all_settles_suspended(world: World, function_app: Any) -> None:
    suspended_set(world)
    changed = CloudEvent(
        {"type": k.CE_SET_CHANGED, "source": "//tests", "id": "1"}, {"namespace": NS, "name": SET}
    )
    assert post(function_app("release"), changed).status_code == 200
    assert world.get_set(NS, SET)["status"]["phase"] == "Suspended"


@pytest.mark.embedded_only("asserts on the emulator's request log")
def test_the_keep_snapshot_flag_is_in_the_api_before_the_delete(
    world: World, function_app: Any
) -> None:
    cs = suspended_set(world)
    hibernated_main(world, cs)
    world.push_snapshot(VM0)
    world.reset_log()

    assert post(function_app("release"), pushed_event(world)).status_code == 200

    log = [(r["method"], r["path"], r["status"]) for r in world.api_requests()]
    flag = log.index(("PATCH", POD_PATH, 200))
    delete = log.index(("DELETE", POD_PATH, 200))
    assert flag < delete


@pytest.mark.embedded_only("injects faults through the emulator's test hooks")
def test_a_failing_flag_patch_still_frees_the_seat(world: World, function_app: Any) -> None:
    cs = suspended_set(world)
    hibernated_main(world, cs)
    world.push_snapshot(VM0)
    world.kube.add_fault(method="PATCH", path=f"{POD_PATH}$", status=500, times=None)

    assert post(function_app("release"), pushed_event(world)).status_code == 200

    assert gone_or_terminating(world)
    assert len(successful(world, "DELETE", POD_PATH)) == 1
    assert world.get_set(NS, SET)["status"]["phase"] == "Suspended"


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_a_registry_error_never_releases(
    world: World, function_app: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    cs = suspended_set(world)
    hibernated_main(world, cs)
    world.push_snapshot(VM0)
    # The registry is unreachable: an error, never "absent", never "present".
    monkeypatch.setenv("COCOON_REGISTRY_BASE", f"127.0.0.1:{_closed_port()}/{world.prefix}")

    response = post(function_app("release"), pushed_event(world))

    assert response.status_code == 500  # redelivered with backoff
    assert not gone_or_terminating(world)
    assert k.ANN_DELETE_VM_NAMES not in (
        world.get_set(NS, SET)["metadata"].get("annotations") or {}
    )


def test_missing_registry_configuration_never_releases(
    world: World, function_app: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    cs = suspended_set(world)
    hibernated_main(world, cs)
    world.push_snapshot(VM0)
    monkeypatch.delenv("COCOON_REGISTRY_BASE")
    changed = CloudEvent(
        {"type": k.CE_SET_CHANGED, "source": "//tests", "id": "1"}, {"namespace": NS, "name": SET}
    )

    assert post(function_app("release"), changed).status_code == 500
    assert not gone_or_terminating(world)


def test_the_release_never_deletes_a_registry_tag(world: World, function_app: Any) -> None:
    cs = suspended_set(world)
    hibernated_main(world, cs)
    world.push_snapshot(VM0)
    release = function_app("release")

    for _ in range(3):  # the release, then duplicates of its event
        assert post(release, pushed_event(world)).status_code == 200

    assert gone_or_terminating(world)
    assert world.snapshot_present(VM0)


@pytest.mark.embedded_only("asserts on the emulator's request log")
def test_fifty_concurrent_duplicate_push_events_delete_the_pod_exactly_once(
    world: World, function_app: Any
) -> None:
    cs = suspended_set(world)
    hibernated_main(world, cs)
    world.push_snapshot(VM0)
    release = function_app("release")
    event = pushed_event(world)
    statuses: list[int] = []
    lock = threading.Lock()
    start = threading.Barrier(50)

    def deliver() -> None:
        client = release.application.test_client()
        start.wait()
        code = post(client, event).status_code
        with lock:
            statuses.append(code)

    threads = [threading.Thread(target=deliver) for _ in range(50)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()

    assert len(statuses) == 50
    assert all(s in {200, 500} for s in statuses), statuses  # 2xx or a retryable 5xx
    assert len(successful(world, "DELETE", POD_PATH)) == 1
    after = world.get_set(NS, SET)
    assert after["status"]["phase"] == "Suspended"
    assert after["metadata"]["annotations"][k.ANN_HIBERNATED_ON_NODE] == "node-a"
    assert after["metadata"]["annotations"][k.ANN_DELETE_VM_NAMES] == VM0
    assert gone_or_terminating(world)
    assert [e.reason for e in world.events(NS)] == [k.REASON_SEAT_RELEASED]
    assert world.snapshot_present(VM0)


@pytest.mark.embedded_only("asserts on the emulator's request log")
@pytest.mark.parametrize(
    ("already_flagged", "refused"),
    [(False, "PATCH"), (True, "DELETE")],
    ids=["flag-patch-refuses", "delete-precondition-refuses"],
)
def test_a_pod_recreated_under_the_same_name_is_never_deleted(
    world: World, already_flagged: bool, refused: str
) -> None:
    cs = suspended_set(world)
    old = hibernated_main(world, cs, keep=already_flagged)
    world.push_snapshot(VM0)
    replaced: dict[str, str] = {}

    # The flag goes beside the stash; with the pod flagged already, the delete is next.
    before = FlagAndDelete if already_flagged else Stash

    def race(step: Step) -> None:
        # Between the read and the write aimed at the verified pod, the pod is deleted
        # and recreated (same name, new UID, a fresh VM that never hibernated).
        if isinstance(step, before) and not replaced:
            world.core.delete_namespaced_pod(POD, NS, grace_period_seconds=0)
            new = world.create_pod(pod_manifest(), owner=cs)
            replaced["uid"] = new.metadata.uid
            world.reset_log()

    out = reconcile_set(ref_of(cs), kube=world.client, registry=world.snapshots, hook=race)

    assert replaced["uid"] != old.metadata.uid
    assert out.result == "waiting"  # the newcomer has not hibernated: back to the gate
    pods = world.pods(NS, SET)
    assert [(p.metadata.uid, p.metadata.deletion_timestamp) for p in pods] == [
        (replaced["uid"], None)
    ]
    on_pod = [(r["method"], r["status"]) for r in world.api_requests() if r["path"] == POD_PATH]
    # The write aimed at the verified pod is refused (409), never applied to the newcomer,
    # and no DELETE ever succeeds after the swap.
    assert on_pod[0] == (refused, 409)
    assert ("DELETE", 200) not in on_pod


@pytest.mark.embedded_only("asserts on the emulator's request log")
@pytest.mark.parametrize(
    "data",
    [
        {
            "repository": "elsewhere/vk-team-a-agent-0",
            "tag": "hibernate",
            "digest": "sha256:" + "1" * 64,
        },
        {"repository": "PREFIX/vk-team-a-agent-0", "tag": "latest", "digest": "sha256:" + "1" * 64},
        {"repository": "PREFIX/not-a-vm", "tag": "hibernate", "digest": "sha256:" + "1" * 64},
    ],
    ids=["outside-the-registry-base", "not-the-hibernate-tag", "not-a-vm-name"],
)
def test_irrelevant_pushes_are_acknowledged_without_any_call(
    world: World, function_app: Any, data: dict[str, Any]
) -> None:
    cs = suspended_set(world)
    hibernated_main(world, cs)
    world.push_snapshot(VM0)
    release = function_app("release")
    world.reset_log()
    event = CloudEvent(
        {"type": k.CE_SNAPSHOT_PUSHED, "source": "//tests", "id": "x"},
        {**data, "repository": data["repository"].replace("PREFIX", world.prefix)},
    )

    assert post(release, event).status_code == 200

    assert world.api_requests() == []
    assert not gone_or_terminating(world)


def test_a_malformed_event_is_acknowledged(world: World, function_app: Any) -> None:
    release = function_app("release")
    headers, body = to_binary(
        CloudEvent({"type": k.CE_SNAPSHOT_PUSHED, "source": "//tests", "id": "x"}, {"tag": 1})
    )
    assert release.post("/", headers=headers, data=body).status_code == 200


@pytest.mark.embedded_only("asserts on the emulator's request log")
def test_an_ambiguous_vm_name_reconciles_every_set_that_exists(
    world: World, function_app: Any
) -> None:
    # vk-a-b-c-0 is (a, b-c) or (a-b, c): only (a-b, c) exists here.
    manifest = set_manifest(name="c", namespace="a-b", suspend=False, phase="Running")
    world.create_set(manifest)
    world.patch_set("a-b", "c", {"spec": {"suspend": True}})
    cs = world.set_status("a-b", "c", {"phase": "Suspending"})
    vm = "vk-a-b-c-0"
    world.create_pod(
        pod_manifest(
            name="c-0",
            namespace="a-b",
            set_name="c",
            vm=vm,
            hibernate=True,
            state="hibernated",
            generation=cs["metadata"]["generation"],
        ),
        owner=cs,
    )
    digest = world.push_snapshot(vm)

    assert (
        post(function_app("release"), pushed_event(world, vm=vm, digest=digest)).status_code == 200
    )

    assert world.get_set("a-b", "c")["status"]["phase"] == "Suspended"
    # The other candidate was looked up (404) and skipped: once as a set to reconcile,
    # once by c's own gate asking who else may record the legacy name (nobody).
    lookups = [
        r for r in world.api_requests() if r["path"].endswith("/namespaces/a/cocoonsets/b-c")
    ]
    assert [r["status"] for r in lookups] == [404, 404]


@pytest.mark.embedded_only("injects faults through the emulator's test hooks")
def test_a_permanent_error_in_one_candidate_neither_skips_the_rest_nor_hides_a_retry(
    world: World, function_app: Any
) -> None:
    # vk-a-b-c-d-0 is (a, b-c-d), (a-b, c-d) or (a-b-c, d): only the last exists.
    manifest = set_manifest(name="d", namespace="a-b-c", suspend=False, phase="Running")
    world.create_set(manifest)
    world.patch_set("a-b-c", "d", {"spec": {"suspend": True}})
    cs = world.set_status("a-b-c", "d", {"phase": "Suspending"})
    vm = "vk-a-b-c-d-0"
    world.create_pod(
        pod_manifest(
            name="d-0",
            namespace="a-b-c",
            set_name="d",
            vm=vm,
            hibernate=True,
            state="hibernated",
            generation=cs["metadata"]["generation"],
        ),
        owner=cs,
    )
    digest = world.push_snapshot(vm)
    sets = f"/apis/{k.GROUP}/{k.VERSION}/namespaces"
    # The first candidate's lookup fails for good (400), the second for now (503).
    world.kube.add_fault(method="GET", path=f"{sets}/a/{k.PLURAL}/b-c-d$", status=400)
    # (Every attempt of the client's bounded read retry fails: the lookup stays failed.)
    world.kube.add_fault(method="GET", path=f"{sets}/a-b/{k.PLURAL}/c-d$", status=503, times=None)

    status = post(function_app("release"), pushed_event(world, vm=vm, digest=digest)).status_code

    assert status == 500  # the transient failure is redelivered, not acknowledged away
    # d's own gate could not tell whether another set records the legacy name: it
    # holds (fail closed) rather than release on a tag that may be another tenant's.
    assert world.get_set("a-b-c", "d")["status"]["phase"] == "Suspending"
    world.kube.clear_faults()
    status = post(function_app("release"), pushed_event(world, vm=vm, digest=digest)).status_code
    assert status == 200
    assert world.get_set("a-b-c", "d")["status"]["phase"] == "Suspended"  # the redelivery


@pytest.mark.embedded_only("asserts on the emulator's request log")
def test_a_namespace_outside_the_allowlist_is_never_touched(
    world: World, function_app: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    cs = suspended_set(world)
    hibernated_main(world, cs)
    world.push_snapshot(VM0)
    monkeypatch.setenv("COCOON_NAMESPACES", "other")
    release = function_app("release")
    world.reset_log()

    assert post(release, pushed_event(world)).status_code == 200

    assert world.api_requests() == []
    assert not gone_or_terminating(world)
