"""deploy-check's RBAC check against a real kube-apiserver (with RBAC on).

The embedded API does not serve rbac.authorization.k8s.io, so this starts
etcd and kube-apiserver from devstack/scripts/build-control-plane.sh's cache,
applies the real binding manifests of infra/k8s, and runs the command.
Skipped when the control plane has not been built (the script's cache is
empty), except under CI=true, where the script builds it.
"""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner

from cocoon_hibernation.main import main as cli
from devstack.processes import die_with_parent, free_port
from tests.conftest import REPO_ROOT

SCRIPT = REPO_ROOT / "devstack" / "scripts" / "build-control-plane.sh"
TOKEN = "deploy-check-admin-token"


def _control_plane() -> Path:
    cache = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "cocoon-hibernation"
    found = sorted(cache.glob("control-plane/*/bin/kube-apiserver"))
    if found:
        return found[-1].parent
    if os.environ.get("CI", "").lower() not in {"1", "true", "yes"}:
        pytest.skip("no kube-apiserver built (devstack/scripts/build-control-plane.sh)")
    out = subprocess.run(
        ["bash", str(SCRIPT)], check=True, capture_output=True, text=True, timeout=3600
    )
    return Path(out.stdout.strip().splitlines()[-1]) / "bin"


@pytest.fixture(scope="module")
def apiserver(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A kubeconfig for a fresh kube-apiserver with RBAC, as an admin."""
    bindir = _control_plane()
    work = tmp_path_factory.mktemp("cp")
    etcd_port, etcd_peer, api_port = free_port(), free_port(), free_port()
    key = work / "sa.key"
    subprocess.run(["openssl", "genrsa", "-out", str(key), "2048"], check=True, capture_output=True)
    (work / "tokens.csv").write_text(f'{TOKEN},admin,admin,"system:masters"\n', "utf-8")
    procs = [
        subprocess.Popen(
            [
                str(bindir / "etcd"),
                f"--data-dir={work / 'etcd'}",
                f"--listen-client-urls=http://127.0.0.1:{etcd_port}",
                f"--advertise-client-urls=http://127.0.0.1:{etcd_port}",
                f"--listen-peer-urls=http://127.0.0.1:{etcd_peer}",
                f"--initial-advertise-peer-urls=http://127.0.0.1:{etcd_peer}",
                f"--initial-cluster=default=http://127.0.0.1:{etcd_peer}",
            ],
            stdout=subprocess.DEVNULL,
            stderr=(work / "etcd.log").open("w"),
            preexec_fn=die_with_parent,  # noqa: PLW1509 - only a prctl call, no locks
        )
    ]
    procs.append(
        subprocess.Popen(
            [
                str(bindir / "kube-apiserver"),
                f"--etcd-servers=http://127.0.0.1:{etcd_port}",
                f"--secure-port={api_port}",
                "--bind-address=127.0.0.1",
                f"--cert-dir={work / 'certs'}",
                f"--token-auth-file={work / 'tokens.csv'}",
                "--authorization-mode=RBAC",
                f"--service-account-key-file={key}",
                f"--service-account-signing-key-file={key}",
                "--service-account-issuer=https://kubernetes.default.svc",
                "--service-cluster-ip-range=10.0.0.0/24",
            ],
            stdout=subprocess.DEVNULL,
            stderr=(work / "apiserver.log").open("w"),
            preexec_fn=die_with_parent,  # noqa: PLW1509 - only a prctl call, no locks
        )
    )
    kubeconfig = work / "kubeconfig"
    kubeconfig.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [
                    {
                        "name": "cp",
                        "cluster": {
                            "server": f"https://127.0.0.1:{api_port}",
                            # kube-apiserver's self-signed serving certificate.
                            "certificate-authority": str(work / "certs" / "apiserver.crt"),
                        },
                    }
                ],
                "users": [{"name": "admin", "user": {"token": TOKEN}}],
                "contexts": [{"name": "cp", "context": {"cluster": "cp", "user": "admin"}}],
                "current-context": "cp",
            }
        ),
        encoding="utf-8",
    )
    try:
        deadline = time.monotonic() + 180
        while True:
            ready = subprocess.run(
                ["kubectl", "--kubeconfig", str(kubeconfig), "get", "--raw", "/readyz"],
                check=False,
                capture_output=True,
                text=True,
            )
            if ready.returncode == 0:
                break
            if time.monotonic() > deadline:
                log = (work / "apiserver.log").read_text("utf-8")[-2000:]
                pytest.fail(f"kube-apiserver not ready: {ready.stderr}\n{log}")
            time.sleep(1)
        yield kubeconfig
    finally:
        for p in reversed(procs):
            p.terminate()
            p.wait(timeout=30)


def _apply(kubeconfig: Path, manifest: str, **subst: str) -> None:
    text = (REPO_ROOT / "infra" / "k8s" / manifest).read_text(encoding="utf-8")
    for key, value in subst.items():
        text = text.replace(key, value)
    subprocess.run(
        ["kubectl", "--kubeconfig", str(kubeconfig), "apply", "-f", "-"],
        input=text,
        check=True,
        capture_output=True,
        text=True,
    )


def _check(kubeconfig: Path, tmp_path: Path, namespaces: list[str]) -> tuple[int, Any]:
    import json

    tfvars = tmp_path / "t.tfvars.json"
    tfvars.write_text(
        json.dumps(
            {
                "project_id": "acme-prod",
                "region": "europe-west10",
                "gke_cluster": {"name": "agents", "location": "europe-west10-a"},
                "artifact_registry": {"location": "europe-west10", "repository_id": "snapshots"},
                "namespaces": namespaces,
            }
        ),
        encoding="utf-8",
    )
    # No gcloud: only the Kubernetes checks run; the cloud ones are a `skip`, accepted here.
    env = {"PATH": str(tmp_path)}
    args = ["deploy-check", "--var-file", str(tfvars), "--kubeconfig", str(kubeconfig)]
    result = CliRunner(env=env).invoke(cli, [*args, "-o", "json", "--allow-unchecked"])
    found = {f["check"]: f["level"] for f in json.loads(result.stdout)} if result.stdout else {}
    return result.exit_code, found


def test_rbac_read_from_a_real_apiserver(apiserver: Path, tmp_path: Path) -> None:
    for ns in ("agents", "team-b"):
        subprocess.run(
            ["kubectl", "--kubeconfig", str(apiserver), "create", "namespace", ns],
            check=True,
            capture_output=True,
        )
    _apply(apiserver, "rbac.yaml")

    code, found = _check(apiserver, tmp_path, ["agents", "team-b"])
    assert code == 1
    assert found["RBAC cluster reads"] == "FAIL"
    assert found["RBAC writes in agents"] == "FAIL"

    _apply(apiserver, "gke-binding.yaml", PROJECT_ID="acme-prod")
    _apply(apiserver, "namespace-binding.yaml", PROJECT_ID="acme-prod", NAMESPACE="agents")
    code, found = _check(apiserver, tmp_path, ["agents", "team-b"])
    assert found["RBAC cluster reads"] == "ok"
    assert found["RBAC writes in agents"] == "ok"
    assert found["RBAC writes in team-b"] == "FAIL"
    assert code == 1

    _apply(apiserver, "namespace-binding.yaml", PROJECT_ID="acme-prod", NAMESPACE="team-b")
    code, found = _check(apiserver, tmp_path, ["agents", "team-b"])
    assert found["RBAC writes in team-b"] == "ok"
    assert code == 0, found
