"""With an allowlist (COCOON_NAMESPACES) the reads are granted per namespace, never cluster-wide.

Terraform renders the GKE bindings (the real CLI evaluates the submodule); the
self-hosted base drops its cluster-wide read binding with the `namespaced-read`
component. tests/e2e/test_rbac_namespaced_real.py applies the result to a real
kube-apiserver.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.conftest import REPO_ROOT
from tests.deploy._hcl import MODULE_DIR, load_dir, norm
from tests.deploy.test_kustomize import FILLED, _copy, _render
from tests.deploy.test_production import _render_rbac

K8S_DIR = REPO_ROOT / "infra" / "k8s"
READER = "cocoon-hibernation"
WRITER = "cocoon-hibernation-writer"


def _canon(doc: dict[str, Any]) -> str:
    doc = dict(doc)
    doc["subjects"] = sorted(doc["subjects"], key=lambda s: s["name"])
    return json.dumps(doc, sort_keys=True)


def test_the_module_confines_reads_to_its_allowlist() -> None:
    call = load_dir(MODULE_DIR).modules["kubernetes_rbac"]
    assert norm(call["read_namespaces"]) == norm("${var.namespaces}")


def test_an_allowlist_renders_a_read_binding_per_namespace_and_none_cluster_wide(
    tmp_path: Path,
) -> None:
    docs = _render_rbac(tmp_path, "acme", "acme-prod", ["team-a", "team-b"], ("team-a", "team-b"))
    shape = [(d["kind"], d["metadata"]["name"], d["metadata"].get("namespace")) for d in docs]
    assert shape == [
        ("RoleBinding", "acme-hibernation-functions-read", "team-a"),
        ("RoleBinding", "acme-hibernation-functions-read", "team-b"),
        ("RoleBinding", "acme-hibernation-functions", "team-a"),
        ("RoleBinding", "acme-hibernation-functions", "team-b"),
    ]
    assert [d["roleRef"]["name"] for d in docs] == [READER, READER, WRITER, WRITER]
    assert len({_canon({"subjects": d["subjects"]}) for d in docs}) == 1


def test_the_read_binding_reference_is_what_terraform_renders(tmp_path: Path) -> None:
    docs = _render_rbac(tmp_path, "cocoon", "PROJECT_ID", ["NAMESPACE"], ("NAMESPACE",))
    read = yaml.safe_load((K8S_DIR / "namespace-read-binding.yaml").read_text(encoding="utf-8"))
    write = yaml.safe_load((K8S_DIR / "namespace-binding.yaml").read_text(encoding="utf-8"))
    assert [_canon(d) for d in docs] == [_canon(read), _canon(write)]


@pytest.mark.needs_tool("kubectl")
@pytest.mark.parametrize("variant", ["knative", "deployment"])
def test_the_namespaced_read_component_drops_the_cluster_wide_read(
    tmp_path: Path, variant: str
) -> None:
    docs = _render(_copy(tmp_path, FILLED, [variant, "namespaced-read"]))
    cluster_roles = {d["roleRef"]["name"] for d in docs if d["kind"] == "ClusterRoleBinding"}
    assert READER not in cluster_roles and WRITER not in cluster_roles
    # The serve account's per-namespace reads name the same subject as its writes.
    read = yaml.safe_load(
        (K8S_DIR / "knative" / "namespace-read-binding.yaml").read_text(encoding="utf-8")
    )
    write = yaml.safe_load(
        (K8S_DIR / "knative" / "namespace-binding.yaml").read_text(encoding="utf-8")
    )
    assert read["roleRef"]["name"] == READER and read["subjects"] == write["subjects"]
    serve = [d for d in docs if d["kind"] == "ServiceAccount" and d["metadata"]["name"] == READER]
    assert serve and read["subjects"] == [
        {"kind": "ServiceAccount", "name": READER, "namespace": "cocoon-system"}
    ]


@pytest.mark.needs_tool("kubectl")
def test_without_the_component_the_reads_stay_cluster_wide(tmp_path: Path) -> None:
    docs = _render(_copy(tmp_path, FILLED, ["knative"]))
    bindings = [d for d in docs if d["kind"] == "ClusterRoleBinding"]
    assert READER in {b["roleRef"]["name"] for b in bindings}
