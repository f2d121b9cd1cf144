"""Injected faults: failure answers real apiservers give, latency and dropped connections."""

from __future__ import annotations

import json
import urllib.request
from typing import Any

import pytest
import urllib3
from kubernetes import client

from tests.conformance.helpers import Custom, cocoonset, expect_error, pod

pytestmark = pytest.mark.embedded_only("fault injection is an emulator test hook")


def test_fault_answers_a_proper_status_for_n_matching_requests(
    kube: Any, k8s_api: client.ApiClient
) -> None:
    custom = Custom(k8s_api)
    custom.create(cocoonset("x"))
    kube.add_fault(method="PATCH", path=r"/cocoonsets/x$", status=500, times=2)
    for _ in range(2):
        st = expect_error(500, custom.patch, "x", {"metadata": {"labels": {"a": "b"}}})
        assert st["reason"] == "InternalError"
    assert custom.patch("x", {"metadata": {"labels": {"a": "b"}}})["metadata"]["labels"] == {
        "a": "b"
    }
    assert custom.get("x")["metadata"]["name"] == "x"  # GETs never matched the PATCH rule


def test_fault_429_carries_retry_after(kube: Any, k8s_api: client.ApiClient) -> None:
    core = client.CoreV1Api(k8s_api)
    kube.add_fault(method="POST", path=r"/pods$", status=429, retry_after=3)
    with pytest.raises(client.ApiException) as info:
        core.create_namespaced_pod("default", pod("p"))
    assert info.value.status == 429
    assert info.value.headers["Retry-After"] == "3"
    body = json.loads(info.value.body)
    assert body["reason"] == "TooManyRequests"
    assert body["details"]["retryAfterSeconds"] == 3


def test_idempotent_get_answered_429_with_retry_after_is_retried_by_urllib3(
    kube: Any, k8s_api: client.ApiClient
) -> None:
    # urllib3 (under the official client) honours Retry-After on 429/503 for idempotent methods.
    kube.add_fault(method="GET", path=r"/pods$", status=429, retry_after=1)
    assert client.CoreV1Api(k8s_api).list_namespaced_pod("default").items == []
    assert [r["status"] for r in kube.requests()] == [429, 200]


def test_fault_503_service_unavailable(kube: Any, k8s_api: client.ApiClient) -> None:
    kube.add_fault(method="POST", path=r"/pods$", status=503)
    st = expect_error(503, client.CoreV1Api(k8s_api).create_namespaced_pod, "default", pod("p"))
    assert st["reason"] == "ServiceUnavailable"
    assert client.CoreV1Api(k8s_api).list_namespaced_pod("default").items == []


def test_cut_connection_gives_no_response_and_does_not_apply_the_write(
    kube: Any, k8s_api: client.ApiClient
) -> None:
    custom = Custom(k8s_api)
    custom.create(cocoonset("x"))
    kube.add_fault(method="PATCH", path=r"/cocoonsets/x$", cut=True)
    with pytest.raises(urllib3.exceptions.HTTPError):
        custom.patch("x", {"metadata": {"labels": {"a": "b"}}})
    assert "labels" not in custom.get("x")["metadata"]
    assert [r["status"] for r in kube.requests() if r["method"] == "PATCH"] == [0]


def test_latency_fault_delays_then_serves(kube: Any, k8s_api: client.ApiClient) -> None:
    kube.add_fault(method="GET", path=r"/pods$", latency_ms=150)
    assert client.CoreV1Api(k8s_api).list_namespaced_pod("default").items == []
    entry = [r for r in kube.requests() if r["path"].endswith("/pods")][-1]
    assert entry["status"] == 200
    assert entry["duration_ms"] >= 150


def test_probability_zero_never_fires_and_one_always_fires(
    kube: Any, k8s_api: client.ApiClient
) -> None:
    core = client.CoreV1Api(k8s_api)
    kube.add_fault(method="GET", path=r"/pods$", status=500, times=None, probability=0.0)
    for _ in range(5):
        core.list_namespaced_pod("default")
    kube.add_fault(method="GET", path=r"/pods$", status=500, times=None, probability=1.0)
    for _ in range(3):
        expect_error(500, core.list_namespaced_pod, "default")


def test_faults_are_managed_over_http(kube: Any, k8s_api: client.ApiClient) -> None:
    def call(method: str, path: str, body: dict[str, Any] | None = None) -> Any:
        data = json.dumps(body).encode() if body is not None else None
        req = urllib.request.Request(
            kube.url + path, data=data, method=method, headers={"Content-Type": "application/json"}
        )
        with urllib.request.urlopen(req) as resp:
            return json.loads(resp.read())

    call(
        "POST", "/_emulator/faults", {"method": "GET", "path": "/pods$", "status": 503, "times": 5}
    )
    expect_error(503, client.CoreV1Api(k8s_api).list_namespaced_pod, "default")
    call("DELETE", "/_emulator/faults")
    assert client.CoreV1Api(k8s_api).list_namespaced_pod("default").items == []
    logged = call("GET", "/_emulator/requests")
    assert [r["status"] for r in logged if r["path"] == "/api/v1/namespaces/default/pods"] == [
        503,
        200,
    ]
