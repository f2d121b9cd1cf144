"""The patch content types kube-apiserver accepts, and how each merges."""

from __future__ import annotations

import pytest
from kubernetes import client

from tests.conformance.helpers import Custom, cocoonset, expect_error, pod

JSON_PATCH = "application/json-patch+json"


def test_json_merge_patch_null_deletes_a_key(k8s_api: client.ApiClient) -> None:
    custom = Custom(k8s_api)
    body = cocoonset("x")
    body["metadata"]["labels"] = {"a": "1", "b": "2"}
    custom.create(body)
    out = custom.patch("x", {"metadata": {"labels": {"a": None, "c": "3"}}})
    assert out["metadata"]["labels"] == {"b": "2", "c": "3"}


def test_merge_patch_replaces_lists_whole(k8s_api: client.ApiClient) -> None:
    custom = Custom(k8s_api)
    body = cocoonset("x")
    body["metadata"]["finalizers"] = ["a/one", "a/two"]
    custom.create(body)
    out = custom.patch("x", {"metadata": {"finalizers": ["a/three"]}})
    assert out["metadata"]["finalizers"] == ["a/three"]


def test_strategic_merge_patch_merges_containers_by_name(k8s_api: client.ApiClient) -> None:
    core = client.CoreV1Api(k8s_api)
    body = pod("p")
    body["spec"]["containers"].append({"name": "sidecar", "image": "side:1"})
    core.create_namespaced_pod("default", body)
    out = core.patch_namespaced_pod(
        "p", "default", {"spec": {"containers": [{"name": "sidecar", "image": "side:2"}]}}
    )
    assert [(c.name, c.image) for c in out.spec.containers] == [
        ("main", "registry.local/agent:1"),
        ("sidecar", "side:2"),
    ]


def test_strategic_merge_patch_merges_conditions_by_type(k8s_api: client.ApiClient) -> None:
    core = client.CoreV1Api(k8s_api)
    core.create_namespaced_pod("default", pod("p"))
    core.patch_namespaced_pod_status(
        "p",
        "default",
        {
            "status": {
                "conditions": [
                    {"type": "Ready", "status": "False"},
                    {"type": "Initialized", "status": "True"},
                ]
            }
        },
    )
    out = core.patch_namespaced_pod_status(
        "p", "default", {"status": {"conditions": [{"type": "Ready", "status": "True"}]}}
    )
    assert {c.type: c.status for c in out.status.conditions} == {
        "Ready": "True",
        "Initialized": "True",
    }


def test_strategic_merge_patch_replaces_tolerations_list(k8s_api: client.ApiClient) -> None:
    # core/v1 PodSpec.Tolerations carries no patchStrategy: SMP replaces it.
    core = client.CoreV1Api(k8s_api)
    core.create_namespaced_pod(
        "default", pod("p", tolerations=[{"key": "a", "operator": "Exists"}])
    )
    current = core.read_namespaced_pod("p", "default")
    # The patch puts the new toleration first: a replaced list keeps exactly this order.
    wanted = [{"key": "b", "operator": "Exists"}]
    wanted += [k8s_api.sanitize_for_serialization(t) for t in current.spec.tolerations]
    out = core.patch_namespaced_pod("p", "default", {"spec": {"tolerations": wanted}})
    assert [t.key for t in out.spec.tolerations] == [t["key"] for t in wanted]


def test_strategic_merge_patch_delete_directive_removes_list_item(
    k8s_api: client.ApiClient,
) -> None:
    core = client.CoreV1Api(k8s_api)
    core.create_namespaced_pod("default", pod("p"))
    core.patch_namespaced_pod_status(
        "p",
        "default",
        {
            "status": {
                "conditions": [{"type": "Ready", "status": "True"}, {"type": "X", "status": "True"}]
            }
        },
    )
    out = core.patch_namespaced_pod_status(
        "p", "default", {"status": {"conditions": [{"type": "X", "$patch": "delete"}]}}
    )
    assert [c.type for c in out.status.conditions] == ["Ready"]


def test_strategic_merge_patch_on_custom_resource_is_415(k8s_api: client.ApiClient) -> None:
    Custom(k8s_api).create(cocoonset("x"))
    st = expect_error(
        415,
        Custom(k8s_api).patch,
        "x",
        {"spec": {"nodePool": "b"}},
        _content_type="application/strategic-merge-patch+json",
    )
    assert st["reason"] == "UnsupportedMediaType"
    assert "application/merge-patch+json" in st["message"]


@pytest.mark.embedded_only("server-side apply is not emulated: a real server applies the patch")
def test_apply_patch_is_415_unsupported(k8s_api: client.ApiClient) -> None:
    Custom(k8s_api).create(cocoonset("x"))
    expect_error(
        415,
        Custom(k8s_api).patch,
        "x",
        {"spec": {}},
        _content_type="application/apply-patch+yaml",
        field_manager="t",
    )


def test_json_patch_operations_apply_in_order(k8s_api: client.ApiClient) -> None:
    custom = Custom(k8s_api)
    custom.create(cocoonset("x"))
    out = custom.patch(
        "x",
        [
            {"op": "add", "path": "/metadata/labels", "value": {"a": "1"}},
            {"op": "replace", "path": "/spec/nodePool", "value": "gpu"},
            {"op": "copy", "from": "/spec/nodePool", "path": "/metadata/labels/pool"},
            {"op": "remove", "path": "/metadata/labels/a"},
        ],
        _content_type=JSON_PATCH,
    )
    assert out["spec"]["nodePool"] == "gpu"
    assert out["metadata"]["labels"] == {"pool": "gpu"}


def test_json_patch_failed_test_op_is_422(k8s_api: client.ApiClient) -> None:
    custom = Custom(k8s_api)
    custom.create(cocoonset("x"))
    st = expect_error(
        422,
        custom.patch,
        "x",
        [
            {"op": "test", "path": "/spec/nodePool", "value": "other"},
            {"op": "replace", "path": "/spec/nodePool", "value": "gpu"},
        ],
        _content_type=JSON_PATCH,
    )
    assert st["reason"] == "Invalid"
    # Only the generic message: the server does not say which operation failed.
    assert st["message"] == "the server rejected our request due to an error in our request"
    assert custom.get("x")["spec"]["nodePool"] == "default"


def test_json_patch_test_on_resource_version_guards_the_write(k8s_api: client.ApiClient) -> None:
    custom = Custom(k8s_api)
    rv = custom.create(cocoonset("x"))["metadata"]["resourceVersion"]
    guarded = [
        {"op": "test", "path": "/metadata/resourceVersion", "value": rv},
        {"op": "replace", "path": "/spec/nodePool", "value": "a"},
    ]
    assert custom.patch("x", guarded, _content_type=JSON_PATCH)["spec"]["nodePool"] == "a"
    expect_error(422, custom.patch, "x", guarded, _content_type=JSON_PATCH)


def test_patch_missing_object_is_404(k8s_api: client.ApiClient) -> None:
    expect_error(404, Custom(k8s_api).patch, "nope", {"spec": {}})
