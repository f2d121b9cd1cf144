"""Optimistic concurrency: resourceVersion preconditions, as kube-apiserver checks them."""

from __future__ import annotations

import threading

from kubernetes import client

from tests.conformance.helpers import Custom, cocoonset, expect_error, pod

STALE = (
    'Operation cannot be fulfilled on cocoonsets.cocoonset.cocoonstack.io "x": the object has been '
    "modified; please apply your changes to the latest version and try again"
)


def test_update_with_stale_resource_version_is_409_conflict(k8s_api: client.ApiClient) -> None:
    custom = Custom(k8s_api)
    first = custom.create(cocoonset("x"))
    custom.patch("x", {"metadata": {"labels": {"a": "1"}}})
    first["spec"]["agent"]["image"] = "other:1"
    st = expect_error(409, custom.replace, "x", first)
    assert st["reason"] == "Conflict"
    assert st["message"] == STALE
    assert st["details"] == {"name": "x", "group": "cocoonset.cocoonstack.io", "kind": "cocoonsets"}


def test_merge_patch_carrying_stale_resource_version_is_409_conflict(
    k8s_api: client.ApiClient,
) -> None:
    custom = Custom(k8s_api)
    old_rv = custom.create(cocoonset("x"))["metadata"]["resourceVersion"]
    custom.patch("x", {"metadata": {"labels": {"a": "1"}}})
    st = expect_error(
        409, custom.patch, "x", {"metadata": {"resourceVersion": old_rv, "labels": {"a": "2"}}}
    )
    assert st["message"] == STALE
    assert custom.get("x")["metadata"]["labels"] == {"a": "1"}


def test_merge_patch_with_current_resource_version_succeeds(k8s_api: client.ApiClient) -> None:
    custom = Custom(k8s_api)
    rv = custom.create(cocoonset("x"))["metadata"]["resourceVersion"]
    out = custom.patch("x", {"metadata": {"resourceVersion": rv, "labels": {"a": "2"}}})
    assert out["metadata"]["labels"] == {"a": "2"}
    assert int(out["metadata"]["resourceVersion"]) > int(rv)


def test_custom_resource_update_without_resource_version_is_422(k8s_api: client.ApiClient) -> None:
    custom = Custom(k8s_api)
    body = custom.create(cocoonset("x"))
    del body["metadata"]["resourceVersion"]
    st = expect_error(422, custom.replace, "x", body)
    assert (
        "metadata.resourceVersion: Invalid value: 0: must be specified for an update"
        in st["message"]
    )


def test_pod_update_without_resource_version_is_unconditional(k8s_api: client.ApiClient) -> None:
    core = client.CoreV1Api(k8s_api)
    body = core.create_namespaced_pod("default", pod("p")).to_dict()
    fresh = client.CoreV1Api(k8s_api).read_namespaced_pod("p", "default")
    fresh.metadata.resource_version = None
    fresh.metadata.labels = {"x": "y"}
    out = core.replace_namespaced_pod("p", "default", fresh)
    assert out.metadata.labels == {"x": "y"}
    assert body["metadata"]["uid"] == out.metadata.uid


def test_no_op_update_does_not_change_resource_version(k8s_api: client.ApiClient) -> None:
    custom = Custom(k8s_api)
    created = custom.create(cocoonset("x"))
    again = custom.replace("x", created)
    assert again["metadata"]["resourceVersion"] == created["metadata"]["resourceVersion"]


def test_delete_with_stale_uid_precondition_is_409(k8s_api: client.ApiClient) -> None:
    core = client.CoreV1Api(k8s_api)
    core.create_namespaced_pod("default", pod("p"))
    st = expect_error(
        409,
        core.delete_namespaced_pod,
        "p",
        "default",
        body=client.V1DeleteOptions(
            preconditions=client.V1Preconditions(uid="00000000-0000-0000-0000-000000000000")
        ),
    )
    assert st["message"].startswith(
        'Operation cannot be fulfilled on Pod "p": the UID in the precondition '
        "(00000000-0000-0000-0000-000000000000) does not match the UID in record ("
    )
    core.read_namespaced_pod("p", "default")


def test_delete_with_stale_resource_version_precondition_is_409(k8s_api: client.ApiClient) -> None:
    custom = Custom(k8s_api)
    rv = custom.create(cocoonset("x"))["metadata"]["resourceVersion"]
    custom.patch("x", {"metadata": {"labels": {"b": "1"}}})
    st = expect_error(409, custom.delete, "x", body={"preconditions": {"resourceVersion": rv}})
    assert st["message"].startswith(
        'Operation cannot be fulfilled on CocoonSet.cocoonset.cocoonstack.io "x": '
        f"the ResourceVersion in the precondition ({rv}) does not match"
    )


def test_concurrent_updates_from_one_version_exactly_one_wins(k8s_api: client.ApiClient) -> None:
    custom = Custom(k8s_api)
    base = custom.create(cocoonset("x"))
    results: list[int] = []
    lock = threading.Lock()

    def writer(i: int) -> None:
        body = dict(base, metadata=dict(base["metadata"], labels={"w": str(i)}))
        try:
            Custom(k8s_api).replace("x", body)
            code = 200
        except client.ApiException as exc:
            code = exc.status
        with lock:
            results.append(code)

    threads = [threading.Thread(target=writer, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(results) == [200] + [409] * 7
