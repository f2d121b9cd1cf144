"""The deploy side of cocoon-webhook's POD_CREATORS: Terraform's outputs, the in-cluster
username, and the documented kustomize patch, held to each other and to shared.admission."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from shared import admission as adm
from tests.conftest import REPO_ROOT

DOC = REPO_ROOT / "docs" / "cocoon-webhook.md"
OUTPUTS = REPO_ROOT / "terraform" / "modules" / "cocoon-hibernation" / "outputs.tf"
SERVE_SA = "system:serviceaccount:cocoon-system:cocoon-hibernation"


def test_terraform_outputs_the_functions_usernames_and_the_whole_value() -> None:
    text = OUTPUTS.read_text()
    pod_creators = re.search(r'output "pod_creators" \{.*?\n\}', text, re.S)
    whole = re.search(r'output "cocoon_webhook_pod_creators" \{.*?\n\}', text, re.S)
    assert pod_creators and whole
    # Every runtime account (each function reconciles, so each may create the pod).
    assert "for sa in google_service_account.runtime : sa.email" in pod_creators.group(0)
    assert f'["{adm.DEFAULT_POD_CREATORS}"]' in whole.group(0)
    assert 'join(","' in whole.group(0)


def test_the_in_cluster_username_is_the_serve_service_account() -> None:
    docs = list(yaml.safe_load_all((REPO_ROOT / "infra/k8s/serve-account.yaml").read_text()))
    (sa,) = [d for d in docs if d and d["kind"] == "ServiceAccount"]
    meta = sa["metadata"]
    assert f"system:serviceaccount:{meta['namespace']}:{meta['name']}" == SERVE_SA
    assert SERVE_SA in (REPO_ROOT / "infra/k8s/README.md").read_text()
    assert SERVE_SA in DOC.read_text()


@pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl is not installed")
def test_the_documented_kustomize_patch_sets_pod_creators(tmp_path: Path) -> None:
    (block,) = re.findall(r"```yaml\n(.*?)```", DOC.read_text(), re.S)
    overlay = yaml.safe_load(block)
    # The remote base needs the network: a Deployment of the same shape stands in (name,
    # namespace, one container with an env list, as cocoon-webhook's config/manager has).
    overlay["resources"] = ["deployment.yaml"]
    (tmp_path / "kustomization.yaml").write_text(yaml.safe_dump(overlay))
    (tmp_path / "deployment.yaml").write_text(
        yaml.safe_dump(
            {
                "apiVersion": "apps/v1",
                "kind": "Deployment",
                "metadata": {"name": adm.WEBHOOK_DEPLOYMENT, "namespace": adm.WEBHOOK_NAMESPACE},
                "spec": {
                    "selector": {"matchLabels": {"app": "w"}},
                    "template": {
                        "metadata": {"labels": {"app": "w"}},
                        "spec": {
                            "containers": [
                                {
                                    "name": "webhook",
                                    "image": "w",
                                    "env": [{"name": "LISTEN_ADDR", "value": ":8443"}],
                                }
                            ]
                        },
                    },
                },
            }
        )
    )
    out = subprocess.run(
        ["kubectl", "kustomize", str(tmp_path)], check=True, capture_output=True, text=True
    ).stdout
    env = yaml.safe_load(out)["spec"]["template"]["spec"]["containers"][0]["env"]
    value = {e["name"]: e["value"] for e in env}["POD_CREATORS"]
    assert adm.parse_creators(value) == [adm.DEFAULT_POD_CREATORS, SERVE_SA]
