"""`status` reads through the standard-library reader, never importing `kubernetes`.

The official client's import was most of a `status` run (5.7-7.8 s on a busy
machine, about 5 s of it that import). These hold the reader to the official
client's answers on both backends (plain HTTP with a token; TLS with a CA file,
client token and RBAC on the real kube-apiserver), and to handing over to the
official client for what it does not cover.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from devstack.kubehttp import KubeHTTP, set_path
from shared import constants as k
from shared.clients.kube_light import LightKube
from shared.config import KubeAuth, Settings
from tests.conftest import REPO_ROOT

NS = "light"
ON_BOTH = pytest.mark.parametrize("kube_backend", ["embedded", "real"], indirect=True)


def _http(kube: Any, backend: str) -> KubeHTTP:
    if backend == "real":
        return KubeHTTP(kube.url, token=kube.tokens["admin"], ca_file=str(kube.dir / "ca.crt"))
    return KubeHTTP(kube.url)


@ON_BOTH
def test_status_runs_without_importing_the_official_client(
    kube: Any, kube_backend: str, kubeconfig: Path, tmp_path: Path
) -> None:
    api = _http(kube, kube_backend)
    api.post(
        "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}}
    )
    api.post(
        set_path(NS),
        {
            "apiVersion": k.API_VERSION,
            "kind": k.KIND,
            "metadata": {"name": "one", "namespace": NS},
            "spec": {"hibernatePolicy": "retain", "agent": {"image": "img:1"}},
        },
    )
    code = (
        "import json, sys\n"
        "from click.testing import CliRunner\n"
        "from cocoon_hibernation.main import main\n"
        "r = CliRunner().invoke(main, ['status', '-n', sys.argv[1], '-o', 'json'])\n"
        "print(json.dumps({'code': r.exit_code, 'out': r.stdout,\n"
        "                  'kubernetes': 'kubernetes' in sys.modules}))\n"
    )
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "KUBECONFIG": str(kubeconfig)}
    proc = subprocess.run(
        [sys.executable, "-c", code, NS],
        cwd=REPO_ROOT,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    answer = json.loads(proc.stdout.splitlines()[-1])
    assert answer["code"] == 0, answer
    assert [s["name"] for s in json.loads(answer["out"])["sets"]] == ["one"]
    assert answer["kubernetes"] is False


@ON_BOTH
def test_the_reader_answers_as_the_official_client(
    kube: Any, kube_backend: str, kubeconfig: Path
) -> None:
    from cocoon_hibernation._kube import KubeClient

    api = _http(kube, kube_backend)
    api.post(
        "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}}
    )
    settings = Settings(kubeconfig=str(kubeconfig))
    light = LightKube.from_settings(settings)
    assert light is not None
    official = KubeClient.from_settings(settings)
    # The same sets, nodes and events, parsed into the same types.
    assert [p for p in light.list_sets(NS)] == [p for p in official.list_sets(NS)]
    assert light.list_nodes("x=y") == official.list_nodes("x=y")
    assert light.list_events(NS, "type=Warning") == official.list_events(NS, "type=Warning")


def test_what_it_does_not_cover_goes_to_the_official_client(tmp_path: Path) -> None:
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "c", "cluster": {"server": "https://127.0.0.1:6443"}}],
        "users": [{"name": "u", "user": {"auth-provider": {"name": "gcp"}}}],
        "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u"}}],
        "current-context": "x",
    }
    path = tmp_path / "config"
    path.write_text(yaml.safe_dump(config), encoding="utf-8")
    assert LightKube.from_settings(Settings(kubeconfig=str(path))) is None
    assert LightKube.from_settings(Settings(kubeconfig=str(path), kube_context="nope")) is None
    google = Settings(kube_auth=KubeAuth.GOOGLE, kube_server="https://x")
    assert LightKube.from_settings(google) is None


@pytest.mark.parametrize("printed", ["[]", '"token"', "not json", '{"status": []}'])
def test_an_exec_plugin_answering_no_credential_goes_to_the_official_client(
    tmp_path: Path, printed: str
) -> None:
    # The official client then runs the plugin again and says what is wrong with its answer.
    plugin = tmp_path / "plugin"
    plugin.write_text(f"#!/bin/sh\ncat <<'OUT'\n{printed}\nOUT\n", encoding="utf-8")
    plugin.chmod(0o755)
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "c", "cluster": {"server": "https://127.0.0.1:6443"}}],
        "users": [{"name": "u", "user": {"exec": {"command": str(plugin), "apiVersion": "v1"}}}],
        "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u"}}],
        "current-context": "x",
    }
    path = tmp_path / "config"
    path.write_text(yaml.safe_dump(config), encoding="utf-8")
    assert LightKube.from_settings(Settings(kubeconfig=str(path))) is None
