"""Every manifest in infra/k8s and the Distribution config, validated offline.

Core kinds (RBAC, ServiceAccount, Namespace) go through the Kubernetes OpenAPI
schemas bundled with kubernetes-validate, strictly (unknown fields fail).
Knative, audit Policy and kubeconfig kinds have no schema there: they get
structural checks of the fields that matter, and the pod template a Knative
Service runs is validated as a core PodSpec. Cross-checks tie the manifests to
the code (constants, Settings.from_env) and to the Terraform (identities,
audited methods).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml

from shared import constants as c
from shared.config import KubeAuth, Settings
from tests.conftest import REPO_ROOT
from tests.deploy._hcl import MODULE_DIR, load_dir, names

K8S_DIR = REPO_ROOT / "infra" / "k8s"
REGISTRY_CONFIG = REPO_ROOT / "infra" / "registry-config" / "config.yml"
# kustomization.yaml is not a manifest (tests/deploy/test_kustomize.py renders it).
MANIFESTS = sorted(p for p in K8S_DIR.rglob("*.yaml") if p.name != "kustomization.yaml")
# The oldest Kubernetes release cocoonstack clusters run, and the newest schema bundled.
K8S_VERSIONS = ("1.30.0", kubernetes_validate.latest_version())

SCHEMA_KINDS = {
    ("v1", "ConfigMap"),  # config.yaml, the self-hosted base's values
    # deployment/deployment.yaml, the plain-Deployment variant
    ("apps/v1", "Deployment"),
    ("v1", "Service"),
    ("policy/v1", "PodDisruptionBudget"),
    ("networking.k8s.io/v1", "NetworkPolicy"),
    ("v1", "Namespace"),
    ("v1", "ServiceAccount"),
    ("rbac.authorization.k8s.io/v1", "ClusterRole"),
    ("rbac.authorization.k8s.io/v1", "ClusterRoleBinding"),
    ("rbac.authorization.k8s.io/v1", "RoleBinding"),
}
KNATIVE_SERVICE = ("serving.knative.dev/v1", "Service")
API_SERVER_SOURCE = ("sources.knative.dev/v1", "ApiServerSource")
PING_SOURCE = ("sources.knative.dev/v1", "PingSource")
AUDIT_POLICY = ("audit.k8s.io/v1", "Policy")
KUBECONFIG = ("v1", "Config")
# prometheus-operator/podmonitor.yaml; its CRD is checked by the server-side
# dry run in test_kustomize.py.
POD_MONITOR = ("monitoring.coreos.com/v1", "PodMonitor")
STRUCTURAL_KINDS = {
    KNATIVE_SERVICE,
    API_SERVER_SOURCE,
    PING_SOURCE,
    AUDIT_POLICY,
    KUBECONFIG,
    POD_MONITOR,
}

# Placeholders a user replaces; each must be explained in a comment of its file.
PLACEHOLDER = re.compile(
    r"\b(REPLACE_ME_[A-Z_]+|PROJECT_ID|INGEST_URL|INGEST_TOKEN|AUDIT_TOKEN|NAMESPACE)\b"
)


def _docs() -> Iterator[tuple[Path, dict[str, Any]]]:
    for path in MANIFESTS:
        for doc in yaml.safe_load_all(path.read_text(encoding="utf-8")):
            if doc is not None:
                yield path, doc


ALL_DOCS = list(_docs())


def _id(item: tuple[Path, dict[str, Any]]) -> str:
    path, doc = item
    return f"{path.relative_to(K8S_DIR)}:{doc.get('kind')}/{doc.get('metadata', {}).get('name')}"


def _gvk(doc: dict[str, Any]) -> tuple[str, str]:
    return doc.get("apiVersion", ""), doc.get("kind", "")


def _only(gvk: tuple[str, str], name: str | None = None) -> dict[str, Any]:
    found = [
        d for _, d in ALL_DOCS if _gvk(d) == gvk and (name is None or d["metadata"]["name"] == name)
    ]
    assert len(found) == 1, f"expected one {gvk} {name or ''}, found {len(found)}"
    return found[0]


def _all(gvk: tuple[str, str]) -> list[dict[str, Any]]:
    return [d for _, d in ALL_DOCS if _gvk(d) == gvk]


# --- every document ---------------------------------------------------------------


def test_manifests_exist() -> None:
    names = {p.relative_to(K8S_DIR).as_posix() for p in MANIFESTS}
    assert {
        "rbac.yaml",
        "gke-binding.yaml",
        "audit/policy.yaml",
        "audit/webhook-kubeconfig.yaml",
        "knative/service.yaml",
        "knative/sources.yaml",
    } <= names


@pytest.mark.parametrize("item", ALL_DOCS, ids=_id)
def test_every_document_is_a_known_kind(item: tuple[Path, dict[str, Any]]) -> None:
    _, doc = item
    assert _gvk(doc) in SCHEMA_KINDS | STRUCTURAL_KINDS, f"no validation for {_gvk(doc)}"


@pytest.mark.parametrize("version", K8S_VERSIONS)
@pytest.mark.parametrize("item", [i for i in ALL_DOCS if _gvk(i[1]) in SCHEMA_KINDS], ids=_id)
def test_core_kinds_match_the_openapi_schema(
    item: tuple[Path, dict[str, Any]], version: str
) -> None:
    _, doc = item
    kubernetes_validate.validate(doc, version, strict=True)


def test_schema_validation_rejects_a_broken_manifest() -> None:
    role = json.loads(
        json.dumps(_only(("rbac.authorization.k8s.io/v1", "ClusterRole"), c.EVENT_COMPONENT))
    )
    role["rules"][0]["verb"] = role["rules"][0].pop("verbs")  # a typo kubectl would reject
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(role, K8S_VERSIONS[0], strict=True)


@pytest.mark.parametrize("path", [*MANIFESTS, REGISTRY_CONFIG], ids=lambda p: p.name)
def test_every_placeholder_is_documented_in_its_file(path: Path) -> None:
    text = path.read_text(encoding="utf-8")
    comments = "\n".join(line for line in text.splitlines() if line.lstrip().startswith("#"))
    content = "\n".join(line for line in text.splitlines() if not line.lstrip().startswith("#"))
    for token in set(PLACEHOLDER.findall(content)):
        assert token in comments, f"{path.name}: placeholder {token} is not explained"


# --- RBAC ---------------------------------------------------------------------------


def _rules(role: dict[str, Any]) -> set[tuple[str, str, str]]:
    return {
        (group, resource, verb)
        for rule in role["rules"]
        for group in rule.get("apiGroups", [])
        for resource in rule.get("resources", [])
        for verb in rule.get("verbs", [])
    }


# The kubernetes client calls of shared/clients/kube.py -> the RBAC they need.
# A call missing here fails the test: add it with its verb.
CLIENT_CALLS: dict[str, tuple[str, str, str]] = {
    "get_namespaced_custom_object": (c.GROUP, c.PLURAL, "get"),
    "list_cluster_custom_object": (c.GROUP, c.PLURAL, "list"),
    "list_namespaced_custom_object": (c.GROUP, c.PLURAL, "list"),
    "patch_namespaced_custom_object": (c.GROUP, c.PLURAL, "patch"),
    "patch_namespaced_custom_object_status": (c.GROUP, f"{c.PLURAL}/status", "patch"),
    "read_namespaced_pod": ("", "pods", "get"),
    "list_namespaced_pod": ("", "pods", "list"),
    "list_pod_for_all_namespaces": ("", "pods", "list"),
    "create_namespaced_pod": ("", "pods", "create"),
    "patch_namespaced_pod": ("", "pods", "patch"),
    "delete_namespaced_pod": ("", "pods", "delete"),
    "create_namespaced_event": ("", "events", "create"),
    "create_token_review": ("authentication.k8s.io", "tokenreviews", "create"),
}
# Rights a call needs beyond its own verb. The restored main pod's controller
# ownerReference sets blockOwnerDeletion, and OwnerReferencesPermissionEnforcement
# (on in GKE) then requires `update` on the owner's finalizers subresource
# (tests/e2e/test_real_cluster.py proves it against a real kube-apiserver).
IMPLIED: dict[tuple[str, str, str], set[tuple[str, str, str]]] = {
    ("", "pods", "create"): {(c.GROUP, f"{c.PLURAL}/finalizers", "update")},
}
# A list call made with `watch=True` is a WATCH to RBAC (report_wait watches one pod).
WATCH_CALLS: dict[str, tuple[str, str, str]] = {
    "list_namespaced_pod": ("", "pods", "watch"),
    "list_pod_for_all_namespaces": ("", "pods", "watch"),
    "list_namespaced_custom_object": (c.GROUP, c.PLURAL, "watch"),
    "list_cluster_custom_object": (c.GROUP, c.PLURAL, "watch"),
}
READ_VERBS = {"get", "list", "watch"}
READER = "cocoon-hibernation"  # cluster-wide reads (the sweep lists every namespace)
WRITER = "cocoon-hibernation-writer"  # bound per namespace only
REVIEWER = "cocoon-hibernation-tokenreview"  # cluster-scoped TokenReview, changes no object
TOKEN_REVIEW = ("authentication.k8s.io", "tokenreviews", "create")


def _code_needs() -> set[tuple[str, str, str]]:
    source = (REPO_ROOT / "shared" / "clients" / "kube.py").read_text(encoding="utf-8")
    calls = set(re.findall(r"self\._(?:core|custom)\.(\w+)", source))
    assert calls, "no kubernetes client call found in shared/clients/kube.py"
    unknown = calls - set(CLIENT_CALLS)
    assert not unknown, f"map these client calls to their RBAC verbs: {sorted(unknown)}"
    needs = {CLIENT_CALLS[name] for name in calls}
    # Each call's argument list (up to its closing parenthesis at the call's indent).
    for name, args in re.findall(r"self\._(?:core|custom)\.(\w+)\((.*?)\n\s*\)", source, re.S):
        if re.search(r"\bwatch=True\b", args):
            assert name in WATCH_CALLS, f"map this watching call to its RBAC verb: {name}"
            needs.add(WATCH_CALLS[name])
    # The one custom-object call outside the CocoonSet group: PodMetrics (list only).
    if '"metrics.k8s.io"' in source:
        needs.add(("metrics.k8s.io", "pods", "list"))
    return needs.union(*(IMPLIED.get(n, set()) for n in needs))


def test_function_roles_grant_exactly_what_the_code_uses() -> None:
    reader = _only(("rbac.authorization.k8s.io/v1", "ClusterRole"), READER)
    writer = _only(("rbac.authorization.k8s.io/v1", "ClusterRole"), WRITER)
    reviewer = _only(("rbac.authorization.k8s.io/v1", "ClusterRole"), REVIEWER)
    needs = _code_needs()
    # Nothing unused: no update, no event patch, no events.k8s.io; `watch` on pods only
    # because report_wait watches one pod.
    assert ("", "pods", "watch") in needs
    assert _rules(reader) | _rules(writer) | _rules(reviewer) == needs
    assert _rules(reader) == {n for n in needs if n[2] in READ_VERBS}
    assert _rules(writer) == {n for n in needs if n[2] not in READ_VERBS} - {TOKEN_REVIEW}
    assert _rules(reviewer) == {TOKEN_REVIEW}
    for role in (reader, writer, reviewer):
        assert all("resourceNames" not in r and "nonResourceURLs" not in r for r in role["rules"])


def test_no_cluster_wide_write_access() -> None:
    """Cluster-wide pod create would let the functions run any ServiceAccount in
    any namespace (kube-system included): writes are bound per namespace only."""
    writer_refs = []
    for binding in _all(("rbac.authorization.k8s.io/v1", "ClusterRoleBinding")):
        role = _only(("rbac.authorization.k8s.io/v1", "ClusterRole"), binding["roleRef"]["name"])
        writes = {r for r in _rules(role) if r[2] not in READ_VERBS} - {TOKEN_REVIEW}
        assert not writes, f"{binding['metadata']['name']} grants {sorted(writes)} cluster-wide"
    for path, binding in ALL_DOCS:
        if _gvk(binding) != ("rbac.authorization.k8s.io/v1", "RoleBinding"):
            continue
        assert binding["metadata"]["namespace"] == "NAMESPACE"  # a template, one per namespace
        assert binding["roleRef"]["kind"] == "ClusterRole"
        # The per-namespace reads (namespace-read-binding.yaml) stand in for the cluster-wide ones.
        expected = READER if path.name == "namespace-read-binding.yaml" else WRITER
        assert binding["roleRef"]["name"] == expected, path
        writer_refs.append(binding["roleRef"]["name"])
    assert writer_refs and set(writer_refs) == {READER, WRITER}


def _namespace_binding(path: str) -> dict[str, Any]:
    docs = [d for p, d in ALL_DOCS if p.relative_to(K8S_DIR).as_posix() == path]
    (binding,) = docs
    assert _gvk(binding) == ("rbac.authorization.k8s.io/v1", "RoleBinding")
    assert binding["roleRef"] == {
        "apiGroup": "rbac.authorization.k8s.io",
        "kind": "ClusterRole",
        "name": WRITER,
    }
    text = (K8S_DIR / path).read_text(encoding="utf-8")
    assert "once per namespace" in text  # the instruction the user follows
    return binding


def test_gke_binding_names_the_terraform_runtime_identities() -> None:
    binding = _only(
        ("rbac.authorization.k8s.io/v1", "ClusterRoleBinding"), "cocoon-hibernation-functions"
    )
    assert binding["roleRef"] == {
        "apiGroup": "rbac.authorization.k8s.io",
        "kind": "ClusterRole",
        "name": READER,
    }
    per_namespace = _namespace_binding("namespace-binding.yaml")
    assert per_namespace["subjects"] == binding["subjects"]
    module = load_dir(MODULE_DIR)
    prefix = module.variables["name_prefix"]["default"]
    account = module.resource("google_service_account", "runtime")["account_id"]
    assert account == "${var.name_prefix}-${each.key}"
    functions = names(module.locals["functions"])
    expected = {f"{prefix}-{fn}@PROJECT_ID.iam.gserviceaccount.com" for fn in functions}
    subjects = binding["subjects"]
    assert all(s["kind"] == "User" for s in subjects)
    assert {s["name"] for s in subjects} == expected


def test_serve_account_is_bound_to_the_same_roles() -> None:
    binding = _only(
        ("rbac.authorization.k8s.io/v1", "ClusterRoleBinding"), "cocoon-hibernation-serve"
    )
    assert binding["roleRef"]["name"] == READER
    (subject,) = binding["subjects"]
    assert _namespace_binding("knative/namespace-binding.yaml")["subjects"] == [subject]
    service = _only(KNATIVE_SERVICE)
    assert subject == {
        "kind": "ServiceAccount",
        "name": service["spec"]["template"]["spec"]["serviceAccountName"],
        "namespace": service["metadata"]["namespace"],
    }
    _only(("v1", "ServiceAccount"), subject["name"])


# --- Knative ------------------------------------------------------------------------

KNATIVE_ONLY_FIELDS = {
    "timeoutSeconds",
    "containerConcurrency",
    "responseStartTimeoutSeconds",
    "idleTimeoutSeconds",
}


def _serve_container() -> dict[str, Any]:
    (container,) = _only(KNATIVE_SERVICE)["spec"]["template"]["spec"]["containers"]
    return container


@pytest.mark.parametrize("version", K8S_VERSIONS)
def test_knative_pod_template_is_a_valid_pod_spec(version: str) -> None:
    spec = dict(_only(KNATIVE_SERVICE)["spec"]["template"]["spec"])
    for extra in KNATIVE_ONLY_FIELDS:
        spec.pop(extra, None)
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "serve"}, "spec": spec}
    kubernetes_validate.validate(pod, version, strict=True)


def test_knative_service_runs_serve_hardened() -> None:
    container = _serve_container()
    assert [*container.get("command", []), *container.get("args", [])][:2] == [
        "cocoon-hibernation",
        "serve",
    ]
    sc = container["securityContext"]
    assert sc["runAsNonRoot"] is True and sc["allowPrivilegeEscalation"] is False
    assert sc["readOnlyRootFilesystem"] is True and sc["capabilities"]["drop"] == ["ALL"]
    assert container["resources"]["limits"]["memory"]


def test_knative_service_environment_satisfies_settings() -> None:
    env: dict[str, str] = {}
    for item in _serve_container()["env"]:
        if "value" in item:
            value = item["value"]
            env[item["name"]] = (
                "registry.cocoon-system.svc:5000/snapshots"
                if value == "REPLACE_ME_REGISTRY"
                else value
            )
        else:
            ref = item["valueFrom"]["secretKeyRef"]
            assert ref["key"] == item["name"]
            # Each door's token its own value of at least 32 characters (shared.config).
            env[item["name"]] = f"{item['name'].lower()}-0123456789abcdef0123456789abcdef"
    env["COCOON_WAKE_TOKENS"] = "team-a=" + env["COCOON_WAKE_TOKENS"]
    settings = Settings.from_env(env)
    assert settings.kube_auth is KubeAuth.KUBECONFIG  # in-cluster ServiceAccount
    settings.require_registry()
    assert settings.ingest_token  # serve also answers /registry and /kubernetes/audit
    # The event sources' doors (sources.yaml): set changes and sweep ticks.
    assert settings.audit_token and settings.sweep_token
    # The token never sits in the manifest itself.
    assert all(
        "value" not in i for i in _serve_container()["env"] if i["name"] == "COCOON_INGEST_TOKEN"
    )


def _sink(source: dict[str, Any]) -> tuple[str, str]:
    sink = source["spec"]["sink"]
    ref = sink["ref"]
    service = _only(KNATIVE_SERVICE)
    assert (ref["apiVersion"], ref["kind"]) == KNATIVE_SERVICE
    assert ref["name"] == service["metadata"]["name"]
    assert ref.get("namespace", source["metadata"]["namespace"]) == service["metadata"]["namespace"]
    return ref["name"], sink["uri"]


def test_api_server_sources_feed_release_and_wake_with_full_objects() -> None:
    sources = _all(API_SERVER_SOURCE)
    assert sorted(_sink(s)[1] for s in sources) == ["/release", "/wake"]
    for source in sources:
        spec = source["spec"]
        assert spec["mode"] == "Resource"  # the reconciler filters on labels and phase
        kinds = {(r["apiVersion"], r["kind"]) for r in spec["resources"]}
        assert kinds == {(c.API_VERSION, c.KIND), ("v1", "Pod")}
        (pods,) = [r for r in spec["resources"] if r["kind"] == "Pod"]
        keys = {e["key"] for e in pods["selector"]["matchExpressions"]}
        assert keys == {c.LABEL_SET_NAME}
        _only(("v1", "ServiceAccount"), spec["serviceAccountName"])


def test_source_account_can_watch_what_it_watches_and_nothing_more() -> None:
    (account,) = {s["spec"]["serviceAccountName"] for s in _all(API_SERVER_SOURCE)}
    bindings = [
        b
        for b in _all(("rbac.authorization.k8s.io/v1", "ClusterRoleBinding"))
        if any(s.get("name") == account for s in b["subjects"])
    ]
    (binding,) = bindings
    role = _only(("rbac.authorization.k8s.io/v1", "ClusterRole"), binding["roleRef"]["name"])
    rules = _rules(role)
    assert {v for (_, _, v) in rules} == {"get", "list", "watch"}
    needed = {
        (c.GROUP, c.PLURAL),
        ("", "pods"),
        ("", "namespaces"),
    }  # namespaces: namespaceSelector
    assert {(g, r) for (g, r, _) in rules} == needed
    for group, resource in needed:
        assert {(group, resource, v) for v in ("get", "list", "watch")} <= rules


def test_ping_source_ticks_the_sweep_every_minute() -> None:
    ping = _only(PING_SOURCE)
    assert _sink(ping)[1] == "/sweep"
    spec = ping["spec"]
    assert spec["schedule"] == "* * * * *"
    assert spec["contentType"] == "application/json"
    assert json.loads(spec["data"]) == {"dryRun": False}


# --- audit -----------------------------------------------------------------------------


def test_audit_policy_sends_writes_to_sets_and_pods_only() -> None:
    """Writes to sets and pods, including pods/status: a wake completes on a status write."""
    policy = _only(AUDIT_POLICY)
    assert "RequestReceived" in policy["omitStages"]
    rules = policy["rules"]
    *selective, last = rules
    assert last == {"level": "None"}, "the last rule must drop everything else"
    allowed = {
        (c.GROUP, c.PLURAL),
        (c.GROUP, f"{c.PLURAL}/status"),
        ("", "pods"),
        ("", "pods/status"),
    }
    covered: set[tuple[str, str, str]] = set()
    for rule in selective:
        # Metadata names the object; bodies (pod env) never leave the API server.
        assert rule["level"] in {"None", "Metadata"}
        assert set(rule["verbs"]) <= {"create", "update", "patch", "delete"}
        for res in rule["resources"]:
            for resource in res["resources"]:
                assert (res["group"], resource) in allowed, resource
                covered |= {(res["group"], resource, v) for v in rule["verbs"]}
    # The self-managed path sees every change the GKE (Eventarc) path routes.
    module = load_dir(MODULE_DIR)
    routed = [
        *module.variables["audit_methods"]["default"],
        *module.variables["pod_status_audit_methods"]["default"],
    ]
    for method in routed:
        parts = method.split(".")
        verb = parts[-1]
        sub = "/status" if parts[-2] == "status" else ""
        if method.startswith("io.k8s.core."):
            key = ("", "pods" + sub, verb)
        else:
            key = (c.GROUP, c.PLURAL + sub, verb)
        assert key in covered, f"{method} is routed on GKE but not sent by the audit policy"


def test_audit_webhook_kubeconfig_points_at_ingest() -> None:
    config = _only(KUBECONFIG)
    (cluster,) = config["clusters"]
    (user,) = config["users"]
    (context,) = config["contexts"]
    assert cluster["cluster"]["server"].endswith("/kubernetes/audit")
    assert cluster["cluster"]["server"].startswith("INGEST_URL")
    assert user["user"]["token"]
    assert context["context"] == {"cluster": cluster["name"], "user": user["name"]}
    assert config["current-context"] == context["name"]


# --- Distribution ---------------------------------------------------------------------------


def test_registry_notifications_reach_ingest_with_the_blob_workaround() -> None:
    config = yaml.safe_load(REGISTRY_CONFIG.read_text(encoding="utf-8"))
    (endpoint,) = config["notifications"]["endpoints"]
    assert endpoint["url"].endswith("/registry")
    auth = endpoint["headers"]["Authorization"]
    assert isinstance(auth, list) and auth[0].startswith("Bearer ")
    # Without a media type in the ignore list, Distribution < 3.1 skips the
    # action filter entirely (docs/design.md#ignore-actions).
    assert "application/octet-stream" in endpoint["ignoredmediatypes"]
    for key in ("timeout", "threshold", "backoff"):
        assert endpoint[key], key
    assert config["storage"]["delete"]["enabled"] is True  # wake deletes :hibernate
