"""deploy-check finds cocoon-webhook and proves the restore pod's admission, on the real
kube-apiserver (the test webhook of tests/fixtures/cocoon_webhook.py, registered as
cocoon-webhook registers itself).

Real-only: the embedded API (devstack/kubeapi) neither calls admission webhooks nor
serves admissionregistration.k8s.io or impersonation.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from cocoon_hibernation.main import main as cli
from devstack.realkube import FUNCTION_USERS, PROJECT_ID, REPO_ROOT
from shared import admission as adm
from tests.fixtures.cocoon_webhook import CocoonWebhook

NS = "team-a"
K8S = REPO_ROOT / "infra" / "k8s"


def _manifest(name: str, namespace: str = "") -> str:
    text = (K8S / name).read_text().replace("PROJECT_ID", PROJECT_ID)
    return text.replace("NAMESPACE", namespace) if namespace else text


@pytest.fixture
def real(real_kube_session: Any) -> Any:
    real_kube_session.reset()
    real_kube_session.apply_manifest(_manifest("rbac.yaml"))
    real_kube_session.apply_manifest(_manifest("gke-binding.yaml"))
    real_kube_session.ensure_namespace(NS)
    real_kube_session.apply_manifest(_manifest("namespace-binding.yaml", NS))
    return real_kube_session


@pytest.fixture
def webhook(real: Any) -> Iterator[CocoonWebhook]:
    hook = CocoonWebhook()
    try:
        yield hook
    finally:
        hook.unregister(real)
        hook.stop()


def _deploy_check(real: Any, tmp_path: Path) -> tuple[int, dict[str, list[dict[str, str]]]]:
    tfvars = tmp_path / "t.tfvars.json"
    tfvars.write_text(
        json.dumps(
            {
                "project_id": PROJECT_ID,
                "region": "europe-west10",
                "gke_cluster": {"name": "agents", "location": "europe-west10-a"},
                "artifact_registry": {"location": "europe-west10", "repository_id": "snapshots"},
                "namespaces": [NS],
            }
        )
    )
    admin = real.write_kubeconfig(tmp_path / "admin.kubeconfig")
    # No gcloud: only the Kubernetes checks run; the cloud ones are "not checked",
    # which this test accepts (it is about admission, not the cloud checks).
    env = {"PATH": str(tmp_path)}
    args = ["deploy-check", "--var-file", str(tfvars), "--kubeconfig", str(admin)]
    result = CliRunner(env=env).invoke(cli, [*args, "--allow-unchecked", "-o", "json"])
    found: dict[str, list[dict[str, str]]] = {}
    for f in json.loads(result.stdout):
        found.setdefault(f["check"], []).append(f)
    return result.exit_code, found


def test_without_the_webhook_it_says_so_in_one_line(real: Any, tmp_path: Path) -> None:
    code, found = _deploy_check(real, tmp_path)
    (line,) = found["cocoon-webhook"]
    assert line["level"] == "ok"
    assert "not installed" in line["message"]
    assert code == 0, found


def test_default_pod_creators_fail_with_the_exact_fix_before_any_wake(
    real: Any, webhook: CocoonWebhook, tmp_path: Path
) -> None:
    webhook.register(real, NS)
    before = len(webhook.seen("/mutate"))
    code, found = _deploy_check(real, tmp_path)
    assert code == 1
    (line,) = found["cocoon-webhook"]
    assert line["level"] == "FAIL"
    users = sorted(FUNCTION_USERS.values())
    assert f"POD_CREATORS={adm.DEFAULT_POD_CREATORS},{','.join(users)}" in line["message"]
    assert FUNCTION_USERS["wake"] in line["message"]
    # Proven by the server: one dry-run create per function, as that function.
    probes = webhook.seen("/mutate")[before:]
    assert sorted(r["userInfo"]["username"] for r in probes) == users
    assert all(r["dryRun"] for r in probes)
    assert real.request("GET", f"/api/v1/namespaces/{NS}/pods")[1].count(b'"name"') == 0


def test_sets_breaking_the_webhook_rules_fail_by_name(
    real: Any, webhook: CocoonWebhook, tmp_path: Path
) -> None:
    bad = {
        "apiVersion": "cocoonset.cocoonstack.io/v1",
        "kind": "CocoonSet",
        "metadata": {"name": "old-set"},
        "spec": {"agent": {"image": "registry.local:5000/agent:1"}},
    }
    # Created before the webhook, as a set that predates its rules would be.
    status, body = real.request(
        "POST", f"/apis/cocoonset.cocoonstack.io/v1/namespaces/{NS}/cocoonsets", bad
    )
    assert status == 201, body
    webhook.pod_creators = adm.parse_creators(
        ",".join([adm.DEFAULT_POD_CREATORS, *FUNCTION_USERS.values()])
    )
    webhook.register(real, NS)
    code, found = _deploy_check(real, tmp_path)
    assert code == 1
    (line,) = found["cocoon-webhook sets"]
    assert line["level"] == "FAIL"
    assert f"{NS}/old-set" in line["message"]
    assert 'spec.agent.image "registry.local:5000/agent:1" must be repo[:tag]' in line["message"]


def test_documented_pod_creators_pass(real: Any, webhook: CocoonWebhook, tmp_path: Path) -> None:
    webhook.pod_creators = adm.parse_creators(
        ",".join([adm.DEFAULT_POD_CREATORS, *FUNCTION_USERS.values()])
    )
    webhook.register(real, NS)
    code, found = _deploy_check(real, tmp_path)
    (line,) = found["cocoon-webhook"]
    assert line["level"] == "ok", line
    assert "admits the restore pod of every function" in line["message"]
    assert [f["level"] for f in found["cocoon-webhook sets"]] == ["ok"]
    assert code == 0, found
