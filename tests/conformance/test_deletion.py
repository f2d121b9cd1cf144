"""Deletion: finalizers, pod graceful deletion, garbage collection, namespaces."""

from __future__ import annotations

from typing import Any

import pytest
from kubernetes import client

from tests.conformance.helpers import Custom, cocoonset, gone, new_namespace, pod, wait_for

# kube-controller-manager runs these; the real fixture does not start one (the cluster
# simulator plays scheduler and kubelet only), so these stay on the embedded API.
NEEDS_GC = pytest.mark.embedded_only("the garbage collector runs in kube-controller-manager")
NEEDS_NAMESPACE_CONTROLLER = pytest.mark.embedded_only(
    "the namespace controller runs in kube-controller-manager"
)


def test_finalizer_holds_object_with_deletion_timestamp_until_removed(
    k8s_api: client.ApiClient,
) -> None:
    custom = Custom(k8s_api)
    body = cocoonset("x")
    body["metadata"]["finalizers"] = ["cocoonset.cocoonstack.io/hibernation"]
    custom.create(body)
    deleted = custom.delete("x")
    assert deleted["metadata"]["deletionTimestamp"]
    held = custom.get("x")
    assert held["metadata"]["deletionTimestamp"] == deleted["metadata"]["deletionTimestamp"]
    assert held["metadata"]["generation"] == 2  # upstream bumps generation when deletion starts
    custom.patch("x", {"metadata": {"finalizers": None}})
    assert gone(lambda: custom.get("x"))


def test_no_new_finalizers_on_an_object_being_deleted(k8s_api: client.ApiClient) -> None:
    custom = Custom(k8s_api)
    body = cocoonset("x")
    body["metadata"]["finalizers"] = ["a.io/one"]
    custom.create(body)
    custom.delete("x")
    try:
        custom.patch("x", {"metadata": {"finalizers": ["a.io/one", "a.io/two"]}})
    except client.ApiException as exc:
        assert exc.status == 422
        assert "no new finalizers can be added if the object is being deleted" in exc.body
    else:
        raise AssertionError("adding a finalizer during deletion must fail")


def test_unscheduled_pod_is_deleted_at_once(k8s_api: client.ApiClient) -> None:
    core = client.CoreV1Api(k8s_api)
    core.create_namespaced_pod("default", pod("p"))
    core.delete_namespaced_pod("p", "default")
    assert gone(lambda: core.read_namespaced_pod("p", "default"))


def test_scheduled_pod_deletion_is_graceful(k8s_api: client.ApiClient) -> None:
    core = client.CoreV1Api(k8s_api)
    core.create_namespaced_pod("default", pod("p", node="n1"))
    core.delete_namespaced_pod("p", "default")
    p = core.read_namespaced_pod("p", "default")
    assert p.metadata.deletion_timestamp is not None
    assert p.metadata.deletion_grace_period_seconds == 30
    assert p.metadata.generation == 2


def test_pod_deletion_with_grace_period_zero_is_immediate(k8s_api: client.ApiClient) -> None:
    core = client.CoreV1Api(k8s_api)
    core.create_namespaced_pod("default", pod("p", node="n1"))
    core.delete_namespaced_pod("p", "default", grace_period_seconds=0)
    assert gone(lambda: core.read_namespaced_pod("p", "default"))


def test_second_delete_with_grace_zero_finishes_a_terminating_pod(
    k8s_api: client.ApiClient,
) -> None:
    core = client.CoreV1Api(k8s_api)
    core.create_namespaced_pod("default", pod("p", node="n1"))
    core.delete_namespaced_pod("p", "default")
    core.delete_namespaced_pod("p", "default", grace_period_seconds=0)
    assert gone(lambda: core.read_namespaced_pod("p", "default"))


