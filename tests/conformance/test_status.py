"""The status subresource and metadata.generation, per the upstream strategies."""

from __future__ import annotations

from kubernetes import client

from tests.conformance.helpers import Custom, cocoonset, pod


def test_status_is_ignored_on_the_main_resource(k8s_api: client.ApiClient) -> None:
    custom = Custom(k8s_api)
    body = cocoonset("x")
    body["status"] = {"phase": "Hibernated"}
    created = custom.create(body)
    assert "status" not in created
    out = custom.patch("x", {"status": {"phase": "Hibernated"}})
    assert "status" not in out


def test_status_subresource_ignores_spec_and_metadata_changes(k8s_api: client.ApiClient) -> None:
    custom = Custom(k8s_api)
    custom.create(cocoonset("x"))
    out = custom.patch_status(
        "x",
        {
            "metadata": {"labels": {"l": "v"}, "annotations": {"a": "b"}},
            "spec": {"nodePool": "other"},
            "status": {"phase": "Running"},
        },
    )
    assert out["status"] == {"phase": "Running"}
    assert out["spec"]["nodePool"] == "default"
    assert "labels" not in out["metadata"] and "annotations" not in out["metadata"]


def test_status_update_via_put_replaces_only_status(k8s_api: client.ApiClient) -> None:
    custom = Custom(k8s_api)
    body = custom.create(cocoonset("x"))
    body["status"] = {"phase": "Suspended"}
    body["spec"]["nodePool"] = "ignored"
    out = custom.replace_status("x", body)
    assert out["status"] == {"phase": "Suspended"}
    assert out["spec"]["nodePool"] == "default"


def test_generation_bumps_on_spec_change_only(k8s_api: client.ApiClient) -> None:
    custom = Custom(k8s_api)
    assert custom.create(cocoonset("x"))["metadata"]["generation"] == 1
    assert custom.patch_status("x", {"status": {"phase": "Running"}})["metadata"]["generation"] == 1
    assert custom.patch("x", {"metadata": {"labels": {"a": "b"}}})["metadata"]["generation"] == 1
    assert custom.patch("x", {"spec": {"nodePool": "gpu"}})["metadata"]["generation"] == 2


def test_pod_status_is_ignored_on_create_and_reset_to_pending(k8s_api: client.ApiClient) -> None:
    body = pod("p")
    body["status"] = {"phase": "Running", "podIP": "10.0.0.9"}
    created = client.CoreV1Api(k8s_api).create_namespaced_pod("default", body)
    assert created.status.phase == "Pending"
    assert created.status.pod_ip is None
    assert created.metadata.generation == 1


def test_pod_status_written_through_status_subresource(k8s_api: client.ApiClient) -> None:
    core = client.CoreV1Api(k8s_api)
    core.create_namespaced_pod("default", pod("p"))
    out = core.patch_namespaced_pod_status(
        "p",
        "default",
        {
            "status": {
                "phase": "Running",
                "podIP": "10.0.0.9",
                "conditions": [{"type": "Ready", "status": "True"}],
            }
        },
    )
    assert out.status.phase == "Running"
    assert out.status.pod_ip == "10.0.0.9"
    assert out.metadata.generation == 1
    main = core.patch_namespaced_pod("p", "default", {"status": {"phase": "Failed"}})
    assert main.status.phase == "Running"
