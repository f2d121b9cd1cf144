"""The self-hosted base, rendered by the real `kubectl kustomize`: one file to fill.

A user fills infra/k8s/config.yaml and runs `kubectl apply -k infra/k8s`. Here a
copy of infra/k8s gets a filled config.yaml; the rendering must carry every value
where it belongs and leave nothing that looks like a placeholder. The config
itself is never applied (local-config).
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from shared.config import Settings
from tests.conftest import REPO_ROOT

pytestmark = pytest.mark.needs_tool("kubectl")

K8S_DIR = REPO_ROOT / "infra" / "k8s"
# Anything a user is meant to replace, in any of the spellings the manifests use.
PLACEHOLDER_LIKE = re.compile(
    r"REPLACE_ME|CHANGE_?ME|PLACEHOLDER|TODO|\bPROJECT_ID\b|\bNAMESPACE\b|\bINGEST_URL\b|\bINGEST_TOKEN\b"
    r"|<[a-z][a-z -]*>",
)
FILLED = {
    "image": "registry.example.org/platform/cocoon-hibernation@sha256:" + "0" * 64,
    "registryBase": "registry.cocoon-system.svc:5000/snapshots",
    "registryInsecure": "true",
    "registryAuth": "basic",
    "namespaces": "team-a,team-b",
    "wakeDeadline": "15m",
}


def _render(directory: Path) -> list[dict[str, Any]]:
    done = subprocess.run(
        ["kubectl", "kustomize", str(directory)],
        check=False,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    return [d for d in yaml.safe_load_all(done.stdout) if d is not None]


@pytest.fixture(scope="module")
def filled(tmp_path_factory: pytest.TempPathFactory) -> list[dict[str, Any]]:
    copy = tmp_path_factory.mktemp("k8s") / "k8s"
    shutil.copytree(K8S_DIR, copy)
    config = yaml.safe_load((copy / "config.yaml").read_text(encoding="utf-8"))
    assert set(config["data"]) == set(FILLED), "the test fills every key of config.yaml"
    config["data"] = dict(FILLED)
    (copy / "config.yaml").write_text(yaml.safe_dump(config), encoding="utf-8")
    return _render(copy)


def _serve(docs: list[dict[str, Any]]) -> dict[str, Any]:
    (service,) = [
        d for d in docs if d["kind"] == "Service" and "serving.knative.dev" in d["apiVersion"]
    ]
    (container,) = service["spec"]["template"]["spec"]["containers"]
    return dict(container)


def test_nothing_placeholder_like_is_left_once_the_config_is_filled(
    filled: list[dict[str, Any]],
) -> None:
    rendered = yaml.safe_dump_all(filled)
    assert not PLACEHOLDER_LIKE.findall(rendered), PLACEHOLDER_LIKE.findall(rendered)


def test_the_values_land_where_they_belong(filled: list[dict[str, Any]]) -> None:
    container = _serve(filled)
    assert container["image"] == FILLED["image"]
    env = {e["name"]: e.get("value") for e in container["env"]}
    assert env["COCOON_REGISTRY_BASE"] == FILLED["registryBase"]
    assert env["COCOON_REGISTRY_INSECURE"] == FILLED["registryInsecure"]
    assert env["COCOON_REGISTRY_AUTH"] == FILLED["registryAuth"]
    assert env["COCOON_NAMESPACES"] == FILLED["namespaces"]
    assert env["COCOON_WAKE_DEADLINE"] == FILLED["wakeDeadline"]
    # What the process will read is a valid configuration (secrets as the Secret holds them).
    secret = {e["name"]: "s3cret" for e in container["env"] if "valueFrom" in e}
    assert set(secret) == {
        "COCOON_INGEST_TOKEN",
        "COCOON_REGISTRY_USERNAME",
        "COCOON_REGISTRY_PASSWORD",
    }
    plain = {k: v for k, v in env.items() if v is not None}
    settings = Settings.from_env({**plain, **secret})
    settings.require_registry()
    assert settings.namespaces == frozenset({"team-a", "team-b"})


def test_the_config_is_not_applied_and_the_base_is_complete(filled: list[dict[str, Any]]) -> None:
    kinds = {(d["kind"], d["metadata"]["name"]) for d in filled}
    assert ("ConfigMap", "cocoon-hibernation-config") not in kinds
    assert {
        ("Namespace", "cocoon-system"),
        ("ClusterRole", "cocoon-hibernation"),
        ("ClusterRole", "cocoon-hibernation-writer"),
        ("ServiceAccount", "cocoon-hibernation"),
        ("ClusterRoleBinding", "cocoon-hibernation-serve"),
        ("Service", "cocoon-hibernation"),
        ("PingSource", "cocoon-sweep"),
    } <= kinds
    assert sum(1 for d in filled if d["kind"] == "ApiServerSource") == 2


def test_the_shipped_config_is_the_only_place_with_placeholders() -> None:
    """Unfilled, the rendering holds exactly the placeholders config.yaml declares."""
    rendered = yaml.safe_dump_all(_render(K8S_DIR))
    config = (K8S_DIR / "config.yaml").read_text(encoding="utf-8")
    declared = set(re.findall(r"Placeholder: (\w+)", config))
    assert declared == {"REPLACE_ME_IMAGE", "REPLACE_ME_REGISTRY"}
    assert set(PLACEHOLDER_LIKE.findall(rendered)) == {"REPLACE_ME"}
    assert all(token in rendered for token in declared)
