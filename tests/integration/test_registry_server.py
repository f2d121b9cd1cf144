"""devstack.registry: the local Distribution server, its notifications, and push_image."""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
import requests

from devstack import registry as infra_registry
from devstack.registry import (
    OCI_MANIFEST,
    DistributionServer,
    RegistryBinaryMissing,
    push_image,
    wait_until,
)
from tests.fixtures.registry import needs_registry_binary

pytestmark = pytest.mark.needs_registry


def test_push_image_pushes_a_pullable_oci_image(
    registry: DistributionServer, registry_repo: str
) -> None:
    digest = push_image(registry.url, registry_repo, "hibernate", payload=b"vm memory")

    got = requests.get(
        f"{registry.url}/v2/{registry_repo}/manifests/hibernate",
        headers={"Accept": OCI_MANIFEST},
        timeout=5,
    )
    assert got.status_code == 200
    assert got.headers["Docker-Content-Digest"] == digest
    manifest = got.json()
    assert manifest["mediaType"] == OCI_MANIFEST
    for blob in [manifest["config"], *manifest["layers"]]:
        pulled = requests.get(
            f"{registry.url}/v2/{registry_repo}/blobs/{blob['digest']}", timeout=5
        )
        assert pulled.status_code == 200
        assert len(pulled.content) == blob["size"]
    layer = requests.get(
        f"{registry.url}/v2/{registry_repo}/blobs/{manifest['layers'][0]['digest']}", timeout=5
    ).content
    assert b"vm memory" in layer


def test_push_image_digest_depends_on_the_payload_only(
    registry: DistributionServer, registry_repo: str
) -> None:
    a = push_image(registry.url, registry_repo, "a", payload=b"one")
    again = push_image(registry.url, registry_repo, "hibernate", payload=b"one")
    other = push_image(registry.url, registry_repo, "hibernate", payload=b"two")
    assert a == again  # a re-push of the same snapshot is the same manifest
    assert other != a
    tags = requests.get(f"{registry.url}/v2/{registry_repo}/tags/list", timeout=5).json()["tags"]
    assert sorted(tags) == ["a", "hibernate"]


@dataclass
class Sink:
    """A notification endpoint on 127.0.0.1 recording what the registry delivers."""

    url: str = ""
    deliveries: list[tuple[str | None, list[dict[str, Any]]]] = field(default_factory=list)

    def events(self) -> list[dict[str, Any]]:
        return [e for _auth, events in self.deliveries for e in events]


@pytest.fixture
def sink() -> Iterator[Sink]:
    rec = Sink()

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: object) -> None:
            return

        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
            rec.deliveries.append(
                (self.headers.get("Authorization"), json.loads(body).get("events", []))
            )
            self.send_response(200)
            self.send_header("Content-Length", "0")
            self.end_headers()

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(
        target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
    ).start()
    rec.url = f"http://127.0.0.1:{server.server_address[1]}/registry"
    yield rec
    server.shutdown()
    server.server_close()


def _manifest_pushed(sink: Sink) -> bool:
    return any(
        e.get("action") == "push"
        and isinstance(e.get("target"), dict)
        and e["target"].get("mediaType") == OCI_MANIFEST
        for e in sink.events()
    )


@needs_registry_binary
@pytest.mark.parametrize(
    ("ignore_blob_events", "blob_events_seen"),
    [
        pytest.param(False, True, id="default-sees-blobs"),
        pytest.param(True, False, id="workaround"),
    ],
)
def test_notifications_carry_the_bearer_token_and_honour_the_blob_switch(
    sink: Sink, ignore_blob_events: bool, blob_events_seen: bool
) -> None:
    with DistributionServer(
        notify_url=sink.url, notify_token="t0ken", ignore_blob_events=ignore_blob_events
    ) as srv:
        digest = push_image(srv.url, "snapshots/vk-ns-cs-0", "hibernate")
        assert wait_until(lambda: _manifest_pushed(sink), timeout=10)
        if not blob_events_seen:
            # Blob events would have been sent before the manifest's; give a pull a moment too.
            requests.get(f"{srv.url}/v2/snapshots/vk-ns-cs-0/manifests/hibernate", timeout=5)

    assert {auth for auth, _ in sink.deliveries} == {"Bearer t0ken"}
    manifest_events = [e for e in sink.events() if e["target"]["mediaType"] == OCI_MANIFEST]
    pushed = [e for e in manifest_events if e["action"] == "push"]
    assert pushed[0]["target"]["repository"] == "snapshots/vk-ns-cs-0"
    assert pushed[0]["target"]["tag"] == "hibernate"
    assert pushed[0]["target"]["digest"] == digest
    blob_events = [
        e for e in sink.events() if e["target"]["mediaType"] == "application/octet-stream"
    ]
    assert bool(blob_events) is blob_events_seen


@needs_registry_binary
def test_stop_leaves_no_process_and_no_directory() -> None:
    srv = DistributionServer().start()
    assert srv._proc is not None
    pid = srv._proc.pid
    workdir = srv.storage_dir.parent
    assert srv.running and workdir.is_dir()

    srv.stop()

    assert not srv.running
    assert not workdir.exists()
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)
    with pytest.raises(requests.ConnectionError):
        requests.get(f"{srv.url}/v2/", timeout=2)


def test_a_missing_binary_is_named_in_the_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(infra_registry, "find_registry_binary", lambda: None)
    with pytest.raises(RegistryBinaryMissing, match="docker-registry"):
        DistributionServer().start()
