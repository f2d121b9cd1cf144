"""Watches through kubernetes.watch.Watch: event types, resume, 410, selectors, timeouts."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client, watch

from devstack.kubeapi import EmbeddedKube
from tests.conformance.helpers import (
    GROUP,
    PLURAL,
    VERSION,
    Custom,
    api_client_for,
    cocoonset,
    new_namespace,
    pod,
)


def _collect(
    func: Any, *args: Any, count: int, timeout: int = 3, **kwargs: Any
) -> list[tuple[str, Any]]:
    w = watch.Watch()
    out: list[tuple[str, Any]] = []
    for ev in w.stream(func, *args, timeout_seconds=timeout, **kwargs):
        out.append((ev["type"], ev["object"]))
        if len(out) >= count:
            w.stop()
            break
    return out


def test_watch_from_resource_version_replays_added_modified_deleted(
    k8s_api: client.ApiClient,
) -> None:
    core = client.CoreV1Api(k8s_api)
    rv = core.list_namespaced_pod("default").metadata.resource_version
    core.create_namespaced_pod("default", pod("p"))
    core.patch_namespaced_pod("p", "default", {"metadata": {"labels": {"a": "b"}}})
    core.delete_namespaced_pod("p", "default")
    events = _collect(core.list_namespaced_pod, "default", count=4, resource_version=rv)
    # Pods always delete gracefully: even at once (unscheduled), the deletion stamp is
    # written first, so watchers see MODIFIED before DELETED.
    assert [t for t, _ in events] == ["ADDED", "MODIFIED", "MODIFIED", "DELETED"]
    assert events[2][1].metadata.deletion_timestamp is not None
    rvs = [int(o.metadata.resource_version) for _, o in events]
    assert rvs == sorted(rvs) and rvs[0] > int(rv)
    assert events[1][1].metadata.labels == {"a": "b"}


def test_watch_without_resource_version_starts_with_synthetic_added_events(
    k8s_api: client.ApiClient,
) -> None:
    core = client.CoreV1Api(k8s_api)
    core.create_namespaced_pod("default", pod("a"))
    core.create_namespaced_pod("default", pod("b"))
    events = _collect(core.list_namespaced_pod, "default", count=2)
    assert [(t, o.metadata.name) for t, o in events] == [("ADDED", "a"), ("ADDED", "b")]


def test_watch_streams_live_changes(k8s_api: client.ApiClient) -> None:
    custom = Custom(k8s_api)
    rv = custom.list()["metadata"]["resourceVersion"]
    got: list[tuple[str, Any]] = []
    started = threading.Event()

    def run() -> None:
        w = watch.Watch()
        started.set()
        for ev in w.stream(
            client.CustomObjectsApi(k8s_api).list_namespaced_custom_object,
            GROUP,
            VERSION,
            "default",
            PLURAL,
            resource_version=rv,
            timeout_seconds=5,
        ):
            got.append((ev["type"], ev["object"]["metadata"]["name"]))
            if len(got) == 2:
                w.stop()
                break

    t = threading.Thread(target=run)
    t.start()
    started.wait()
    time.sleep(0.1)
    custom.create(cocoonset("x"))
    custom.patch_status("x", {"status": {"phase": "Running"}})
    t.join(10)
    assert got == [("ADDED", "x"), ("MODIFIED", "x")]


def test_watch_with_label_selector_sees_objects_enter_and_leave_the_selection(
    k8s_api: client.ApiClient,
) -> None:
    core = client.CoreV1Api(k8s_api)
    rv = core.list_namespaced_pod("default").metadata.resource_version
    core.create_namespaced_pod("default", pod("p", labels={"app": "other"}))
    core.patch_namespaced_pod("p", "default", {"metadata": {"labels": {"app": "web"}}})
    core.patch_namespaced_pod("p", "default", {"metadata": {"labels": {"app": "web", "x": "1"}}})
    core.patch_namespaced_pod("p", "default", {"metadata": {"labels": {"app": "gone"}}})
    events = _collect(
        core.list_namespaced_pod, "default", count=3, resource_version=rv, label_selector="app=web"
    )
    assert [t for t, _ in events] == ["ADDED", "MODIFIED", "DELETED"]


def test_watch_is_scoped_to_its_namespace(k8s_api: client.ApiClient) -> None:
    core = client.CoreV1Api(k8s_api)
    new_namespace(core, "other")
    rv = core.list_namespaced_pod("default").metadata.resource_version
    core.create_namespaced_pod("other", pod("elsewhere"))
    core.create_namespaced_pod("default", pod("here"))
    events = _collect(core.list_namespaced_pod, "default", count=1, resource_version=rv)
    assert [o.metadata.name for _, o in events] == ["here"]


def test_watch_timeout_seconds_ends_the_stream(k8s_api: client.ApiClient) -> None:
    core = client.CoreV1Api(k8s_api)
    rv = core.list_namespaced_pod("default").metadata.resource_version
    started = time.monotonic()
    events = list(
        watch.Watch().stream(
            core.list_namespaced_pod, "default", resource_version=rv, timeout_seconds=1
        )
    )
    assert events == []
    assert time.monotonic() - started < 10


@pytest.fixture
def small(tmp_path: Path) -> Iterator[client.ApiClient]:
    with EmbeddedKube(watch_history=10) as kube:
        api = api_client_for(kube, tmp_path)
        yield api
        api.close()


def test_watch_from_compacted_resource_version_is_410_gone(small: client.ApiClient) -> None:
    core = client.CoreV1Api(small)
    rv = core.create_namespaced_pod("default", pod("p")).metadata.resource_version
    for i in range(20):
        core.patch_namespaced_pod("p", "default", {"metadata": {"labels": {"n": str(i)}}})
    with pytest.raises(client.ApiException) as info:
        _collect(core.list_namespaced_pod, "default", count=1, resource_version=rv)
    assert info.value.status == 410
    assert f"too old resource version: {rv}" in str(info.value.reason)


def test_watch_resumes_from_last_seen_resource_version_without_gaps(
    k8s_api: client.ApiClient,
) -> None:
    core = client.CoreV1Api(k8s_api)
    rv = core.list_namespaced_pod("default").metadata.resource_version
    core.create_namespaced_pod("default", pod("a"))
    first = _collect(core.list_namespaced_pod, "default", count=1, resource_version=rv)
    last = first[-1][1].metadata.resource_version
    core.create_namespaced_pod("default", pod("b"))
    core.create_namespaced_pod("default", pod("c"))
    second = _collect(core.list_namespaced_pod, "default", count=2, resource_version=last)
    assert [o.metadata.name for _, o in first + second] == ["a", "b", "c"]


def test_idle_watch_with_bookmarks_allowed_gets_bookmark_at_latest_seen_version(
    tmp_path: Path,
) -> None:
    with EmbeddedKube(watch_bookmark_interval=0.2) as kube:
        api = api_client_for(kube, tmp_path)
        core = client.CoreV1Api(api)
        rv = core.create_namespaced_pod("default", pod("p")).metadata.resource_version
        Custom(api).create(cocoonset("other-resource"))  # moves the store's version on
        w = watch.Watch()
        seen: list[tuple[str, Any]] = []
        for ev in w.stream(
            core.list_namespaced_pod,
            "default",
            resource_version=rv,
            allow_watch_bookmarks=True,
            timeout_seconds=5,
        ):
            seen.append((ev["type"], ev["raw_object"]))
            if ev["type"] == "BOOKMARK":
                w.stop()
                break
        api.close()
    kinds = [t for t, _ in seen]
    assert kinds == ["BOOKMARK"]
    mark_rv = int(seen[0][1]["metadata"]["resourceVersion"])
    assert mark_rv > int(rv)
