"""`serve`: every target in one process, routed by path, with functions-framework's own apps.

Driven through the WSGI test client with the real CloudEvent encoders. The
requests here are the ones that need no cluster: health, unknown paths,
unauthenticated webhooks (ingest answers 401 before parsing), a body that is
not a CloudEvent (functions-framework answers 400) and CloudEvents of types a
target drops without any API or registry call (acknowledged).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from click.testing import CliRunner
from cloudevents.http import CloudEvent, to_binary, to_structured

from functions import process
from functions.serve import create_app

ENV = {
    "COCOON_INGEST_TOKEN": "serve-test-registry-token-0123456789",
    "COCOON_AUDIT_TOKEN": "serve-test-audit-token-0123456789abc",
    "COCOON_WAKE_TOKEN": "serve-test-wake-token-0123456789abcd",
    "COCOON_SWEEP_TOKEN": "serve-test-sweep-token-0123456789abc",
    "COCOON_REGISTRY_BASE": "127.0.0.1:9/snapshots",
    "COCOON_REGISTRY_INSECURE": "true",
    "KUBECONFIG": "/nonexistent/kubeconfig",
    "COCOON_LOG_FORMAT": "text",
}


@pytest.fixture
def client(monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    for key, value in ENV.items():
        monkeypatch.setenv(key, value)
    process.reset()
    app = create_app()
    yield app.test_client()
    # The targets cache settings per process: leave none of this test's behind.
    process.reset()


# The credential each route's everyday caller holds (functions.doors).
ROUTE_TOKENS = {
    "release": ENV["COCOON_AUDIT_TOKEN"],
    "wake": ENV["COCOON_WAKE_TOKEN"],
    "sweep": ENV["COCOON_SWEEP_TOKEN"],
}


def _auth(target: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {ROUTE_TOKENS[target]}"}


def _event(ce_type: str, data: dict[str, Any]) -> CloudEvent:
    return CloudEvent({"type": ce_type, "source": "//tests/serve", "id": "e-1"}, data)


def test_healthz(client: Any) -> None:
    resp = client.get("/healthz")
    assert resp.status_code == 200
    assert resp.data == b"ok"


def test_unknown_path_is_404(client: Any) -> None:
    assert client.post("/nope", data=b"{}").status_code == 404
    assert client.get("/").status_code == 404


@pytest.mark.parametrize("path", ["/registry", "/kubernetes/audit"])
def test_ingest_paths_reach_ingest_which_wants_the_token(client: Any, path: str) -> None:
    resp = client.post(path, data=b'{"events": []}', content_type="application/json")
    assert resp.status_code == 401


def test_registry_webhook_with_token_and_irrelevant_event_is_acknowledged(client: Any) -> None:
    body = {"events": [{"action": "pull", "target": {"repository": "x/y", "tag": "latest"}}]}
    resp = client.post(
        "/registry",
        json=body,
        headers={"Authorization": f"Bearer {ENV['COCOON_INGEST_TOKEN']}"},
    )
    # Any 2xx: the registry counts it delivered and moves on (a non-2xx stalls it forever).
    assert 200 <= resp.status_code < 300


@pytest.mark.parametrize("target", ["release", "wake", "sweep"])
def test_a_non_cloudevent_body_is_rejected_by_the_framework(client: Any, target: str) -> None:
    resp = client.post(f"/{target}", json={"hello": "world"}, headers=_auth(target))
    assert resp.status_code == 400


@pytest.mark.parametrize("encode", [to_binary, to_structured], ids=["binary", "structured"])
@pytest.mark.parametrize("target", ["release", "wake"])
def test_cloudevents_of_an_unknown_type_are_acknowledged(
    client: Any, target: str, encode: Any
) -> None:
    headers, body = encode(_event("com.example.unrelated", {"x": 1}))
    resp = client.post(f"/{target}", headers={**headers, **_auth(target)}, data=body)
    assert resp.status_code == 200


def test_serve_refuses_a_bad_environment_in_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    from cocoon_hibernation.cmd_serve import command

    monkeypatch.setenv("COCOON_REGISTRY_INSECURE", "perhaps")
    result = CliRunner().invoke(command, ["--port", "18080"])
    assert result.exit_code == 2  # unreadable input, as for every command
    assert "COCOON_REGISTRY_INSECURE" in result.output
    assert "Traceback" not in result.output


def test_serve_refuses_a_short_token_in_one_line_without_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from cocoon_hibernation.cmd_serve import command

    monkeypatch.setenv("COCOON_WAKE_TOKEN", "guessable-wake")
    result = CliRunner().invoke(command, ["--port", "18080"])
    assert result.exit_code == 2
    assert "COCOON_WAKE_TOKEN is 14 characters, under the minimum 32" in result.output
    assert "guessable-wake" not in result.output
    assert "Traceback" not in result.output


def test_serve_runs_as_a_server_process_and_stops_on_sigterm(tmp_path: Any) -> None:
    import os
    import signal
    import subprocess
    import sys
    import time
    from pathlib import Path

    import requests

    from devstack.processes import free_port

    port = free_port()
    cli = str(Path(sys.executable).parent / "cocoon-hibernation")
    proc = subprocess.Popen(
        [cli, "serve", "--host", "127.0.0.1"],
        env={**os.environ, **ENV, "PORT": str(port)},  # the port comes from $PORT
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 30
        health = None
        while time.monotonic() < deadline:
            try:
                health = requests.get(f"http://127.0.0.1:{port}/healthz", timeout=1)
                break
            except requests.ConnectionError:
                time.sleep(0.1)
        assert health is not None and health.status_code == 200
        headers, body = to_binary(_event("com.example.unrelated", {}))
        resp = requests.post(
            f"http://127.0.0.1:{port}/wake",
            headers={**headers, **_auth("wake")},
            data=body,
            timeout=10,
        )
        assert resp.status_code == 200
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=30)


def test_an_event_source_presents_its_token_as_the_cocoonauth_extension(
    client: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    # A Knative source sets no header; its ceOverrides extension `cocoonauth` travels
    # as `ce-cocoonauth` in binary mode (infra/k8s/knative/sources.yaml).
    event = CloudEvent(
        {
            "type": "com.example.unrelated",
            "source": "//tests/serve",
            "id": "e-2",
            "cocoonauth": ENV["COCOON_AUDIT_TOKEN"],
        },
        {"x": 1},
    )
    headers, body = to_binary(event)
    assert client.post("/release", headers=headers, data=body).status_code == 200
    wrong = {**headers, "ce-cocoonauth": ENV["COCOON_SWEEP_TOKEN"]}  # another door's
    assert client.post("/release", headers=wrong, data=body).status_code == 401
    out = capsys.readouterr()
    assert ENV["COCOON_AUDIT_TOKEN"] not in out.out + out.err


def _kubeconfig(tmp_path: Any) -> str:
    path = tmp_path / "kubeconfig"
    path.write_text(
        "apiVersion: v1\nkind: Config\ncurrent-context: c\n"
        "clusters: [{name: c, cluster: {server: 'http://127.0.0.1:9'}}]\n"
        "users: [{name: u, user: {token: t}}]\n"
        "contexts: [{name: c, context: {cluster: c, user: u}}]\n",
        encoding="utf-8",
    )
    return str(path)


def test_readyz_is_ok_when_the_configuration_can_work(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Any
) -> None:
    for key, value in {**ENV, "KUBECONFIG": _kubeconfig(tmp_path)}.items():
        monkeypatch.setenv(key, value)
    process.reset()
    client = create_app().test_client()
    ready = client.get("/readyz")
    assert (ready.status_code, ready.data) == (200, b"ok")
    process.reset()


def test_readyz_fails_with_each_reason_while_healthz_stays_live(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Any
) -> None:
    # It answered /healthz 200 with no registry, no token and no credentials: a
    # Service sent it traffic that every request then failed.
    doors = ("COCOON_AUDIT_TOKEN", "COCOON_WAKE_TOKEN", "COCOON_WAKE_TOKENS", "COCOON_SWEEP_TOKEN")
    for key in ("COCOON_REGISTRY_BASE", "COCOON_INGEST_TOKEN", "KUBERNETES_SERVICE_HOST", *doors):
        monkeypatch.delenv(key, raising=False)
    monkeypatch.setenv("KUBECONFIG", "")
    monkeypatch.setenv("HOME", str(tmp_path))  # no ~/.kube/config either
    process.reset()
    client = create_app().test_client()
    assert client.get("/healthz").status_code == 200  # liveness: the process serves
    ready = client.get("/readyz")
    assert ready.status_code == 503
    lines = ready.data.decode().splitlines()
    assert [line.split(":")[0] for line in lines] == [
        "COCOON_REGISTRY_BASE is not set",
        "COCOON_INGEST_TOKEN is not set",
        # Each CloudEvent route without a credential for its door refuses everything.
        "COCOON_INGEST_TOKEN or COCOON_AUDIT_TOKEN is not set",
        "COCOON_WAKE_TOKEN or COCOON_WAKE_TOKENS or COCOON_AUDIT_TOKEN is not set",
        "COCOON_SWEEP_TOKEN is not set",
        "no Kubernetes credentials",
    ]
    assert "not running in a cluster" in lines[-1]
    process.reset()
