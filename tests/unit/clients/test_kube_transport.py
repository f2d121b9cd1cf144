"""KubeClient's calls go through the official ApiClient: its auth hook, paths and queries."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, HTTPServer
from typing import Any, ClassVar

import kubernetes.client as k8s
import pytest

from shared.clients.kube import KubeClient
from shared.names import SetRef


class _Recorder(BaseHTTPRequestHandler):
    seen: ClassVar[list[tuple[str, str, str]]] = []

    def do_GET(self) -> None:
        _Recorder.seen.append(("GET", self.path, self.headers.get("Authorization") or ""))
        body = json.dumps({"kind": "PodList", "metadata": {}, "items": []}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def server() -> Iterator[str]:
    httpd = HTTPServer(("127.0.0.1", 0), _Recorder)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    _Recorder.seen = []
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()


def test_the_token_hook_runs_and_queries_use_the_wire_names(server: str) -> None:
    conf = k8s.Configuration()
    conf.host = server
    conf.api_key["BearerToken"] = ""
    conf.api_key_prefix["BearerToken"] = "Bearer"

    def refresh(c: Any) -> None:  # as from_google's hook refreshes the Google token
        c.api_key["BearerToken"] = "fresh"

    conf.refresh_api_key_hook = refresh  # type: ignore[assignment]
    kube = KubeClient(k8s.ApiClient(conf))

    assert kube.list_pods(SetRef("team-a", "agent"), not_older_than="42") == []

    [(method, path, auth)] = _Recorder.seen
    assert (method, auth) == ("GET", "Bearer fresh")
    assert path == (
        "/api/v1/namespaces/team-a/pods?labelSelector=cocoonset.cocoonstack.io/name%3Dagent"
        "&resourceVersion=42&resourceVersionMatch=NotOlderThan"
    )
