"""limit/continue: consistent snapshots while objects change, 410 once compacted."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from kubernetes import client

from devstack.kubeapi import EmbeddedKube
from tests.conformance.helpers import api_client_for, expect_error, pod


def _names(items: list[client.V1Pod]) -> list[str]:
    return [p.metadata.name for p in items]


def test_limit_and_continue_page_through_all_items_in_key_order(k8s_api: client.ApiClient) -> None:
    core = client.CoreV1Api(k8s_api)
    for i in range(25):
        core.create_namespaced_pod("default", pod(f"p{i:02d}"))
    first = core.list_namespaced_pod("default", limit=10)
    assert _names(first.items) == [f"p{i:02d}" for i in range(10)]
    assert first.metadata.remaining_item_count == 15
    assert first.metadata._continue
    seen = _names(first.items)
    token = first.metadata._continue
    while token:
        page = core.list_namespaced_pod("default", limit=10, _continue=token)
        assert page.metadata.resource_version == first.metadata.resource_version
        seen += _names(page.items)
        token = page.metadata._continue
    assert seen == [f"p{i:02d}" for i in range(25)]
    assert page.metadata.remaining_item_count is None


def test_continue_serves_the_snapshot_of_the_first_page_while_objects_change(
    k8s_api: client.ApiClient,
) -> None:
    core = client.CoreV1Api(k8s_api)
    for i in range(6):
        core.create_namespaced_pod("default", pod(f"p{i}", labels={"v": "1"}))
    first = core.list_namespaced_pod("default", limit=3)
    # Changes after the first page: an addition, a deletion and an update in the second half.
    core.create_namespaced_pod("default", pod("p9"))
    core.delete_namespaced_pod("p4", "default")
    core.patch_namespaced_pod("p5", "default", {"metadata": {"labels": {"v": "2"}}})
    rest = core.list_namespaced_pod("default", limit=10, _continue=first.metadata._continue)
    assert _names(rest.items) == ["p3", "p4", "p5"]
    assert rest.items[2].metadata.labels == {"v": "1"}
    assert rest.metadata.resource_version == first.metadata.resource_version
    fresh = core.list_namespaced_pod("default")
    assert _names(fresh.items) == ["p0", "p1", "p2", "p3", "p5", "p9"]


def test_limit_counts_matching_items_when_a_selector_is_given(k8s_api: client.ApiClient) -> None:
    core = client.CoreV1Api(k8s_api)
    for i in range(10):
        core.create_namespaced_pod(
            "default", pod(f"p{i}", labels={"even": str(i % 2 == 0).lower()})
        )
    page = core.list_namespaced_pod("default", label_selector="even=true", limit=2)
    assert _names(page.items) == ["p0", "p2"]
    page2 = core.list_namespaced_pod(
        "default", label_selector="even=true", limit=10, _continue=page.metadata._continue
    )
    assert _names(page2.items) == ["p4", "p6", "p8"]


@pytest.fixture
def small(tmp_path: Path) -> Iterator[tuple[EmbeddedKube, client.ApiClient]]:
    """A server retaining only 10 events: compaction comes quickly."""
    with EmbeddedKube(watch_history=10) as kube:
        api = api_client_for(kube, tmp_path)
        yield kube, api
        api.close()


def test_expired_continue_token_is_410_gone(small: tuple[EmbeddedKube, client.ApiClient]) -> None:
    core = client.CoreV1Api(small[1])
    for i in range(4):
        core.create_namespaced_pod("default", pod(f"p{i}"))
    first = core.list_namespaced_pod("default", limit=2)
    for i in range(20):
        core.patch_namespaced_pod("p0", "default", {"metadata": {"labels": {"n": str(i)}}})
    st = expect_error(
        410, core.list_namespaced_pod, "default", limit=2, _continue=first.metadata._continue
    )
    assert st["reason"] == "Expired"
    assert st["message"].startswith(
        "The provided continue parameter is too old to display a consistent list result."
    )


def test_list_at_exact_compacted_resource_version_is_410(
    small: tuple[EmbeddedKube, client.ApiClient],
) -> None:
    core = client.CoreV1Api(small[1])
    rv = core.create_namespaced_pod("default", pod("p")).metadata.resource_version
    assert _names(
        core.list_namespaced_pod(
            "default", resource_version=rv, resource_version_match="Exact"
        ).items
    ) == ["p"]
    for i in range(20):
        core.patch_namespaced_pod("p", "default", {"metadata": {"labels": {"n": str(i)}}})
    st = expect_error(
        410,
        core.list_namespaced_pod,
        "default",
        resource_version=rv,
        resource_version_match="Exact",
    )
    assert st["message"].startswith(f"too old resource version: {rv}")


def test_list_at_exact_future_resource_version_is_504_too_large(k8s_api: client.ApiClient) -> None:
    core = client.CoreV1Api(k8s_api)
    current = int(core.list_namespaced_pod("default").metadata.resource_version)
    st = expect_error(
        504,
        core.list_namespaced_pod,
        "default",
        resource_version=str(current + 1000),
        resource_version_match="Exact",
    )
    assert st["reason"] == "Timeout"
    assert st["message"].startswith(
        f"Timeout: Too large resource version: {current + 1000}, current: "
    )
