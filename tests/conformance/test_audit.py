"""The audit webhook backend: batched EventLists, bearer token, retries, reads too."""

from __future__ import annotations

import contextlib
import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client

from devstack.kubeapi import EmbeddedKube
from tests.conformance.helpers import Custom, api_client_for, cocoonset, pod, wait_for


class Receiver:
    """A tiny audit webhook on 127.0.0.1 that records batches (and can fail the first N)."""

    def __init__(self, fail_first: int = 0, fail_status: int = 503) -> None:
        self.batches: list[dict[str, Any]] = []
        self.auth: list[str] = []
        self.fail_left = fail_first
        self.attempts = 0
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers["Content-Length"]))
                receiver.attempts += 1
                if receiver.fail_left > 0:
                    receiver.fail_left -= 1
                    self.send_response(fail_status)
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                receiver.auth.append(self.headers.get("Authorization", ""))
                receiver.batches.append(json.loads(body))
                self.send_response(200)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, format: str, *args: Any) -> None:
                return

        self.server = HTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/audit"

    def events(self) -> list[dict[str, Any]]:
        return [e for b in self.batches for e in b["items"]]

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    r = Receiver()
    yield r
    r.close()


def test_audit_events_are_posted_as_batched_event_lists_with_bearer_token(
    receiver: Receiver, tmp_path: Path
) -> None:
    with EmbeddedKube(
        audit_webhook=receiver.url,
        audit_token="s3cret",
        audit_batch_max_size=3,
        audit_batch_max_wait=0.5,
    ) as kube:
        api = api_client_for(kube, tmp_path)
        core = client.CoreV1Api(api)
        for i in range(7):
            core.create_namespaced_pod("default", pod(f"p{i}"))
        wait_for(lambda: len(receiver.events()) >= 7)
        api.close()
    assert all(
        b["kind"] == "EventList" and b["apiVersion"] == "audit.k8s.io/v1" for b in receiver.batches
    )
    assert max(len(b["items"]) for b in receiver.batches) <= 3
    assert set(receiver.auth) == {"Bearer s3cret"}


def test_audit_event_describes_the_write_at_request_level(
    receiver: Receiver, tmp_path: Path
) -> None:
    with EmbeddedKube(audit_webhook=receiver.url) as kube:
        api = api_client_for(kube, tmp_path)
        Custom(api).create(cocoonset("x"))
        Custom(api).patch_status("x", {"status": {"phase": "Running"}})
        wait_for(lambda: len(receiver.events()) >= 2)
        api.close()
    create, patch = receiver.events()[:2]
    assert create["verb"] == "create"
    assert create["stage"] == "ResponseComplete"
    assert create["level"] == "Request"
    assert create["objectRef"] == {
        "resource": "cocoonsets",
        "namespace": "default",
        "name": "x",
        "apiGroup": "cocoonset.cocoonstack.io",
        "apiVersion": "v1",
    }
    assert create["responseStatus"]["code"] == 201
    assert create["requestObject"]["metadata"]["name"] == "x"
    assert create["user"]["username"]
    assert create["auditID"] and create["requestURI"].startswith(
        "/apis/cocoonset.cocoonstack.io/v1/namespaces/default/cocoonsets"
    )
    assert create["requestReceivedTimestamp"] <= create["stageTimestamp"]
    assert patch["verb"] == "patch"
    assert patch["objectRef"]["subresource"] == "status"
    assert patch["requestObject"] == {"status": {"phase": "Running"}}


def test_reads_are_audited_too_without_request_object(receiver: Receiver, tmp_path: Path) -> None:
    with EmbeddedKube(audit_webhook=receiver.url) as kube:
        api = api_client_for(kube, tmp_path)
        client.CoreV1Api(api).list_namespaced_pod("default")
        with contextlib.suppress(client.ApiException):
            client.CoreV1Api(api).read_namespaced_pod("missing", "default")
        wait_for(lambda: len(receiver.events()) >= 2)
        api.close()
    lst, get = receiver.events()[:2]
    assert lst["verb"] == "list" and "requestObject" not in lst
    assert get["verb"] == "get"
    assert get["responseStatus"]["code"] == 404
    assert get["responseStatus"]["reason"] == "NotFound"


def test_failed_batches_are_retried_with_backoff(tmp_path: Path) -> None:
    flaky = Receiver(fail_first=2)
    try:
        with EmbeddedKube(audit_webhook=flaky.url, audit_retries=5, audit_backoff=0.05) as kube:
            api = api_client_for(kube, tmp_path)
            client.CoreV1Api(api).create_namespaced_pod("default", pod("p"))
            wait_for(lambda: len(flaky.events()) >= 1)
            api.close()
        assert flaky.attempts >= 3
        assert flaky.events()[0]["verb"] == "create"
    finally:
        flaky.close()


def test_unreachable_webhook_never_blocks_api_requests(tmp_path: Path) -> None:
    dead = "http://127.0.0.1:9/audit"  # discard port: nothing listens
    with EmbeddedKube(audit_webhook=dead, audit_retries=2, audit_backoff=0.01) as kube:
        api = api_client_for(kube, tmp_path)
        core = client.CoreV1Api(api)
        for i in range(20):
            core.create_namespaced_pod("default", pod(f"p{i}"))
        assert len(core.list_namespaced_pod("default").items) == 20
        api.close()


def test_request_response_level_adds_the_response_object(
    receiver: Receiver, tmp_path: Path
) -> None:
    with EmbeddedKube(audit_webhook=receiver.url, audit_level="RequestResponse") as kube:
        api = api_client_for(kube, tmp_path)
        created = Custom(api).create(cocoonset("x"))
        wait_for(lambda: len(receiver.events()) >= 1)
        api.close()
    event = receiver.events()[0]
    assert event["level"] == "RequestResponse"
    assert event["responseObject"]["metadata"]["uid"] == created["metadata"]["uid"]


def test_a_receiver_refusing_with_4xx_is_retried_too(tmp_path: Path) -> None:
    # The upstream webhook backend retries every error, not only 5xx.
    refusing = Receiver(fail_first=1, fail_status=401)
    try:
        with EmbeddedKube(audit_webhook=refusing.url, audit_backoff=0.01) as kube:
            api = api_client_for(kube, tmp_path)
            client.CoreV1Api(api).create_namespaced_pod("default", pod("p"))
            wait_for(lambda: len(refusing.events()) >= 1)
            api.close()
        assert refusing.attempts == 2
    finally:
        refusing.close()
