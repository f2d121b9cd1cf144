"""A real Distribution registry notifies the real `ingest` app over HTTP on 127.0.0.1.

The registry (Debian `docker-registry` 2.8.2) is configured the way a
deployment would be: its notification endpoint is `ingest`'s `/registry`
route with `Authorization: [Bearer <token>]`, and blob events are NOT ignored,
so the app sees every blob push. `ingest` runs as the functions-framework
Flask app served by werkzeug in a thread (so the recording dispatch stays
in-process); the dispatch is the only stand-in (`functions.dispatch.run`
needs a cluster).
"""

from __future__ import annotations

import contextlib
import http.client
import json
import threading
import uuid
from collections.abc import Iterator
from typing import Any

import functions_framework
import pytest
from werkzeug.serving import make_server

from devstack.registry import DistributionServer, push_image, wait_until
from functions import ingest, process
from shared.triggers import SnapshotPushed, Source
from tests.conftest import REPO_ROOT
from tests.fixtures.ingest import TOKEN, Recorder, auth
from tests.fixtures.registry import require_registry_binary


@pytest.fixture
def ingest_server(ingest_env: dict[str, str], recorder: Recorder) -> Iterator[str]:
    """`ingest` on a free 127.0.0.1 port; yields its base URL."""
    app = functions_framework.create_app(target="ingest", source=str(REPO_ROOT / "main.py"))
    server = make_server("127.0.0.1", 0, app, threaded=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_port}"
    finally:
        server.shutdown()
        thread.join(timeout=10)


def _decisions(out: str) -> list[dict[str, Any]]:
    records = []
    for line in out.splitlines():
        try:
            record = json.loads(line)
        except ValueError:
            continue
        if isinstance(record, dict) and record.get("decision"):
            records.append(record)
    return records


def test_hibernate_push_becomes_exactly_one_trigger(
    ingest_server: str,
    recorder: Recorder,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    require_registry_binary()
    vm = f"vk-t{uuid.uuid4().hex[:8]}-agent-0"
    repository = f"cocoon/{vm}"
    with DistributionServer(notify_url=f"{ingest_server}/registry", notify_token=TOKEN) as registry:
        # The base names the registry's real address, as a deployment's would.
        monkeypatch.setenv("COCOON_REGISTRY_BASE", f"{registry.host}/cocoon")
        process.reset()

        digest = push_image(registry.url, repository, "hibernate")
        # Same image again as :latest (blobs exist: only the manifest is new), then
        # a different image as :latest, whose new blobs are notified as blob pushes.
        push_image(registry.url, repository, "latest")
        push_image(registry.url, repository, "latest", payload=b"another layer\n")

        seen: list[dict[str, Any]] = []

        def delivered() -> bool:
            seen.extend(_decisions(capsys.readouterr().out))
            latest = [r for r in seen if r.get("reason") == "tag-not-hibernate"]
            return len(latest) >= 2 and len(recorder.calls) >= 1

        assert wait_until(delivered, timeout=30), f"notifications not delivered: {seen}"

    assert recorder.calls == [
        ([SnapshotPushed(repository, "hibernate", digest, Source.DISTRIBUTION, vm)], "ingest")
    ]
    reasons = [r["reason"] for r in seen if r["decision"] == "dropped"]
    assert "blob-push" in reasons  # the registry did notify blob pushes...
    assert set(reasons) <= {"blob-push", "tag-not-hibernate"}  # ...and they were all dropped
    accepted = [r for r in seen if r["decision"] == "accepted"]
    assert len(accepted) == 1
    assert accepted[0]["vm"] == vm


def test_oversized_chunked_body_is_cut_off_while_reading(ingest_server: str) -> None:
    """No Content-Length to check up front: the limit holds while the body streams in."""
    host, port = ingest_server.removeprefix("http://").split(":")
    conn = http.client.HTTPConnection(host, int(port), timeout=10)
    chunk = b" " * 65536
    chunks = (chunk for _ in range(ingest.MAX_BODY // len(chunk) + 8))
    # The server may close before the client has sent everything.
    with contextlib.suppress(BrokenPipeError, ConnectionResetError):
        conn.request(
            "POST",
            "/registry",
            body=chunks,
            headers={**auth(), "Content-Type": "application/json"},
            encode_chunked=True,
        )
    response = conn.getresponse()
    assert response.status == 413
    conn.close()


def test_unauthenticated_large_body_is_refused_unread(ingest_server: str) -> None:
    host, port = ingest_server.removeprefix("http://").split(":")
    conn = http.client.HTTPConnection(host, int(port), timeout=10)
    # Declares 100 MiB and sends only headers: a server that read the body would hang.
    conn.putrequest("POST", "/registry")
    conn.putheader("Content-Length", str(100 << 20))
    conn.putheader("Authorization", "Bearer wrong")
    conn.endheaders()
    response = conn.getresponse()
    assert response.status == 401
    assert response.getheader("WWW-Authenticate") == "Bearer"
    conn.close()
