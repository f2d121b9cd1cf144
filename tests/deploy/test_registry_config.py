"""The shipped Distribution config, run by a real registry.

infra/registry-config/config.yml's `notifications` section is loaded by a
real CNCF Distribution server (Debian docker-registry) whose endpoint is a
capture server on 127.0.0.1. A snapshot push must reach `/registry` with the
bearer header; blob pushes and pulls must not (the media-type workaround of
docs/design.md#ignore-actions is what makes `ignore.actions` work on 2.8).
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
import requests
import yaml

from devstack.registry import OCI_MANIFEST, DistributionServer, push_image
from tests.conftest import REPO_ROOT
from tests.fixtures.registry import require_registry_binary

pytestmark = pytest.mark.needs_registry

REGISTRY_CONFIG = REPO_ROOT / "infra" / "registry-config" / "config.yml"
TOKEN = "s3cret-ingest-token"


@dataclass
class Delivery:
    path: str
    headers: dict[str, str]
    body: dict[str, Any]


class Capture:
    """An HTTP endpoint that records every notification and answers 200."""

    def __init__(self) -> None:
        self.deliveries: list[Delivery] = []
        self._lock = threading.Lock()
        capture = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length", "0"))
                body = json.loads(self.rfile.read(length) or b"{}")
                with capture._lock:
                    capture.deliveries.append(Delivery(self.path, dict(self.headers), body))
                self.send_response(200)
                self.end_headers()

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    @property
    def url(self) -> str:
        host, port = self.server.server_address[:2]
        return f"http://{host!s}:{port}"

    def events(self) -> list[dict[str, Any]]:
        with self._lock:
            return [e for d in self.deliveries for e in d.body.get("events", [])]

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@dataclass
class ShippedConfigRegistry(DistributionServer):
    """A DistributionServer running the shipped config (placeholders filled in).

    Only storage and the listen address come from the test harness (a temp dir,
    a free loopback port); `notifications` is the file's, untouched.
    """

    ingest_url: str = ""

    def config(self) -> dict[str, Any]:
        harness = super().config()
        text = REGISTRY_CONFIG.read_text(encoding="utf-8")
        shipped: dict[str, Any] = yaml.safe_load(
            text.replace("INGEST_URL", self.ingest_url).replace("INGEST_TOKEN", TOKEN)
        )
        shipped["storage"]["filesystem"] = harness["storage"]["filesystem"]
        shipped["http"] = harness["http"]
        return shipped


@pytest.fixture
def capture() -> Iterator[Capture]:
    cap = Capture()
    yield cap
    cap.close()


def _wait_for_tag(capture: Capture, tag: str, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if any(e.get("target", {}).get("tag") == tag for e in capture.events()):
            return
        time.sleep(0.05)
    raise AssertionError(f"no notification for tag {tag!r}: got {capture.events()}")


def test_shipped_config_delivers_manifest_pushes_only(capture: Capture) -> None:
    require_registry_binary()
    with ShippedConfigRegistry(ingest_url=capture.url) as registry:
        push_image(registry.url, "snapshots/vk-agents-demo-0", "hibernate")
        pulled = requests.get(
            f"{registry.url}/v2/snapshots/vk-agents-demo-0/manifests/hibernate",
            headers={"Accept": OCI_MANIFEST},
            timeout=10,
        )
        assert pulled.status_code == 200
        # Distribution delivers in order on one queue: once this later push
        # arrives, everything before it has been delivered or dropped.
        push_image(registry.url, "snapshots/vk-agents-marker-0", "sentinel")
        _wait_for_tag(capture, "sentinel")

    assert capture.deliveries
    for delivery in capture.deliveries:
        assert delivery.path == "/registry"
        assert delivery.headers["Authorization"] == f"Bearer {TOKEN}"
        assert delivery.headers["Content-Type"].startswith(
            "application/vnd.docker.distribution.events."
        )
    events = capture.events()
    assert {e["action"] for e in events} == {"push"}, "pulls must be filtered"
    assert all(e["target"]["mediaType"] != "application/octet-stream" for e in events)
    assert sorted((e["target"]["repository"], e["target"]["tag"]) for e in events) == [
        ("snapshots/vk-agents-demo-0", "hibernate"),
        ("snapshots/vk-agents-marker-0", "sentinel"),
    ]
