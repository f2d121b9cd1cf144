"""`validate` asks a real kube-apiserver (a dry-run create), with and without cocoon-webhook."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner

from cocoon_hibernation.main import main as cli
from shared import admission as adm
from tests.fixtures.cocoon_webhook import CocoonWebhook

NS = "team-a"
IMAGE = "ghcr.io/cocoonstack/images/ubuntu:24.04"


@pytest.fixture
def real(real_kube_session: Any) -> Any:
    real_kube_session.reset()
    real_kube_session.ensure_namespace(NS)
    return real_kube_session


def _validate(real: Any, tmp_path: Path, spec: dict[str, Any], *extra: str) -> Any:
    path = tmp_path / "set.yaml"
    doc = {
        "apiVersion": "cocoonset.cocoonstack.io/v1",
        "kind": "CocoonSet",
        "metadata": {"name": "dev-box", "namespace": NS},
        "spec": spec,
    }
    path.write_text(yaml.safe_dump(doc), encoding="utf-8")
    kubeconfig = real.write_kubeconfig(tmp_path / "admin.kubeconfig")
    return CliRunner().invoke(cli, ["validate", str(path), "--kubeconfig", str(kubeconfig), *extra])


def test_the_server_judges_schema_and_unknown_fields(real: Any, tmp_path: Path) -> None:
    ok = _validate(real, tmp_path, {"agent": {"image": IMAGE}})
    assert ok.exit_code == 0, ok.output
    assert ok.stderr == "checked 1 CocoonSet in 1 file; by the cluster: dry-run create\n"
    bad = _validate(real, tmp_path, {"agent": {"image": IMAGE}, "hibernatPolicy": "release"})
    assert bad.exit_code == 1, bad.output
    assert 'unknown field "spec.hibernatPolicy"' in bad.stdout
    kubeconfig = str(tmp_path / "admin.kubeconfig")
    listed = subprocess.run(
        ["kubectl", "--kubeconfig", kubeconfig, "get", "cocoonsets", "-A", "-o", "name"],
        check=True,
        capture_output=True,
        text=True,
    )
    assert listed.stdout.strip() == ""  # a dry run stores nothing


@pytest.fixture
def webhook(real: Any) -> Iterator[CocoonWebhook]:
    hook = CocoonWebhook()
    try:
        hook.register(real, NS)
        yield hook
    finally:
        hook.unregister(real)
        hook.stop()


def test_the_server_answers_with_the_webhooks_verdict(
    real: Any, webhook: CocoonWebhook, tmp_path: Path
) -> None:
    spec = {"agent": {"image": IMAGE, "mode": "clone", "backend": "firecracker"}}
    result = _validate(real, tmp_path, spec)
    assert result.exit_code == 1, result.output
    assert f'admission webhook "{adm.COCOONSET_WEBHOOK}" denied the request' in result.stdout
    assert "firecracker does not support clone mode" in result.stdout
    offline = _validate(real, tmp_path, spec, "--offline")
    assert "firecracker does not support clone mode" in offline.stdout
    assert offline.stderr.endswith("search-index file version 68440069989\n")
