"""Where the emulator used to be kinder than a real kube-apiserver: identity, Event
expiry, ServiceAccount admission. Each runs on both backends."""

from __future__ import annotations

import datetime as dt
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client, config

from tests.conformance.helpers import Custom, cocoonset, expect_error, gone, pod, wait_for


def test_uid_is_immutable_through_a_patch_422(k8s_api: client.ApiClient) -> None:
    custom = Custom(k8s_api)
    uid = custom.create(cocoonset("x"))["metadata"]["uid"]
    other = "00000000-0000-0000-0000-000000000001"
    st = expect_error(422, custom.patch, "x", {"metadata": {"uid": other}})
    assert st["reason"] == "Invalid"
    # (A real server lists the same cause twice: validated by two layers.)
    assert {c["field"] for c in st["details"]["causes"]} == {"metadata.uid"}
    assert "field is immutable" in st["details"]["causes"][0]["message"]
    assert custom.get("x")["metadata"]["uid"] == uid


def test_pod_uid_is_immutable_and_an_update_without_uid_keeps_it(
    k8s_api: client.ApiClient,
) -> None:
    core = client.CoreV1Api(k8s_api)
    created = core.create_namespaced_pod("default", pod("p"))
    st = expect_error(
        422,
        core.patch_namespaced_pod,
        "p",
        "default",
        {"metadata": {"uid": "00000000-0000-0000-0000-000000000002"}},
    )
    assert "metadata.uid" in st["message"]
    body = core.read_namespaced_pod("p", "default").to_dict()
    replaced = core.replace_namespaced_pod(
        "p",
        "default",
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "name": "p",
                "labels": {"k": "v"},
                "resourceVersion": body["metadata"]["resource_version"],
            },
            "spec": k8s_api.sanitize_for_serialization(
                core.read_namespaced_pod("p", "default").spec
            ),
        },
    )
    assert replaced.metadata.uid == created.metadata.uid


# -- ServiceAccount admission ---------------------------------------------------------


def test_pod_runs_as_the_default_service_account_unless_named(k8s_api: client.ApiClient) -> None:
    core = client.CoreV1Api(k8s_api)
    created = core.create_namespaced_pod("default", pod("p"))
    assert created.spec.service_account_name == "default"


def test_pod_naming_a_missing_service_account_is_403_until_it_exists(
    k8s_api: client.ApiClient,
) -> None:
    core = client.CoreV1Api(k8s_api)
    st = expect_error(
        403, core.create_namespaced_pod, "default", pod("p", serviceAccountName="robot")
    )
    assert st["reason"] == "Forbidden"
    assert st["message"] == (
        'pods "p" is forbidden: error looking up service account default/robot: '
        'serviceaccount "robot" not found'
    )
    core.create_namespaced_service_account("default", {"metadata": {"name": "robot"}})
    created = core.create_namespaced_pod("default", pod("p", serviceAccountName="robot"))
    assert created.spec.service_account_name == "robot"


def test_new_namespace_gets_its_default_service_account_then_admits_pods(
    k8s_api: client.ApiClient,
) -> None:
    # A real cluster's ServiceAccount controller creates `default` moments after the
    # namespace (the real fixture plays that controller; the emulator does it at once).
    core = client.CoreV1Api(k8s_api)
    core.create_namespace({"metadata": {"name": "team-sa"}})
    wait_for(lambda: not gone(lambda: core.read_namespaced_service_account("default", "team-sa")))
    assert core.create_namespaced_pod("team-sa", pod("p")).spec.service_account_name == "default"


# -- Event TTL ------------------------------------------------------------------------

EVENT_TTL_SECONDS = 3


@pytest.fixture
def short_ttl_api(
    kube_backend: str, tmp_path: Path, request: pytest.FixtureRequest
) -> Iterator[client.ApiClient]:
    """A server of this backend of its own, whose Events live EVENT_TTL_SECONDS."""
    server: Any
    if kube_backend == "real":
        from devstack.realkube import RealKube

        # Skips (or, under CI=true, fails) as every real-backend test does when the
        # binaries are missing.
        request.getfixturevalue("real_kube_session")
        server = RealKube(event_ttl=f"{EVENT_TTL_SECONDS}s")
    else:
        from devstack.kubeapi import EmbeddedKube

        server = EmbeddedKube(event_ttl=EVENT_TTL_SECONDS)
    server.start()
    try:
        path = server.write_kubeconfig(tmp_path / "kubeconfig")
        configuration = client.Configuration()
        config.load_kube_config(config_file=str(path), client_configuration=configuration)
        api = client.ApiClient(configuration)
        yield api
        api.close()
    finally:
        server.stop()


def _event(name: str) -> dict[str, Any]:
    now = dt.datetime.now(dt.UTC).replace(microsecond=0).isoformat().replace("+00:00", "Z")
    return {
        "metadata": {"name": name},
        "involvedObject": {"kind": "CocoonSet", "name": "x", "namespace": "default"},
        "reason": "WakeNoCapacity",
        "message": "0/3 nodes are available",
        "type": "Warning",
        "source": {"component": "cocoon-hibernation"},
        "firstTimestamp": now,
        "lastTimestamp": now,
        "count": 1,
    }


def test_events_expire_after_the_event_ttl_and_the_name_is_free_again(
    short_ttl_api: client.ApiClient,
) -> None:
    core = client.CoreV1Api(short_ttl_api)
    core.create_namespaced_event("default", _event("x.wake-1"))
    expect_error(409, core.create_namespaced_event, "default", _event("x.wake-1"))
    start = time.monotonic()
    # etcd checks expired leases about every 500 ms; the lease is the TTL plus a little.
    wait_for(
        lambda: gone(lambda: core.read_namespaced_event("x.wake-1", "default")),
        timeout=EVENT_TTL_SECONDS + 10,
        interval=0.2,
    )
    assert time.monotonic() - start >= EVENT_TTL_SECONDS - 1
    # The same situation later records a fresh Event (count 1), not a clash.
    assert core.create_namespaced_event("default", _event("x.wake-1")).count == 1


def test_other_objects_do_not_expire(short_ttl_api: client.ApiClient) -> None:
    core = client.CoreV1Api(short_ttl_api)
    core.create_namespaced_config_map("default", {"metadata": {"name": "keep"}})
    time.sleep(EVENT_TTL_SECONDS + 1.5)
    assert core.read_namespaced_config_map("keep", "default").metadata.name == "keep"
