"""Test hooks: the request log and reset (not kube-apiserver behaviour: the harness's)."""

from __future__ import annotations

import json
import urllib.request
from typing import Any

import pytest
from kubernetes import client

from tests.conformance.helpers import Custom, cocoonset, pod

pytestmark = pytest.mark.embedded_only("the request log and reset are emulator test hooks")


def test_request_log_records_method_path_query_status_and_duration(
    kube: Any, k8s_api: client.ApiClient
) -> None:
    core = client.CoreV1Api(k8s_api)
    core.create_namespaced_pod("default", pod("p", labels={"a": "b"}))
    core.list_namespaced_pod("default", label_selector="a=b")
    log = kube.requests()
    assert [(r["method"], r["path"], r["status"]) for r in log] == [
        ("POST", "/api/v1/namespaces/default/pods", 201),
        ("GET", "/api/v1/namespaces/default/pods", 200),
    ]
    assert log[1]["query"] == "labelSelector=a%3Db"
    assert all(r["duration_ms"] >= 0 for r in log)
    kube.reset_requests()
    assert kube.requests() == []


def test_reset_drops_objects_but_keeps_the_cocoonset_crd(
    kube: Any, k8s_api: client.ApiClient
) -> None:
    core = client.CoreV1Api(k8s_api)
    core.create_namespace({"metadata": {"name": "t"}})
    Custom(k8s_api).create(cocoonset("x"))
    req = urllib.request.Request(kube.url + "/_emulator/reset", data=b"{}", method="POST")
    with urllib.request.urlopen(req) as resp:
        assert resp.status == 200
    assert Custom(k8s_api).list()["items"] == []
    assert "t" not in {n.metadata.name for n in core.list_namespace().items}
    assert "default" in {n.metadata.name for n in core.list_namespace().items}
    with urllib.request.urlopen(kube.url + "/_emulator/requests") as resp:
        assert json.loads(resp.read()) == [r for r in kube.requests()]


def test_serve_forever_serves_until_sigterm_then_exits_cleanly(tmp_path: Any) -> None:
    import signal
    import socket
    import subprocess
    import sys
    import time

    from kubernetes import config

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    kubeconfig = tmp_path / "kubeconfig"
    code = (
        "from pathlib import Path; from devstack.kubeapi import serve_forever; "
        f"serve_forever({port}, Path({str(kubeconfig)!r}), None, None)"
    )
    proc = subprocess.Popen(
        [sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    try:
        deadline = time.monotonic() + 30
        while not kubeconfig.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        configuration = client.Configuration()
        config.load_kube_config(config_file=str(kubeconfig), client_configuration=configuration)
        with client.ApiClient(configuration) as api:
            assert client.CoreV1Api(api).read_namespace("default").metadata.name == "default"
            assert configuration.host == f"http://127.0.0.1:{port}"
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=20) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