def test_terminating_pod_outlives_its_grace_period_until_the_kubelet_deletes_it(
    k8s_api: client.ApiClient,
) -> None:
    # The API server never ends a pod's grace by itself: the kubelet on the node stops
    # the containers and sends the final delete (grace 0). Without one the pod stays.
    import time

    core = client.CoreV1Api(k8s_api)
    core.create_namespaced_pod("default", pod("p", node="n1", terminationGracePeriodSeconds=1))
    core.delete_namespaced_pod("p", "default")
    time.sleep(2.5)
    held = core.read_namespaced_pod("p", "default")
    assert held.metadata.deletion_timestamp is not None
    assert held.metadata.deletion_grace_period_seconds == 1
    core.delete_namespaced_pod("p", "default", grace_period_seconds=0)  # the kubelet's part
    assert gone(lambda: core.read_namespaced_pod("p", "default"))


def test_terminal_status_write_leaves_a_terminating_pod_in_place(
    k8s_api: client.ApiClient,
) -> None:
    core = client.CoreV1Api(k8s_api)
    core.create_namespaced_pod("default", pod("p", node="n1"))
    core.delete_namespaced_pod("p", "default")
    core.patch_namespaced_pod_status("p", "default", {"status": {"phase": "Succeeded"}})
    held = core.read_namespaced_pod("p", "default")
    assert held.status.phase == "Succeeded"
    assert held.metadata.deletion_timestamp is not None
    core.delete_namespaced_pod("p", "default", grace_period_seconds=0)
    assert gone(lambda: core.read_namespaced_pod("p", "default"))


def _owned_pod(name: str, owner: dict[str, Any]) -> dict[str, Any]:
    body = pod(name)
    ref = {
        "apiVersion": owner["apiVersion"],
        "kind": owner["kind"],
        "name": owner["metadata"]["name"],
        "uid": owner["metadata"]["uid"],
        "controller": True,
        "blockOwnerDeletion": True,
    }
    body["metadata"]["ownerReferences"] = [ref]
    return body


@NEEDS_GC
def test_garbage_collector_deletes_pods_owned_by_a_deleted_cocoonset(
    k8s_api: client.ApiClient,
) -> None:
    custom = Custom(k8s_api)
    core = client.CoreV1Api(k8s_api)
    owner = custom.create(cocoonset("x"))
    core.create_namespaced_pod("default", _owned_pod("x-0", owner))
    core.create_namespaced_pod("default", pod("unowned"))
    custom.delete("x")
    wait_for(lambda: gone(lambda: core.read_namespaced_pod("x-0", "default")))
    assert core.read_namespaced_pod("unowned", "default").metadata.name == "unowned"


@NEEDS_GC
def test_orphan_propagation_keeps_dependents_and_strips_owner_reference(
    k8s_api: client.ApiClient,
) -> None:
    custom = Custom(k8s_api)
    core = client.CoreV1Api(k8s_api)
    owner = custom.create(cocoonset("x"))
    core.create_namespaced_pod("default", _owned_pod("x-0", owner))
    custom.delete("x", propagation_policy="Orphan")
    wait_for(lambda: gone(lambda: custom.get("x")))
    p = core.read_namespaced_pod("x-0", "default")
    assert not p.metadata.owner_references


@NEEDS_GC
def test_foreground_propagation_deletes_dependents_before_the_owner(
    k8s_api: client.ApiClient,
) -> None:
    custom = Custom(k8s_api)
    core = client.CoreV1Api(k8s_api)
    owner = custom.create(cocoonset("x"))
    body = _owned_pod("x-0", owner)
    body["metadata"]["finalizers"] = ["test.io/hold"]
    core.create_namespaced_pod("default", body)
    custom.delete("x", propagation_policy="Foreground")
    wait_for(
        lambda: core.read_namespaced_pod("x-0", "default").metadata.deletion_timestamp is not None
    )
    held = custom.get("x")
    assert "foregroundDeletion" in held["metadata"]["finalizers"]
    core.patch_namespaced_pod("x-0", "default", {"metadata": {"finalizers": None}})
    wait_for(lambda: gone(lambda: custom.get("x")))


