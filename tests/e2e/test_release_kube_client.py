"""`shared.clients.kube.KubeClient` against the embedded API (real HTTP, official client).

What the reconciler and the sweep rely on: paging that keeps memory flat,
compare-and-swap writes, UID-guarded deletes, keyed events, and that every
failure arrives as a `shared.errors` type (no `kubernetes`/`urllib3`
exception escapes the wrapper).
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from shared import constants as k
from shared.clients.kube import KubeClient
from shared.errors import (
    AlreadyExists,
    CocoonError,
    Conflict,
    NotFound,
    TransientError,
    UnreadableObject,
)
from shared.models import CocoonSet
from shared.names import SetRef
from tests.fixtures.cocoon_objects import NS, SET, pod_manifest, set_manifest
from tests.fixtures.reconcile_world import World

pytestmark = pytest.mark.e2e

REF = SetRef(NS, SET)


@pytest.fixture
def client(world: World) -> KubeClient:
    c: KubeClient = world.client
    c.reset_requests()
    return c


@pytest.mark.embedded_only("asserts on the emulator's request log")
def test_sets_and_pods_page_with_continue(world: World, client: KubeClient) -> None:
    for i in range(5):
        world.create_set(set_manifest(name=f"s{i}", phase=None))
        world.create_pod(pod_manifest(name=f"s{i}-0", set_name="shared"))
    world.reset_log()

    pages = list(client.list_sets(NS, limit=2))
    assert [len(p) for p in pages] == [2, 2, 1]
    assert sorted(cs.name for page in pages for cs in page) == [f"s{i}" for i in range(5)]
    everywhere = [cs.name for page in client.list_sets(None, limit=4) for cs in page]
    assert sorted(everywhere) == [f"s{i}" for i in range(5)]
    pods = list(client.list_pods_matching(NS, f"{k.LABEL_SET_NAME}=shared", limit=3))
    assert [len(p) for p in pods] == [3, 2]
    assert client.requests == 3 + 2 + 2
    assert any("continue=" in r["query"] for r in world.api_requests())


def test_compare_and_swap_on_the_set(world: World, client: KubeClient) -> None:
    world.create_set(set_manifest(phase="Suspending"))
    cs = client.get_set(REF)
    assert isinstance(cs, CocoonSet)
    stale = cs.metadata.resource_version

    won = client.patch_set(REF, {"metadata": {"annotations": {"x": "1"}}}, resource_version=stale)
    assert won.metadata.annotations["x"] == "1"
    with pytest.raises(Conflict):
        client.patch_set(REF, {"metadata": {"annotations": {"x": "2"}}}, resource_version=stale)
    with pytest.raises(Conflict):
        client.patch_set_status(REF, {"status": {"phase": "Suspended"}}, resource_version=stale)
    status = client.patch_set_status(
        REF, {"status": {"phase": "Suspended"}}, resource_version=won.metadata.resource_version
    )
    assert status.phase is not None and status.phase.value == "Suspended"
    # A merge patch removes a key set to None and keeps everything else.
    cleared = client.patch_set(REF, {"metadata": {"annotations": {"x": None}}})
    assert "x" not in cleared.metadata.annotations
    assert cleared.spec.agent.image == "ghcr.io/acme/agent:1"


def test_missing_objects(client: KubeClient, world: World) -> None:
    world.ensure_namespace(NS)
    assert client.get_set(REF) is None
    assert client.get_pod(NS, "nope") is None
    assert client.delete_pod(NS, "nope", uid="u") is False
    with pytest.raises(NotFound):
        client.patch_set(REF, {"metadata": {"annotations": {"x": "1"}}})


def test_pod_create_delete_and_preconditions(world: World, client: KubeClient) -> None:
    world.ensure_namespace(NS)
    body = pod_manifest(owner_uid=None)  # no owner: the garbage collector would take it
    body["metadata"] = {
        key: v for key, v in body["metadata"].items() if key not in ("uid", "resourceVersion")
    }
    body.pop("status")
    pod = client.create_pod(NS, body)
    with pytest.raises(AlreadyExists):
        client.create_pod(NS, body)
    with pytest.raises(Conflict):
        client.delete_pod(NS, pod.name, uid="someone-else")
    with pytest.raises(Conflict):
        client.delete_pod(NS, pod.name, uid=pod.metadata.uid or "", resource_version="1")
    assert client.delete_pod(
        NS, pod.name, uid=pod.metadata.uid or "", resource_version=pod.metadata.resource_version
    )


def test_keyed_events_are_created_once(world: World, client: KubeClient) -> None:
    world.create_set(set_manifest(phase="Waking"))
    cs = client.get_set(REF)
    assert cs is not None

    assert client.emit_event(cs, reason="WakeNoCapacity", message="m", type="Warning", key="a")
    assert not client.emit_event(cs, reason="WakeNoCapacity", message="m", type="Warning", key="a")
    assert client.emit_event(cs, reason="WakeNoCapacity", message="m", type="Warning", key="b")
    events = world.events(NS)
    assert len(events) == 2
    e = events[0]
    assert e.involved_object.uid == cs.metadata.uid
    assert e.involved_object.kind == k.KIND
    assert e.source.component == k.EVENT_COMPONENT
    assert e.reporting_component == k.EVENT_COMPONENT


@pytest.mark.embedded_only("injects faults through the emulator's test hooks")
@pytest.mark.parametrize(
    "fault",
    [
        {"status": 500},
        {"status": 503, "retry_after": 1},
        {"status": 429},
        {"cut": True},
    ],
    ids=["500", "503", "429", "connection-cut"],
)
def test_server_failures_are_transient_and_typed(
    world: World, client: KubeClient, fault: dict[str, Any]
) -> None:
    world.create_set(set_manifest(phase="Suspending"))
    world.kube.add_fault(method="GET", path=f"/{k.PLURAL}/{SET}$", times=None, **fault)
    client._api.configuration.retries = 0  # one attempt: the point is the error type

    with pytest.raises(TransientError) as info:
        client.get_set(REF)
    assert isinstance(info.value, CocoonError)
    assert not type(info.value).__module__.startswith(("kubernetes", "urllib3"))


@pytest.fixture
def qemu_set(world: World) -> Any:
    """A set stored with `backend: qemu`, which the models reject.

    How it gets there in a real cluster: it was written under another CRD
    version (or before a schema change); the API server does not re-validate
    stored objects. Reproduced through the API itself: loosen the installed
    CRD's enum, write the set, put the CRD back.
    """
    from kubernetes import client as k8s

    ext = k8s.ApiextensionsV1Api(world._api)
    crd_name = f"{k.PLURAL}.{k.GROUP}"
    original = world._api.sanitize_for_serialization(ext.read_custom_resource_definition(crd_name))
    loose = json.loads(json.dumps(original))
    for version in loose["spec"]["versions"]:
        backend = version["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]["agent"][
            "properties"
        ]["backend"]
        backend["enum"] = [*backend["enum"], "qemu"]
    ext.replace_custom_resource_definition(crd_name, loose)
    try:
        world.create_set(set_manifest(name="odd", phase="Running", agent={"backend": "qemu"}))
    finally:
        current = ext.read_custom_resource_definition(crd_name)
        original["metadata"]["resourceVersion"] = current.metadata.resource_version
        ext.replace_custom_resource_definition(crd_name, original)
    return SetRef(NS, "odd")


def test_an_unreadable_set_is_a_named_permanent_error(
    world: World, client: KubeClient, qemu_set: SetRef
) -> None:
    with pytest.raises(UnreadableObject, match=f"{NS}/odd"):
        client.get_set(qemu_set)


def test_an_unreadable_set_is_skipped_not_the_whole_page(
    world: World, client: KubeClient, qemu_set: SetRef, capsys: pytest.CaptureFixture[str]
) -> None:
    world.create_set(set_manifest(name="fine", phase="Running"))

    names = [cs.name for page in client.list_sets(NS) for cs in page]

    assert names == ["fine"]
    warnings = [
        json.loads(line)
        for line in capsys.readouterr().out.splitlines()
        if line.startswith("{") and "unreadable" in line
    ]
    assert len(warnings) == 1
    assert warnings[0]["cocoonset"] == f"{NS}/odd"
    assert "backend" in warnings[0]["error"]
