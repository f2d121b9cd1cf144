"""The self-hosted base, rendered by the real `kubectl kustomize`: one file to fill.

A user fills infra/k8s/config.yaml and runs `kubectl apply -k infra/k8s`. Here a
copy of infra/k8s gets a filled config.yaml; the rendering must carry every value
where it belongs and leave nothing that looks like a placeholder. The config
itself is never applied (local-config). Unfilled, the rendering must fail
rather than produce `image: REPLACE_ME_IMAGE`. Both variants (the Knative
Service, the plain Deployment) render, and with the Knative and Prometheus
Operator CRDs installed the real kube-apiserver accepts them
(`kubectl apply --dry-run=server`).
"""

from __future__ import annotations

import os
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
    r"REPLACE_ME|CHANGE_?ME|PLACEHOLDER|TODO|\bPROJECT_ID\b|\bNAMESPACE\b|\bINGEST_URL\b|\bINGEST_TOKEN\b|\bAUDIT_TOKEN\b"
    r"|<[a-z][a-z -]*>",
)
FILLED = {
    "image": "registry.example.org/platform/cocoon-hibernation@sha256:" + "0" * 64,
    "registryBase": "registry.cocoon-system.svc:5000/snapshots",
    "registryInsecure": "true",
    "registryAuth": "basic",
    "namespaces": "team-a,team-b",
    "wakeDeadline": "15m",
    "operator": "absent",
    "eventingNamespace": "knative-eventing",
    "registryNamespace": "registry",
    "registryApp": "docker-registry",
    "prometheusNamespace": "observability",
    "prometheusApp": "prometheus",
    "apiServerCIDR": "10.0.0.0/28",
}


# Keys config.yaml ships without: rendering must fail until they are set.
REQUIRED = {"image", "registryBase"}


def _kustomize(directory: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["kubectl", "kustomize", str(directory)],
        check=False,
        capture_output=True,
        text=True,
        timeout=120,
    )


def _render(directory: Path) -> list[dict[str, Any]]:
    done = _kustomize(directory)
    assert done.returncode == 0, done.stderr
    return [d for d in yaml.safe_load_all(done.stdout) if d is not None]


def _copy(tmp: Path, data: dict[str, str], components: list[str] | None = None) -> Path:
    copy = tmp / "k8s"
    shutil.copytree(K8S_DIR, copy)
    config = yaml.safe_load((copy / "config.yaml").read_text(encoding="utf-8"))
    assert set(config["data"]) | REQUIRED == set(FILLED), "the test fills every key"
    config["data"] = dict(data)
    (copy / "config.yaml").write_text(yaml.safe_dump(config), encoding="utf-8")
    if components is not None:
        kustomization = yaml.safe_load((copy / "kustomization.yaml").read_text(encoding="utf-8"))
        kustomization["components"] = components
        (copy / "kustomization.yaml").write_text(yaml.safe_dump(kustomization), encoding="utf-8")
    return copy


@pytest.fixture(scope="module")
def filled(tmp_path_factory: pytest.TempPathFactory) -> list[dict[str, Any]]:
    return _render(_copy(tmp_path_factory.mktemp("k8s"), FILLED))