@NEEDS_GC
def test_dependent_whose_owner_never_existed_is_collected(k8s_api: client.ApiClient) -> None:
    core = client.CoreV1Api(k8s_api)
    fake_owner = {
        "apiVersion": "cocoonset.cocoonstack.io/v1",
        "kind": "CocoonSet",
        "metadata": {"name": "ghost", "uid": "11111111-2222-3333-4444-555555555555"},
    }
    core.create_namespaced_pod("default", _owned_pod("orphan", fake_owner))
    wait_for(lambda: gone(lambda: core.read_namespaced_pod("orphan", "default")))


@NEEDS_NAMESPACE_CONTROLLER
def test_deleted_namespace_terminates_then_goes_with_its_contents(
    k8s_api: client.ApiClient,
) -> None:
    core = client.CoreV1Api(k8s_api)
    new_namespace(core, "doomed")
    core.create_namespaced_pod("doomed", pod("p"))
    Custom(k8s_api, "doomed").create(cocoonset("x"))
    core.delete_namespace("doomed")
    wait_for(lambda: gone(lambda: core.read_namespace("doomed")))
    assert core.list_namespaced_pod("doomed").items == []


def test_create_in_terminating_namespace_is_403_forbidden(k8s_api: client.ApiClient) -> None:
    core = client.CoreV1Api(k8s_api)
    new_namespace(core, "doomed")
    held = pod("held")
    held["metadata"]["finalizers"] = ["test.io/hold"]
    core.create_namespaced_pod("doomed", held)
    core.delete_namespace("doomed")
    assert core.read_namespace("doomed").status.phase == "Terminating"
    try:
        core.create_namespaced_pod("doomed", pod("late"))
    except client.ApiException as exc:
        assert exc.status == 403
        assert "because it is being terminated" in exc.body
    else:
        raise AssertionError("creating in a terminating namespace must fail")


def test_delete_collection_with_label_selector(k8s_api: client.ApiClient) -> None:
    core = client.CoreV1Api(k8s_api)
    core.create_namespaced_pod("default", pod("a", labels={"k": "1"}))
    core.create_namespaced_pod("default", pod("b", labels={"k": "2"}))
    core.delete_collection_namespaced_pod("default", label_selector="k=1")
    assert [p.metadata.name for p in core.list_namespaced_pod("default").items] == ["b"]


def test_immediate_delete_answers_status_success_for_custom_resources(
    k8s_api: client.ApiClient,
) -> None:
    custom = Custom(k8s_api)
    uid = custom.create(cocoonset("x"))["metadata"]["uid"]
    out = custom.delete("x")
    assert out["kind"] == "Status" and out["status"] == "Success"
    assert out["details"] == {
        "name": "x",
        "group": "cocoonset.cocoonstack.io",
        "kind": "cocoonsets",
        "uid": uid,
    }


def test_immediate_pod_delete_answers_the_deleted_pod(k8s_api: client.ApiClient) -> None:
    core = client.CoreV1Api(k8s_api)
    created = core.create_namespaced_pod("default", pod("p"))
    out = core.delete_namespaced_pod("p", "default")
    assert out.kind == "Pod"
    assert out.metadata.uid == created.metadata.uid
    assert int(out.metadata.resource_version) > int(created.metadata.resource_version)


def test_eviction_deletes_the_pod_gracefully(k8s_api: client.ApiClient) -> None:
    core = client.CoreV1Api(k8s_api)
    core.create_namespaced_pod("default", pod("p", node="n1"))
    core.create_namespaced_pod_eviction(
        "p",
        "default",
        {
            "apiVersion": "policy/v1",
            "kind": "Eviction",
            "metadata": {"name": "p", "namespace": "default"},
        },
    )
    assert core.read_namespaced_pod("p", "default").metadata.deletion_timestamp is not None
    core.create_namespaced_pod("default", pod("q"))
    core.create_namespaced_pod_eviction("q", "default", {"metadata": {"name": "q"}})
    assert gone(lambda: core.read_namespaced_pod("q", "default"))
