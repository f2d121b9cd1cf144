"""LIST resourceVersion / resourceVersionMatch: what each asks for, and the validation errors.

The reconciler lists a set's pods with `resourceVersion=<the set's>&resourceVersionMatch=
NotOlderThan` (docs/reads.md): the emulator must answer that as kube-apiserver does —
any state at or after the bound, never an older one; a bound not reached yet is a 504;
a malformed combination is a 422 on ListOptions.meta.k8s.io
(k8s.io/apimachinery/pkg/apis/meta/internalversion/validation/validation.go).
"""

from __future__ import annotations

from typing import Any

import pytest
from kubernetes import client

from tests.conformance.helpers import expect_error, pod


def _names(items: list[client.V1Pod]) -> list[str]:
    return sorted(p.metadata.name for p in items)


def test_not_older_than_a_version_includes_every_write_up_to_it(
    k8s_api: client.ApiClient,
) -> None:
    core = client.CoreV1Api(k8s_api)
    first = core.create_namespaced_pod("default", pod("p0", labels={"app": "x"}))
    core.create_namespaced_pod("default", pod("p1", labels={"app": "x"}))
    patched = core.patch_namespaced_pod("p0", "default", {"metadata": {"labels": {"seen": "yes"}}})
    bound = patched.metadata.resource_version
    # A write to another resource after the pods: the bound is older than etcd's newest
    # (what makes a consistent LIST wait on a real server, and this one not).
    core.create_namespaced_config_map("default", {"metadata": {"name": "after"}})
    out = core.list_namespaced_pod(
        "default",
        label_selector="app=x",
        resource_version=bound,
        resource_version_match="NotOlderThan",
    )
    assert int(out.metadata.resource_version) >= int(bound)
    assert _names(out.items) == ["p0", "p1"]
    p0 = next(p for p in out.items if p.metadata.name == "p0")
    assert p0.metadata.labels.get("seen") == "yes"
    # An older bound is as good: never a state before it (p0 exists at its creation).
    older = core.list_namespaced_pod(
        "default",
        label_selector="app=x",
        resource_version=first.metadata.resource_version,
        resource_version_match="NotOlderThan",
    )
    assert "p0" in _names(older.items)
    assert int(older.metadata.resource_version) >= int(first.metadata.resource_version)


def test_not_older_than_zero_is_any_state(k8s_api: client.ApiClient) -> None:
    core = client.CoreV1Api(k8s_api)
    core.create_namespaced_pod("default", pod("z0"))
    out = core.list_namespaced_pod(
        "default", resource_version="0", resource_version_match="NotOlderThan"
    )
    assert isinstance(out.items, list)
    assert int(out.metadata.resource_version) > 0


def test_not_older_than_a_future_version_is_504_too_large(k8s_api: client.ApiClient) -> None:
    """kube-apiserver waits up to 3 s for its cache to reach the bound, then gives up."""
    core = client.CoreV1Api(k8s_api)
    current = int(core.list_namespaced_pod("default").metadata.resource_version)
    future = str(current + 100000)
    st = expect_error(
        504,
        core.list_namespaced_pod,
        "default",
        resource_version=future,
        resource_version_match="NotOlderThan",
    )
    assert st["reason"] == "Timeout"
    assert st["message"].startswith(f"Timeout: Too large resource version: {future}, current: ")
    assert st["details"]["causes"][0]["reason"] == "ResourceVersionTooLarge"


def _invalid_list_options(k8s_api: client.ApiClient, **kw: Any) -> dict[str, Any]:
    core = client.CoreV1Api(k8s_api)
    st = expect_error(422, core.list_namespaced_pod, "default", **kw)
    assert st["reason"] == "Invalid"
    assert st["details"]["group"] == "meta.k8s.io"
    assert st["details"]["kind"] == "ListOptions"
    assert st["message"].startswith('ListOptions.meta.k8s.io "" is invalid: ')
    return st


@pytest.mark.parametrize("match", ["NotOlderThan", "Exact"])
def test_a_match_without_a_resource_version_is_422(k8s_api: client.ApiClient, match: str) -> None:
    st = _invalid_list_options(k8s_api, resource_version_match=match)
    assert st["message"] == (
        'ListOptions.meta.k8s.io "" is invalid: resourceVersionMatch: Forbidden: '
        "resourceVersionMatch is forbidden unless resourceVersion is provided"
    )
    assert st["details"]["causes"] == [
        {
            "reason": "FieldValueForbidden",
            "message": "Forbidden: resourceVersionMatch is forbidden unless resourceVersion "
            "is provided",
            "field": "resourceVersionMatch",
        }
    ]


def test_an_unsupported_match_is_422_naming_the_supported_values(
    k8s_api: client.ApiClient,
) -> None:
    st = _invalid_list_options(k8s_api, resource_version="1", resource_version_match="Newest")
    assert st["details"]["causes"] == [
        {
            "reason": "FieldValueNotSupported",
            "message": 'Unsupported value: "Newest": supported values: "Exact", "NotOlderThan", ""',
            "field": "resourceVersionMatch",
        }
    ]


def test_exact_at_zero_is_422(k8s_api: client.ApiClient) -> None:
    st = _invalid_list_options(k8s_api, resource_version="0", resource_version_match="Exact")
    assert st["message"].endswith(
        'resourceVersionMatch: Forbidden: resourceVersionMatch "exact" is forbidden for '
        'resourceVersion "0"'
    )


def test_a_match_with_a_continue_token_is_422(k8s_api: client.ApiClient) -> None:
    core = client.CoreV1Api(k8s_api)
    for i in range(3):
        core.create_namespaced_pod("default", pod(f"c{i}"))
    first = core.list_namespaced_pod("default", limit=1)
    assert first.metadata._continue
    st = _invalid_list_options(
        k8s_api,
        resource_version=first.metadata.resource_version,
        resource_version_match="NotOlderThan",
        _continue=first.metadata._continue,
    )
    assert [c["message"] for c in st["details"]["causes"]] == [
        "Forbidden: resourceVersionMatch is forbidden when continue is provided"
    ]


def test_every_broken_rule_is_listed_in_one_answer(k8s_api: client.ApiClient) -> None:
    st = _invalid_list_options(k8s_api, resource_version_match="Newest")
    assert [c["reason"] for c in st["details"]["causes"]] == [
        "FieldValueForbidden",
        "FieldValueNotSupported",
    ]
    assert st["message"] == (
        'ListOptions.meta.k8s.io "" is invalid: [resourceVersionMatch: Forbidden: '
        "resourceVersionMatch is forbidden unless resourceVersion is provided, "
        'resourceVersionMatch: Unsupported value: "Newest": supported values: "Exact", '
        '"NotOlderThan", ""]'
    )


def test_custom_resources_validate_list_options_too(k8s_api: client.ApiClient) -> None:
    co = client.CustomObjectsApi(k8s_api)
    with pytest.raises(client.ApiException) as info:
        co.list_namespaced_custom_object(
            "cocoonset.cocoonstack.io",
            "v1",
            "default",
            "cocoonsets",
            resource_version_match="NotOlderThan",
        )
    assert info.value.status == 422
    assert "resourceVersionMatch is forbidden unless resourceVersion is provided" in str(
        info.value.body
    )