@pytest.fixture(scope="module")
def deployment(tmp_path_factory: pytest.TempPathFactory) -> list[dict[str, Any]]:
    return _render(
        _copy(tmp_path_factory.mktemp("k8s"), FILLED, ["deployment", "prometheus-operator"])
    )


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
    assert env["COCOON_OPERATOR"] == FILLED["operator"]
    # What the process will read is a valid configuration (secrets as the Secret holds them).
    # Each door's token its own value of at least 32 characters (shared.config).
    secret = {
        e["name"]: f"{e['name'].lower()}-0123456789abcdef0123456789abcdef"
        for e in container["env"]
        if "valueFrom" in e
    }
    secret["COCOON_WAKE_TOKENS"] = "team-b=" + secret["COCOON_WAKE_TOKENS"]
    assert set(secret) == {
        "COCOON_INGEST_TOKEN",
        "COCOON_AUDIT_TOKEN",
        "COCOON_SWEEP_TOKEN",
        "COCOON_WAKE_TOKEN",
        "COCOON_WAKE_TOKENS",
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


def test_the_shipped_config_does_not_render() -> None:
    """Unfilled, `kubectl kustomize` fails naming the key, never renders REPLACE_ME_IMAGE."""
    done = _kustomize(K8S_DIR)
    assert done.returncode != 0
    assert "REPLACE_ME" not in done.stdout
    assert "fieldPath `data.image` is missing" in done.stderr
    config = yaml.safe_load((K8S_DIR / "config.yaml").read_text(encoding="utf-8"))
    assert not REQUIRED & set(config["data"])


@pytest.mark.parametrize("key", sorted(REQUIRED))
def test_each_required_key_is_required(tmp_path: Path, key: str) -> None:
    data = {k: v for k, v in FILLED.items() if k != key}
    done = _kustomize(_copy(tmp_path, data))
    assert done.returncode != 0 and f"fieldPath `data.{key}` is missing" in done.stderr


@pytest.mark.parametrize("components", [["knative"], ["deployment", "prometheus-operator"]])
def test_a_variant_renders_nothing_placeholder_like(tmp_path: Path, components: list[str]) -> None:
    rendered = yaml.safe_dump_all(_render(_copy(tmp_path, FILLED, components)))
    assert not PLACEHOLDER_LIKE.findall(rendered), PLACEHOLDER_LIKE.findall(rendered)


def test_both_variants_at_once_are_refused(tmp_path: Path) -> None:
    # Listing both components rendered a Knative Service and a Deployment side by side.
    done = _kustomize(_copy(tmp_path, FILLED, ["knative", "deployment"]))
    assert done.returncode != 0
    assert "already registered id" in done.stderr
    assert "cocoon-hibernation-variant" in done.stderr
    one = _render(_copy(tmp_path / "one", FILLED, ["deployment"]))
    assert not [d for d in one if d["metadata"]["name"] == "cocoon-hibernation-variant"]


# --- the plain Deployment -----------------------------------------------------------------


def _of(docs: list[dict[str, Any]], kind: str, api: str | None = None) -> list[dict[str, Any]]:
    return [d for d in docs if d["kind"] == kind and (api is None or d["apiVersion"] == api)]


def test_the_deployment_variant_carries_the_values_and_no_knative_service(
    deployment: list[dict[str, Any]], tmp_path: Path
) -> None:
    assert not _of(deployment, "Service", "serving.knative.dev/v1")
    (deploy,) = _of(deployment, "Deployment")
    (container,) = deploy["spec"]["template"]["spec"]["containers"]
    assert container["image"] == FILLED["image"]
    env = {e["name"]: e.get("value") for e in container["env"]}
    assert env["COCOON_REGISTRY_BASE"] == FILLED["registryBase"]
    assert env["COCOON_NAMESPACES"] == FILLED["namespaces"]
    assert env["COCOON_WAKE_DEADLINE"] == FILLED["wakeDeadline"]
    assert env["COCOON_OPERATOR"] == FILLED["operator"]
    assert env["PORT"] == "8080"
    # The same process as the Knative variant: same environment names.
    knative = _serve(_render(_copy(tmp_path, FILLED, ["knative"])))
    assert {e["name"] for e in knative["env"]} | {"PORT"} == set(env)


def test_the_deployment_is_probed_hardened_and_disruption_bounded(
    deployment: list[dict[str, Any]],
) -> None:
    (deploy,) = _of(deployment, "Deployment")
    pod = deploy["spec"]["template"]
    (container,) = pod["spec"]["containers"]
    assert container["readinessProbe"]["httpGet"]["path"] == "/readyz"
    assert container["livenessProbe"]["httpGet"]["path"] == "/healthz"
    sc = container["securityContext"]
    assert sc["runAsNonRoot"] and sc["readOnlyRootFilesystem"]
    assert not sc["allowPrivilegeEscalation"] and sc["capabilities"]["drop"] == ["ALL"]
    assert pod["spec"]["securityContext"]["runAsNonRoot"]
    assert container["resources"]["requests"] and container["resources"]["limits"]["memory"]
    assert pod["metadata"]["annotations"]["prometheus.io/scrape"] == "true"
    labels = pod["metadata"]["labels"]
    (pdb,) = _of(deployment, "PodDisruptionBudget")
    assert pdb["spec"]["minAvailable"] == 1 < deploy["spec"]["replicas"]
    assert pdb["spec"]["selector"]["matchLabels"].items() <= labels.items()
    (service,) = _of(deployment, "Service", "v1")
    assert service["spec"]["selector"].items() <= labels.items()
    (monitor,) = _of(deployment, "PodMonitor")
    assert monitor["spec"]["selector"]["matchLabels"].items() <= labels.items()
    assert monitor["spec"]["podMetricsEndpoints"][0]["path"] == "/metrics"


def test_the_sources_feed_the_variant_that_is_deployed(
    filled: list[dict[str, Any]], deployment: list[dict[str, Any]]
) -> None:
    for docs, sink in (
        (filled, ("serving.knative.dev/v1", "Service")),
        (deployment, ("v1", "Service")),
    ):
        sources = _of(docs, "ApiServerSource") + _of(docs, "PingSource")
        assert len(sources) == 3
        for source in sources:
            ref = source["spec"]["sink"]["ref"]
            assert (ref["apiVersion"], ref["kind"], ref["name"]) == (*sink, "cocoon-hibernation")


def test_the_knative_service_is_probed_and_scraped(filled: list[dict[str, Any]]) -> None:
    container = _serve(filled)
    assert container["readinessProbe"]["httpGet"]["path"] == "/readyz"
    assert container["livenessProbe"]["httpGet"]["path"] == "/healthz"
    (service,) = _of(filled, "Service", "serving.knative.dev/v1")
    annotations = service["spec"]["template"]["metadata"]["annotations"]
    assert annotations["prometheus.io/scrape"] == "true"
    assert annotations["prometheus.io/path"] == "/metrics"


@pytest.mark.parametrize("variant", ["knative", "deployment"])
def test_the_oidc_component_lets_each_source_in_at_its_own_door(
    tmp_path: Path, variant: str
) -> None:
    """Each source's OIDC ServiceAccount, as Knative Eventing names it, listed for its door."""
    docs = _render(_copy(tmp_path, FILLED, [variant, "knative/oidc"]))
    sources = [d for d in docs if d["apiVersion"].startswith("sources.knative.dev/")]
    (serve,) = [
        d["spec"]["template"]["spec"]["containers"][0]
        for d in docs
        if d["kind"] == "Deployment" or "serving.knative.dev" in d["apiVersion"]
    ]
    env = {e["name"]: e["value"] for e in serve["env"] if "CLUSTER" in e["name"]}
    settings = Settings.from_env(env)
    door = {"/release": "audit", "/wake": "audit", "/sweep": "sweep"}
    expected = {
        (
            f"system:serviceaccount:{s['metadata']['namespace']}:{s['metadata']['name']}"
            f"-oidc-sources.knative.dev-{s['kind'].lower()}",
            door[s["spec"]["sink"]["uri"]],
        )
        for s in sources
    }
    assert len(sources) == 3 and set(settings.cluster_callers) == expected
    assert {s["spec"]["sink"]["audience"] for s in sources} == {settings.cluster_audience}
    assert all(len(user.rsplit(":", 1)[1]) <= 63 for user, _ in expected)  # no hashed name


# --- the real kube-apiserver -------------------------------------------------------------

CRDS = Path(os.environ.get("COCOON_REFERENCE_CRDS", REPO_ROOT.parent / "shared/reference/crds"))
VARIANT_CRDS = (
    "serving.knative.dev_services.yaml",
    "sources.knative.dev_apiserversources.yaml",
    "sources.knative.dev_pingsources.yaml",
    "monitoring.coreos.com_podmonitors.yaml",
)


def _kubectl(kubeconfig: Path, *args: str, stdin: str | None = None) -> str:
    done = subprocess.run(
        ["kubectl", "--kubeconfig", str(kubeconfig), *args],
        input=stdin,
        check=False,
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert done.returncode == 0, f"kubectl {' '.join(args)}: {done.stderr}"
    return done.stdout


@pytest.mark.parametrize(
    "components",
    [
        ["knative", "prometheus-operator"],
        ["deployment", "prometheus-operator"],
        ["knative", "knative/oidc"],  # `spec.sink.audience` is in the sources' schema
    ],
)
def test_both_variants_pass_server_side_dry_run(
    real_kube_session: Any, tmp_path: Path, components: list[str]
) -> None:
    """The real kube-apiserver's validation, with the CRDs the manifests need installed."""
    missing = [name for name in VARIANT_CRDS if not (CRDS / name).is_file()]
    if missing:
        pytest.skip(f"reference CRDs not found in {CRDS}: {missing}")
    real_kube_session.reset()
    kubeconfig = real_kube_session.write_kubeconfig(tmp_path / "kubeconfig")
    for name in VARIANT_CRDS:
        _kubectl(kubeconfig, "apply", "--server-side", "-f", str(CRDS / name))
    _kubectl(
        kubeconfig, "wait", "--for", "condition=Established", "--timeout", "60s",
        "crd/services.serving.knative.dev", "crd/apiserversources.sources.knative.dev",
        "crd/pingsources.sources.knative.dev", "crd/podmonitors.monitoring.coreos.com",
    )  # fmt: skip
    # A dry run creates nothing, so the namespace the objects live in must exist.
    real_kube_session.ensure_namespace("cocoon-system")
    rendered = yaml.safe_dump_all(_render(_copy(tmp_path, FILLED, components)))
    out = _kubectl(kubeconfig, "apply", "--dry-run=server", "-f", "-", stdin=rendered)
    applied = {line.split(" ")[0] for line in out.splitlines() if line}
    kinds = {d["kind"].lower() for d in yaml.safe_load_all(rendered) if d}
    assert {a.split("/")[0].split(".")[0] for a in applied} == kinds, out
    # And a broken one is refused by the same server (the check can fail).
    broken = rendered.replace("minAvailable: 1", "minAvailable: many").replace(
        "containerConcurrency", "containerConcurency"
    )
    broken = broken.replace("- containerPort: 8080", "- containerPort: '80a80'", 1)
    done = subprocess.run(
        ["kubectl", "--kubeconfig", str(kubeconfig), "apply", "--dry-run=server", "-f", "-"],
        input=broken,
        check=False,
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert done.returncode != 0, done.stdout
