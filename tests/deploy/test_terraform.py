"""The Terraform deployment, checked statically against the code it deploys.

No terraform binary and no cloud: python-hcl2 parses the files, and the checks
tie them to the product (main.py's targets, `Settings.from_env`, the CloudEvent
types the adapters accept, the audit methods a GKE adapter maps) and to the
security invariants (no primitive roles, no public invoker, least-privilege
grants, release and wake retry, the sweep does not).
"""

from __future__ import annotations

import ast
import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from shared import constants as c
from shared.config import KubeAuth, RegistryAuth, Settings
from shared.constants import METRIC_SEAT_RECLAIMS
from shared.refusal import METRIC_ADMISSION_REFUSED
from tests.conftest import REPO_ROOT
from tests.deploy._hcl import (
    EXAMPLE_DIR,
    MODULE_DIR,
    TF_ROOT,
    TfDir,
    blocks,
    hcl_regexes,
    load_dir,
    merged_locals,
    names,
    norm,
    parse_file,
    walk,
)

ALL_TF = sorted(TF_ROOT.rglob("*.tf"))
FUNCTIONS = ("release", "wake", "sweep", "ingest")
CLOUDEVENT_FUNCTIONS = ("release", "wake", "sweep")
WRITE_VERBS = {"create", "update", "patch", "delete"}


@pytest.fixture(scope="module")
def module() -> TfDir:
    return load_dir(MODULE_DIR)


@pytest.fixture(scope="module")
def example() -> TfDir:
    return load_dir(EXAMPLE_DIR)


def _specs(module: TfDir) -> dict[str, dict[str, Any]]:
    specs = module.locals["function_specs"]
    assert isinstance(specs, dict)
    return specs


def _fn(module: TfDir) -> dict[str, Any]:
    fn = module.resource("google_cloudfunctions2_function", "fn")
    # The tests below read the per-function values from local.function_specs;
    # that only holds while the resource iterates over it.
    assert fn["for_each"] == "${local.function_specs}"
    return fn


def _literal(value: Any) -> str:
    """The value of a literal string; a Terraform expression fails the test."""
    assert isinstance(value, str) and "${" not in value, f"expected a literal, got {value!r}"
    return value


# --- parsing -------------------------------------------------------------------


def test_terraform_tree_exists() -> None:
    assert (MODULE_DIR / "versions.tf").is_file()
    assert (EXAMPLE_DIR / "main.tf").is_file()
    assert (EXAMPLE_DIR / "terraform.tfvars.example").is_file()


@pytest.mark.parametrize("path", ALL_TF, ids=lambda p: str(p.relative_to(TF_ROOT)))
def test_every_tf_file_parses(path: Path) -> None:
    doc = parse_file(path)
    assert doc, f"{path} parsed to nothing"


def test_providers_are_declared_with_bounded_versions(module: TfDir, example: TfDir) -> None:
    for tf in (module, example):
        declared: dict[str, dict[str, Any]] = {}
        for block in tf.terraform:
            for rp in block.get("required_providers", []):
                declared.update(rp)
        # terraform_data is built into Terraform itself: no provider to declare.
        used = {t.split("_", 1)[0] for (t, _) in (*tf.resources, *tf.data)} - {"terraform"}
        if tf is example:
            used |= {"google", "archive", "random"}  # through the module
        for provider in used:
            assert provider in declared, f"{tf.path.name}: provider {provider} not in versions.tf"
            version = declared[provider]["version"]
            assert ">=" in version and "<" in version.replace("<=", "<"), (
                f"{provider} needs a lower and an upper bound, got {version!r}"
            )
            assert declared[provider]["source"] == f"hashicorp/{provider}"


# --- targets -----------------------------------------------------------------------


def _main_targets() -> dict[str, str]:
    """Targets main.py exposes -> signature ('cloud_event' or 'http').

    The decorated functions live in functions/entrypoints.py (so an installed
    wheel has them); main.py, which Cloud Run loads, re-exports them by name.
    """
    tree = ast.parse((REPO_ROOT / "functions" / "entrypoints.py").read_text(encoding="utf-8"))
    found: dict[str, str] = {}
    for node in tree.body:
        if not isinstance(node, ast.FunctionDef):
            continue
        for dec in node.decorator_list:
            if (
                isinstance(dec, ast.Attribute)
                and isinstance(dec.value, ast.Name)
                and dec.value.id == "functions_framework"
                and dec.attr in {"cloud_event", "http"}
            ):
                found[node.name] = dec.attr
    exported = {
        alias.asname or alias.name
        for node in ast.parse((REPO_ROOT / "main.py").read_text(encoding="utf-8")).body
        if isinstance(node, ast.ImportFrom) and node.module == "functions.entrypoints"
        for alias in node.names
    }
    return {name: sig for name, sig in found.items() if name in exported}


def test_every_entry_point_is_a_decorated_target_of_main(module: TfDir) -> None:
    fn = _fn(module)
    assert blocks(fn, "build_config")[0]["entry_point"] == "${each.value.entry_point}"
    targets = _main_targets()
    specs = _specs(module)
    assert set(specs) == set(FUNCTIONS)
    for name, spec in specs.items():
        entry = _literal(spec["entry_point"])
        assert entry in targets, f"{name}: entry_point {entry!r} is not a decorated target"
        # An event trigger needs a CloudEvent target; the webhook an HTTP one.
        has_trigger = spec["trigger_topic"] is not None
        assert targets[entry] == ("cloud_event" if has_trigger else "http"), name


def test_runtime_is_python312_from_one_archive(module: TfDir) -> None:
    build = blocks(_fn(module), "build_config")[0]
    assert build["runtime"] == "python312"
    storage = blocks(blocks(build, "source")[0], "storage_source")[0]
    assert storage["object"] == "${google_storage_bucket_object.source.name}"
    archive = module.data[("archive_file", "source")]
    assert archive["source_dir"] == "${var.source_dir}"
    obj = module.resource("google_storage_bucket_object", "source")
    # Content-addressed: a code change is a new object, hence a redeploy.
    assert "output_md5" in obj["name"] or "output_sha" in obj["name"]


def test_source_bucket_is_private_versioned_and_uniform(module: TfDir) -> None:
    bucket = module.resource("google_storage_bucket", "source")
    assert bucket["uniform_bucket_level_access"] is True
    assert bucket["public_access_prevention"] == "enforced"
    assert blocks(bucket, "versioning")[0]["enabled"] is True


# --- environment vs shared/config.py -------------------------------------------------

# Values standing in for Terraform expressions, by variable: what the
# expression evaluates to in a real plan, in the shape config.py validates.
PLACEHOLDERS = {
    "COCOON_KUBE_SERVER": "https://203.0.113.10",
    "COCOON_KUBE_CA": "LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0t",
    "COCOON_REGISTRY_BASE": "europe-west1-docker.pkg.dev/acme-prod/snapshots",
    "COCOON_NAMESPACES": "agents,batch",
    "COCOON_EVENTS_TOPIC": "projects/acme-prod/topics/cocoon-events",
    "COCOON_WAKE_DEADLINE": "10m",
    "COCOON_SWEEP_MAX_SUSPENDS": "50",
    "COCOON_SEAT_RECLAIM_GRACE": "30s",
    "COCOON_SEAT_ORDER": "gate",
    "COCOON_OPERATOR": "absent",
    "COCOON_PUSH_AUDIENCE": "https://cocoon-ingest-123456789012.europe-west1.run.app",
    "COCOON_PUSH_SERVICE_ACCOUNTS": "relay@acme-prod.iam.gserviceaccount.com",
    "COCOON_INGEST_TOKEN": "t0ken-from-secret-manager-0123456789",
}


def _concrete(key: str, value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    text = str(value)
    if text.startswith("${") and text.endswith("}") and text.count("${") == 1:
        assert key in PLACEHOLDERS, f"{key} is an expression: add a placeholder for it"
        return PLACEHOLDERS[key]
    # A literal, possibly with interpolations: keep the literal parts.
    return re.sub(r"\$\{[^}]*\}", "x", text)


def _deployed_env(module: TfDir, function: str) -> dict[str, str]:
    spec = _specs(module)[function]
    env = {k: _concrete(k, v) for k, v in merged_locals(spec["env"], module).items()}
    service = blocks(_fn(module), "service_config")[0]
    assert service["environment_variables"] == "${each.value.env}"
    for secret in blocks(service, "secret_environment_variables"):
        applies = secret_applies_to(service, function)
        if applies:
            env[secret["key"]] = PLACEHOLDERS[secret["key"]]
    return env


def secret_applies_to(service: dict[str, Any], function: str) -> bool:
    for dyn in service.get("dynamic", []):
        body = dyn.get("secret_environment_variables")
        if body is not None:
            cond = body["for_each"]
            match = re.search(r"each\.key==(\w+)\?", norm(cond))
            assert match, f"secret env for_each must name its function: {cond}"
            return match.group(1) == function
    return False


@pytest.mark.parametrize("function", FUNCTIONS)
def test_environment_satisfies_settings_from_env(module: TfDir, function: str) -> None:
    env = _deployed_env(module, function)
    settings = Settings.from_env(env)
    assert settings.kube_auth is KubeAuth.GOOGLE
    assert settings.kube_server and settings.kube_server.startswith("https://")
    assert settings.registry_auth is RegistryAuth.GOOGLE
    assert not settings.registry_insecure
    assert env["COCOON_LOG_FORMAT"] == "json"
    # KUBECONFIG would override the Google identity on Cloud Run.
    assert "KUBECONFIG" not in env
    settings.require_registry()  # release and wake refuse to start without it
    if function == "ingest":
        assert settings.ingest_token, "ingest needs COCOON_INGEST_TOKEN"
    else:
        assert "COCOON_INGEST_TOKEN" not in env, f"{function} must not see the ingest token"


@pytest.mark.parametrize(
    ("variable", "env_key", "setting"),
    [("cocoon_operator", "COCOON_OPERATOR", "operator"), ("seat_order", "COCOON_SEAT_ORDER", None)],
)
def test_operator_and_seat_order_reach_every_function(
    module: TfDir, variable: str, env_key: str, setting: str | None
) -> None:
    # Without these a Terraform user running no cocoon-operator could not say so, and
    # every release and wake would wait for it (docs/operator.md).
    for function in FUNCTIONS:
        raw = merged_locals(_specs(module)[function]["env"], module)
        assert norm(str(raw[env_key])) == f"${{var.{variable}}}", function
    default = module.variables[variable]["default"]
    settings = Settings.from_env({env_key: default})
    if setting == "operator":
        assert settings.operator.value == default  # the module's default is the settings' own
        assert Settings.from_env({}).operator.value == default
    else:
        assert settings.seat_order is Settings.from_env({}).seat_order


def test_kube_server_is_https_whatever_the_override(module: TfDir) -> None:
    expr = module.locals["kube_server"]
    assert "https://${data.google_container_cluster.this.endpoint}" in norm(expr)
    (pattern,) = hcl_regexes(module.variables["kube_server_override"]["validation"][0]["condition"])
    assert pattern.match("https://cp.example.internal")
    assert not pattern.match("http://10.0.0.2")


def test_ingest_token_comes_from_secret_manager_latest(module: TfDir) -> None:
    service = blocks(_fn(module), "service_config")[0]
    (secret,) = blocks(service, "secret_environment_variables")
    assert secret["key"] == "COCOON_INGEST_TOKEN"
    assert secret["version"] == "latest"
    assert "google_secret_manager_secret.ingest_token" in json.dumps(service)
    # Never a plain environment variable.
    for function in FUNCTIONS:
        assert "COCOON_INGEST_TOKEN" not in merged_locals(_specs(module)[function]["env"], module)


def test_build_source_is_the_documented_order(module: TfDir, example: TfDir) -> None:
    src = example.modules["cocoon_hibernation"]
    assert src["source"] == "../../modules/cocoon-hibernation"
    assert src["source_dir"].endswith("/build/function-source")
    assert "build-source.sh" in (EXAMPLE_DIR / "main.tf").read_text(encoding="utf-8")


# --- triggers ----------------------------------------------------------------------


def _accepts() -> dict[str, frozenset[str]]:
    """CloudEvent types each target accepts: the adapters' own sets when present."""
    try:
        from shared.adapters import cloudevent as ce
    except ImportError:  # the adapters land on another branch; docs/design.md#targets meanwhile
        changes = frozenset({c.CE_SET_CHANGED, c.CE_AUDIT_WRITTEN})
        return {
            "release": frozenset({c.CE_SNAPSHOT_PUSHED, c.CE_PUBSUB_PUBLISHED}) | changes,
            "wake": frozenset({c.CE_WAKE_REQUESTED, c.CE_PUBSUB_PUBLISHED}) | changes,
            "sweep": frozenset({c.CE_PUBSUB_PUBLISHED, c.CE_SWEEP_REQUESTED}),
        }
    return {"release": ce.ACCEPT_RELEASE, "wake": ce.ACCEPT_WAKE, "sweep": ce.ACCEPT_SWEEP}


def test_function_triggers_are_pubsub_with_retry(module: TfDir) -> None:
    fn = _fn(module)
    (trigger,) = blocks(fn, "event_trigger")
    assert trigger["event_type"] == c.CE_PUBSUB_PUBLISHED
    assert trigger["retry_policy"] == "${each.value.retry_policy}"
    specs = _specs(module)
    # The CF2 API drops failed deliveries unless asked: release and wake retry.
    assert specs["release"]["retry_policy"] == "RETRY_POLICY_RETRY"
    assert specs["wake"]["retry_policy"] == "RETRY_POLICY_RETRY"
    assert trigger["service_account_email"] == "${google_service_account.trigger[each.key].email}"
    for name in CLOUDEVENT_FUNCTIONS:
        assert c.CE_PUBSUB_PUBLISHED in _accepts()[name]


def test_a_failed_sweep_tick_is_not_retried(module: TfDir) -> None:
    """A tick is superseded by the next one: retrying it for 24 h piles runs up."""
    specs = _specs(module)
    assert specs["sweep"]["retry_policy"] == "RETRY_POLICY_DO_NOT_RETRY"
    assert module.variables["sweep_schedule"]["default"] == "* * * * *"
    # Nothing to dead-letter for a trigger that never retries.
    assert names(module.locals["retried_functions"]) == {"release", "wake"}
    for rtype in ("google_pubsub_topic", "google_pubsub_subscription"):
        assert module.resource(rtype, "dead_letter")["for_each"] == "${local.retried_functions}"


def test_each_function_listens_to_its_own_topic(module: TfDir) -> None:
    specs = _specs(module)
    assert specs["release"]["trigger_topic"] == "${data.google_pubsub_topic.gcr.id}"
    assert module.data[("google_pubsub_topic", "gcr")]["name"] == "gcr"
    assert specs["wake"]["trigger_topic"] == "${google_pubsub_topic.wake_requests.id}"
    assert specs["sweep"]["trigger_topic"] == "${google_pubsub_topic.sweep.id}"
    assert specs["ingest"]["trigger_topic"] is None
    # gcr must not be created (409 where Artifact Registry made it).
    assert ("google_pubsub_topic", "gcr") not in module.resources


def test_scheduler_ticks_the_sweep_topic_with_canonical_data(module: TfDir) -> None:
    job = module.resource("google_cloud_scheduler_job", "sweep")
    assert job["schedule"] == "${var.sweep_schedule}"
    assert module.variables["sweep_schedule"]["default"] == "* * * * *"
    (target,) = blocks(job, "pubsub_target")
    assert target["topic_name"] == "${google_pubsub_topic.sweep.id}"
    assert norm(target["data"]) in {
        "${base64encode(jsonencode({dryRun=false}))}",
        "${base64encode(jsonencode({dryRun:false}))}",
    }


def _audit_methods(module: TfDir) -> list[str]:
    methods = module.variables["audit_methods"]["default"]
    assert isinstance(methods, list) and methods
    return methods


def _parse_gke_method(method: str) -> tuple[str, str, str | None, str] | None:
    try:
        from shared.adapters.audit_events import parse_gke_method
    except ImportError:  # same rule as the adapter (docs/design.md#gke-audit-methods)
        prefixes = {"io.k8s.core.": "", ".".join(reversed(c.GROUP.split("."))) + ".": c.GROUP}
        for prefix, group in prefixes.items():
            if method.startswith(prefix):
                parts = method[len(prefix) :].split(".")
                if len(parts) == 3:
                    return group, parts[1], None, parts[2]
                if len(parts) == 4:
                    return group, parts[1], parts[2], parts[3]
        return None
    return parse_gke_method(method)


def test_audit_triggers_match_what_the_adapter_maps(module: TfDir) -> None:
    for method in _audit_methods(module):
        parsed = _parse_gke_method(method)
        assert parsed is not None, f"{method}: the GKE audit adapter would drop it"
        group, resource, sub, verb = parsed
        assert (group, resource) in {(c.GROUP, c.PLURAL), ("", "pods")}, method
        assert sub in {None, "status"}, method
        assert verb in WRITE_VERBS, f"{method}: reads are Data Access logs, not routed"
        assert method.split(".")[-4 if sub else -3] == c.VERSION or method.startswith("io.k8s.")
    cocoonset_prefix = ".".join(reversed(c.GROUP.split("."))) + f".{c.VERSION}.{c.PLURAL}."
    methods = set(_audit_methods(module))
    # Both the spec change (suspend flip) and the pod lifecycle must be seen.
    assert {cocoonset_prefix + "update", cocoonset_prefix + "patch"} <= methods
    assert {"io.k8s.core.v1.pods.patch", "io.k8s.core.v1.pods.delete"} <= methods


def test_audit_method_validation_rejects_other_groups(module: TfDir) -> None:
    (pattern,) = hcl_regexes(module.variables["audit_methods"]["validation"][0]["condition"])
    for method in _audit_methods(module):
        assert pattern.match(method), method
    for wrong in (
        "io.cocoonstack.cocoonset.v1.cocoonsets.get",
        "io.k8s.apps.v1.deployments.patch",
        "cocoonset.cocoonstack.io.v1.cocoonsets.patch",  # unreversed group
        "io.k8s.core.v1.pods.exec.create",
    ):
        assert not pattern.match(wrong), wrong


def test_eventarc_audit_triggers_fan_in_to_release_and_wake(module: TfDir) -> None:
    trig = module.resource("google_eventarc_trigger", "audit")
    assert trig["for_each"] == "${local.audit_routes}"
    assert "setproduct([release,wake],var.audit_methods)" in norm(
        module.locals["shared_audit_routes"]
    )
    assert norm(module.locals["audit_routes"]) == (
        "${merge(local.shared_audit_routes,local.pod_status_routes)}"
    )
    criteria = {m["attribute"]: m["value"] for m in trig["matching_criteria"]}
    assert criteria["type"] == c.CE_AUDIT_WRITTEN
    assert criteria["serviceName"] == "k8s.io"
    assert criteria["methodName"] == "${each.value.method}"
    for name in ("release", "wake"):
        assert c.CE_AUDIT_WRITTEN in _accepts()[name]
    run = blocks(blocks(trig, "destination")[0], "cloud_run_service")[0]
    # The bare service name, as the Eventarc API takes it: the function's
    # service_config.service is the full projects/.../services/N name.
    assert run["service"] == "${local.function_names[each.value.function]}"
    assert "service_config" not in run["service"]
    assert run["region"] == "${var.region}"
    assert module.locals[
        "function_names"
    ] == '${{for f in local.functions : f => "${var.name_prefix}-${f}"}}' or (
        "${var.name_prefix}-${f}" in module.locals["function_names"]
    )
    # A bare name carries no dependency: the function must exist first.
    assert "${google_cloudfunctions2_function.fn}" in trig["depends_on"]
    assert trig["service_account"] == "${google_service_account.trigger[each.value.function].email}"
    # Eventarc triggers retry unless max_attempts = 1 says otherwise.
    assert "retry_policy" not in trig


POD_STATUS_METHODS = {"io.k8s.core.v1.pods.status.patch", "io.k8s.core.v1.pods.status.update"}


def _gke_status_write(method: str, namespace: str, pod: str) -> Any:
    """A recorded GKE pod audit CloudEvent, turned into a status write of `pod`."""
    from cloudevents.http import CloudEvent

    from tests.data.events import load_event

    fixture = load_event("gke_audit_pod_delete")
    resource = f"core/v1/namespaces/{namespace}/pods/{pod}/status"
    fixture["attributes"].update(methodname=method, resourcename=resource)
    fixture["attributes"]["subject"] = f"k8s.io/{resource}"
    fixture["data"]["protoPayload"].update(methodName=method, resourceName=resource)
    return CloudEvent(fixture["attributes"], fixture["data"])


@pytest.mark.parametrize("method", sorted(POD_STATUS_METHODS))
def test_pod_status_writes_reach_wake(module: TfDir, method: str) -> None:
    """Completion (Running + VM id, Ready) and WakeNoCapacity are status writes.

    Without these routes a wake completes only on the next sweep tick.
    """
    from shared.adapters import ACCEPT_WAKE, parse_cloudevent
    from shared.config import Settings

    assert method in module.variables["pod_status_audit_methods"]["default"]
    routes = norm(module.locals["pod_status_routes"])
    assert "setproduct(var.pod_status_audit_methods," in routes
    assert re.search(r"function[:=]wake", routes) and "release" not in routes
    # The adapter turns the status write into a change of the owning set.
    event = _gke_status_write(method, "team-a", "agent-0")
    parsed = parse_cloudevent(event, settings=Settings(), accept=ACCEPT_WAKE)
    assert [(t.ref.namespace, t.ref.name) for t in parsed.triggers] == [("team-a", "agent")]
    (pattern,) = hcl_regexes(
        module.variables["pod_status_audit_methods"]["validation"][0]["condition"]
    )
    assert pattern.match(method)
    for wrong in ("io.k8s.core.v1.pods.patch", "io.k8s.core.v1.pods.exec.create"):
        assert not pattern.match(wrong), wrong


def _path_pattern_matches(pattern: str, resource_name: str) -> bool:
    """Eventarc match-path-pattern: `*` is one segment, `**` any number of them."""
    parts = []
    for segment in pattern.strip("/").split("/"):
        if segment == "**":
            parts.append(r"(?:/[^/]+)*")
        else:
            parts.append("/" + re.escape(segment).replace(r"\*", "[^/]*"))
    return re.fullmatch("".join(parts), "/" + resource_name.strip("/")) is not None


def test_pod_status_triggers_narrow_to_the_allowed_namespaces(module: TfDir) -> None:
    trig = module.resource("google_eventarc_trigger", "audit")
    (dyn,) = [d["matching_criteria"] for d in trig.get("dynamic", []) if "matching_criteria" in d]
    # python-hcl2 spells the list element `'${each.value.namespace}'` or bare.
    for_each = norm(dyn["for_each"]).replace("'", "").replace("${each.value.namespace}", "ns")
    assert for_each.replace("each.value.namespace]", "ns]") == (
        "${each.value.namespace==null?[]:[ns]}"
    )
    (content,) = dyn["content"]
    assert content["attribute"] == "resourceName"
    assert content["operator"] == "match-path-pattern"
    routes = norm(module.locals["pod_status_routes"])
    # One route per method and allowed namespace; a single unnarrowed one without.
    assert "length(var.namespaces)>0?var.namespaces:[" in routes
    # The trigger name tells namespaces apart (one trigger per method and namespace).
    assert "each.value.namespace" in trig["name"]
    pattern = content["value"].replace("${matching_criteria.value}", "team-a")
    assert _path_pattern_matches(pattern, "core/v1/namespaces/team-a/pods/agent-0/status")
    assert _path_pattern_matches(pattern, "core/v1/namespaces/team-a/pods/agent-0")
    assert not _path_pattern_matches(pattern, "core/v1/namespaces/team-b/pods/agent-0/status")
    assert not _path_pattern_matches(pattern, "core/v1/namespaces/team-a/secrets/x")


def test_every_event_type_in_the_tree_is_accepted(module: TfDir) -> None:
    accepted = {c.CE_PUBSUB_PUBLISHED, c.CE_AUDIT_WRITTEN}
    for path in ALL_TF:
        for keys, value in walk(parse_file(path)):
            if keys and keys[-1] == "event_type":
                assert value in accepted, f"{path}: {value}"
    for trig in module.of_type("google_eventarc_trigger").values():
        for m in trig["matching_criteria"]:
            if m["attribute"] == "type":
                assert m["value"] in accepted


# --- dead letters ------------------------------------------------------------------


def test_topics_have_bounded_retention(module: TfDir) -> None:
    for name, topic in module.of_type("google_pubsub_topic").items():
        retention = topic.get("message_retention_duration")
        assert retention, f"topic {name} has no message_retention_duration"
        if "${" not in retention:
            assert int(retention.rstrip("s")) <= 31 * 86400, name
    dlq = module.resource("google_pubsub_topic", "dead_letter")
    assert dlq["for_each"] == "${local.retried_functions}"
    assert dlq["message_retention_duration"] == "${var.dead_letter_retention}"
    var = module.variables["dead_letter_retention"]
    assert "2678400" in var["validation"][0]["condition"]  # 31 days, the Pub/Sub maximum
    sub = module.resource("google_pubsub_subscription", "dead_letter")
    assert sub["message_retention_duration"] == "${var.dead_letter_retention}"


def test_dead_letters_are_attachable_after_apply(module: TfDir) -> None:
    # Eventarc owns its subscriptions: the script attaches the topics.
    script = REPO_ROOT / "infra" / "scripts" / "attach-dead-letters.sh"
    assert script.is_file()
    assert "dead_letter_attachments" in module.outputs
    text = script.read_text(encoding="utf-8")
    assert "--dead-letter-topic" in text and "dead_letter_attachments" in text
    subprocess.run(["bash", "-n", str(script)], check=True)
    publisher = module.resource("google_pubsub_topic_iam_member", "dead_letter_publisher")
    assert "gcp-sa-pubsub.iam.gserviceaccount.com" in publisher["member"]


# --- IAM ---------------------------------------------------------------------------

PRIMITIVE = re.compile(r"roles/(owner|editor|viewer)\b")
PUBLIC = re.compile(r"\b(allUsers|allAuthenticatedUsers)\b")


@pytest.mark.parametrize("path", ALL_TF, ids=lambda p: str(p.relative_to(TF_ROOT)))
def test_no_primitive_roles(path: Path) -> None:
    for keys, value in walk(parse_file(path)):
        if isinstance(value, str):
            assert not PRIMITIVE.search(value), f"{path}: {'.'.join(keys)} = {value}"


def _iam_resources(tf: TfDir) -> dict[tuple[str, str], dict[str, Any]]:
    return {
        k: v for k, v in tf.resources.items() if re.search(r"_iam_(member|binding|policy)$", k[0])
    }


def test_no_public_member_in_any_configuration(module: TfDir) -> None:
    iam = _iam_resources(module)
    assert iam
    for (rtype, name), body in iam.items():
        assert not rtype.endswith(("_iam_binding", "_iam_policy")), (
            f"{rtype}.{name}: authoritative IAM would remove grants others made"
        )
        member = body["member"]
        assert not PUBLIC.search(member), f"{rtype}.{name}"
        if member == "${each.value}":
            # Only the validated lists (invokers, wake publishers) feed a member from input.
            assert body["for_each"] in (
                "${toset(var.ingest_invoker_members)}",
                "${toset(var.wake_publishers)}",
            ), name
        else:
            assert member.startswith("serviceAccount:"), f"{rtype}.{name}: {member}"
    (pattern,) = hcl_regexes(
        module.variables["ingest_invoker_members"]["validation"][0]["condition"]
    )
    assert pattern.match("serviceAccount:relay@acme-prod.iam.gserviceaccount.com")
    for public in ("allUsers", "allAuthenticatedUsers", "allUsers:x"):
        assert not pattern.match(public), public
    (wake,) = hcl_regexes(module.variables["wake_publishers"]["validation"][0]["condition"])
    assert wake.match("serviceAccount:portal@acme-prod.iam.gserviceaccount.com")
    for public in ("allUsers", "allAuthenticatedUsers"):
        assert not wake.match(public), public


def test_only_the_named_publishers_may_publish_wake_requests(module: TfDir) -> None:
    grant = module.resource("google_pubsub_topic_iam_member", "wake_publisher")
    assert grant["for_each"] == "${toset(var.wake_publishers)}"
    assert grant["role"] == "roles/pubsub.publisher"
    assert grant["topic"] == "${google_pubsub_topic.wake_requests.name}"
    # Nothing else is granted publish on the wake topic.
    others = [
        name
        for (rtype, name), body in _iam_resources(module).items()
        if "wake_requests" in json.dumps(body) and name != "wake_publisher"
    ]
    assert others == []


@pytest.mark.parametrize("path", ALL_TF, ids=lambda p: str(p.relative_to(TF_ROOT)))
def test_no_public_member_literal_anywhere(path: Path) -> None:
    for keys, value in walk(parse_file(path)):
        if isinstance(value, str) and keys[-1] in {"member", "members", "default", "value"}:
            assert not PUBLIC.search(value), f"{path}: {'.'.join(keys)}"


def test_project_wide_grants_are_the_unavoidable_ones(module: TfDir) -> None:
    grants = module.of_type("google_project_iam_member")
    unconditioned = {b["role"] for b in grants.values() if not blocks(b, "condition")}
    # clusterViewer = container.clusters.get (Kubernetes verbs come from RBAC);
    # eventReceiver and logWriter (the build's) have no narrower scope.
    assert unconditioned == {
        "roles/container.clusterViewer",
        "roles/eventarc.eventReceiver",
        "roles/logging.logWriter",
    }
    writer = grants["build_image_writer"]
    assert writer["role"] == "roles/artifactregistry.writer"
    assert "google_service_account.build.email" in writer["member"]
    (cond,) = blocks(writer, "condition")
    assert 'resource.name.startsWith(\\"${local.build_repository}\\")' in cond["expression"] or (
        "resource.name.startsWith" in cond["expression"]
        and "${local.build_repository}" in cond["expression"]
    )
    assert module.locals["build_repository"].endswith("/repositories/gcf-artifacts")
    viewer = module.resource("google_project_iam_member", "cluster_viewer")
    assert viewer["for_each"] == "${local.functions}"
    receiver = module.resource("google_project_iam_member", "event_receiver")
    assert receiver["member"].startswith("serviceAccount:${google_service_account.trigger[")


def test_one_runtime_identity_per_function_and_one_per_trigger(module: TfDir) -> None:
    runtime = module.resource("google_service_account", "runtime")
    trigger = module.resource("google_service_account", "trigger")
    assert runtime["for_each"] == "${local.functions}"
    assert trigger["for_each"] == "${local.trigger_functions}"
    assert names(module.locals["functions"]) == set(FUNCTIONS)
    service = blocks(_fn(module), "service_config")[0]
    assert service["service_account_email"] == "${google_service_account.runtime[each.key].email}"
    invoker = module.resource("google_cloud_run_service_iam_member", "trigger_invoker")
    assert invoker["role"] == "roles/run.invoker"
    assert invoker["service"] == "${google_cloudfunctions2_function.fn[each.key].name}"
    assert invoker["member"] == "serviceAccount:${google_service_account.trigger[each.key].email}"


def test_every_reconciling_function_may_finish_a_wake(module: TfDir) -> None:
    """docs/design.md#targets: one level-triggered reconciler, so any target may reconcile any set.

    The audit fan-in routes every pod write to `release` as well as `wake`, so
    `release` reaches the wake's completion step (delete `<vm>:hibernate`) as
    soon as a restored pod changes. Without a delete-capable role Artifact
    Registry answers 403, a ConfigError and an Eventarc retry cycle after
    every wake.
    """
    deleter = module.resource("google_artifact_registry_repository_iam_member", "tag_deleter")
    assert deleter["for_each"] == "${local.deleter_functions}"
    assert deleter["role"] == "${google_project_iam_custom_role.snapshot_manager.id}"
    assert "runtime[each.key]" in norm(deleter["member"])
    assert names(module.locals["deleter_functions"]) == set(FUNCTIONS)
    assert names(module.locals["audit_functions"]) <= names(module.locals["deleter_functions"])


# What shared/clients/registry.py does against Artifact Registry's Docker API:
# HEAD/GET a manifest and GET tags/list (downloadArtifacts, tags.list), DELETE
# a manifest by digest (versions.delete; the tag goes with it: tags.delete).
SNAPSHOT_PERMISSIONS = {
    "artifactregistry.repositories.downloadArtifacts",
    "artifactregistry.tags.list",
    "artifactregistry.tags.delete",
    "artifactregistry.versions.delete",
}


def test_snapshot_role_holds_exactly_what_the_code_does(module: TfDir) -> None:
    role = module.resource("google_project_iam_custom_role", "snapshot_manager")
    assert role["permissions"] == "${local.snapshot_permissions}"
    granted = set(module.locals["snapshot_permissions"])
    assert granted == SNAPSHOT_PERMISSIONS
    # What repoAdmin added and the code never does.
    for never in (
        "artifactregistry.repositories.uploadArtifacts",
        "artifactregistry.packages.delete",
        "artifactregistry.repositories.update",
        "artifactregistry.repositories.deleteArtifacts",
    ):
        assert never not in granted
    # The role ID must be a valid custom-role ID whatever the prefix: letters,
    # digits, underscores and dots only, so the prefix's hyphens are replaced.
    assert "replace(var.name_prefix" in role["role_id"]


def test_the_code_makes_only_the_registry_calls_the_role_allows() -> None:
    """The role above is derived from these calls; a new kind of call needs a new permission."""
    text = (REPO_ROOT / "shared" / "clients" / "registry.py").read_text(encoding="utf-8")
    methods = set(re.findall(r'self\._(?:http|manifest)\(\s*"([A-Z]+)"', text))
    assert methods == {"HEAD", "GET", "DELETE"}, methods


def test_registry_grants_are_repository_scoped(module: TfDir) -> None:
    grants = module.of_type("google_artifact_registry_repository_iam_member")
    assert grants
    for name, body in grants.items():
        assert body["repository"].startswith("${data.google_artifact_registry_repository."), name
    # The only project-level Artifact Registry grant is the build's, and it is
    # conditioned to the function image repository.
    for name, b in module.of_type("google_project_iam_member").items():
        if "artifactregistry" in b["role"]:
            assert name == "build_image_writer" and blocks(b, "condition"), name


def test_builds_run_as_a_dedicated_least_privilege_account(module: TfDir) -> None:
    build = blocks(_fn(module), "build_config")[0]
    assert build["service_account"] == "${google_service_account.build.id}"
    sa = module.resource("google_service_account", "build")
    assert "for_each" not in sa
    reader = module.resource("google_storage_bucket_iam_member", "build_source_reader")
    assert reader["role"] == "roles/storage.objectViewer"
    assert reader["bucket"] == "${google_storage_bucket.source.name}"
    # Every grant to the build account, wherever it is, is one of these three.
    build_roles = {
        b["role"]
        for b in _iam_resources(module).values()
        if "google_service_account.build.email" in b.get("member", "")
    }
    assert build_roles == {
        "roles/logging.logWriter",
        "roles/artifactregistry.writer",
        "roles/storage.objectViewer",
    }
    depends = norm(json.dumps(_fn(module)["depends_on"]))
    for grant in (
        "google_project_iam_member.build",
        "google_project_iam_member.build_image_writer",
    ):
        assert grant in depends, grant


def test_secret_access_is_ingest_only_on_its_secret(module: TfDir) -> None:
    grants = [
        (k, b) for k, b in _iam_resources(module).items() if "secretAccessor" in b.get("role", "")
    ]
    assert len(grants) == 1
    (rtype, _), body = grants[0]
    assert rtype == "google_secret_manager_secret_iam_member"
    assert body["secret_id"] == "${google_secret_manager_secret.ingest_token.secret_id}"
    assert norm(body["member"]) == "serviceAccount:${google_service_account.runtime[ingest].email}"


def test_ingress_is_internal_by_default(module: TfDir) -> None:
    service = blocks(_fn(module), "service_config")[0]
    assert norm(service["ingress_settings"]) == norm(
        '${each.key == "ingest" ? var.ingest_ingress : "ALLOW_INTERNAL_ONLY"}'
    )
    var = module.variables["ingest_ingress"]
    assert var["default"] == "ALLOW_INTERNAL_ONLY"
    assert "allUsers" in var["description"]  # the description says it is never granted


# --- metrics and alerting ------------------------------------------------------------


def test_log_metrics_are_the_operator_counters(module: TfDir) -> None:
    metrics = module.locals["log_metrics"]
    assert {
        c.METRIC_PODS_DELETED,
        c.METRIC_WAKE,
        c.METRIC_WAKE_UNSCHEDULABLE,
        METRIC_SEAT_RECLAIMS,
        METRIC_ADMISSION_REFUSED,
    } <= set(metrics)
    assert set(metrics[METRIC_SEAT_RECLAIMS]["labels"]) == {"namespace", "pool"}
    assert set(metrics[METRIC_ADMISSION_REFUSED]["labels"]) == {
        "namespace",
        "cocoonset",
        "write",
        "webhook",
    }
    assert set(metrics[c.METRIC_WAKE]["labels"]) == {"namespace", "cocoonset", "placement"}
    for name in (c.METRIC_PODS_DELETED, c.METRIC_WAKE_UNSCHEDULABLE):
        assert set(metrics[name]["labels"]) == {"namespace", "cocoonset"}
    metric = module.resource("google_logging_metric", "counter")
    assert metric["for_each"] == "${local.log_metrics}"
    assert "jsonPayload.metric" in metric["filter"]
    # The logged name is the bare one; the metric's name carries the instance.
    assert 'jsonPayload.metric=\\"${each.key}\\"' in metric["filter"] or (
        "${each.key}" in metric["filter"]
    )
    assert "EXTRACT(jsonPayload.labels.${l})" in metric["label_extractors"]
    descriptor = blocks(metric, "metric_descriptor")[0]
    assert descriptor["metric_kind"] == "DELTA" and descriptor["value_type"] == "INT64"


def test_two_instances_in_one_project_have_distinct_metric_names(module: TfDir) -> None:
    metric = module.resource("google_logging_metric", "counter")
    assert metric["name"] == "${local.metric_name_prefix}${each.key}"
    assert "var.name_prefix" in module.locals["metric_name_prefix"]
    # Log metric IDs allow letters, digits and _-.,+!*',()%/ : a name_prefix
    # (lowercase, digits, hyphens) keeps them valid.
    assert module.locals["user_metric"] == (
        "logging.googleapis.com/user/${local.metric_name_prefix}"
    )
    for name in ("counter", "distribution"):
        metric = module.resource("google_logging_metric", name)
        assert metric["name"] == "${local.metric_name_prefix}${each.key}"
    alerts = module.locals["alerts"]
    for alert in alerts.values():
        # Every alert on a log metric reads it through the prefixed name.
        if "logging.googleapis.com/user/" in alert["filter"] or "user_metric" in alert["filter"]:
            assert "${local.user_metric}" in alert["filter"]


def test_alert_policy_waits_for_its_metric(module: TfDir) -> None:
    """A metric created in the same apply is invisible to Monitoring for minutes (404)."""
    alert = module.resource("google_monitoring_alert_policy", "alert")
    assert alert["depends_on"] == ["${time_sleep.log_metrics}"]
    wait = module.resource("time_sleep", "log_metrics")
    assert wait["create_duration"] == "${var.log_metric_wait}"
    assert "google_logging_metric.counter" in json.dumps(wait["triggers"])
    assert "google_logging_metric.distribution" in json.dumps(wait["triggers"])


def test_alerts_notify_the_configured_channels(module: TfDir) -> None:
    alert = module.resource("google_monitoring_alert_policy", "alert")
    assert alert["for_each"] == "${local.alerts}"
    cond = blocks(blocks(alert, "conditions")[0], "condition_threshold")[0]
    assert cond["comparison"] == "COMPARISON_GT"
    assert alert["notification_channels"] == "${var.alert_notification_channels}"


# --- variables, outputs, example -----------------------------------------------------------

# Free-form or boolean inputs: nothing to validate beyond their type.
UNVALIDATED = {
    "labels",
    "enable_apis",
    "source_dir",
    "sweep_time_zone",
    "publish_lifecycle_events",
    "gke_data_write_audit_logs",
    "attach_dead_letters",
    "kubernetes_token_review",
}


def test_variables_are_described_typed_and_validated(module: TfDir) -> None:
    for name, var in module.variables.items():
        assert var.get("description"), f"variable {name} has no description"
        assert var.get("type"), f"variable {name} has no type"
        if name not in UNVALIDATED:
            assert var.get("validation"), f"variable {name} has no validation block"


def test_outputs_expose_urls_topics_and_identities(module: TfDir, example: TfDir) -> None:
    for name in (
        "function_uris",
        "wake_requests_topic",
        "sweep_topic",
        "events_topic",
        "dead_letter_topics",
        "runtime_service_accounts",
        "pod_creators",
        "cocoon_webhook_pod_creators",
    ):
        assert name in module.outputs, name
        assert name in example.outputs, name
    for tf in (module, example):
        for name, out in tf.outputs.items():
            assert out.get("description"), f"output {name} has no description"
            assert "random_password" not in json.dumps(out), f"output {name} leaks the token"


def test_tfvars_example_sets_every_required_variable(example: TfDir) -> None:
    tfvars = parse_file(EXAMPLE_DIR / "terraform.tfvars.example")
    required = {n for n, v in example.variables.items() if "default" not in v}
    assert required <= set(tfvars), required - set(tfvars)
    assert set(tfvars) <= set(example.variables)
    module_vars = load_dir(MODULE_DIR).variables
    # The example forwards to the module: its values must pass the module's validations.
    for name in ("project_id", "region", "name_prefix"):
        for pattern in hcl_regexes(module_vars[name]["validation"][0]["condition"]):
            assert pattern.match(tfvars[name]), name


# --- the source archive ----------------------------------------------------------------


@pytest.fixture(scope="module")
def staged(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("fn") / "function-source"
    subprocess.run(
        ["bash", str(REPO_ROOT / "infra" / "scripts" / "build-source.sh"), str(out)],
        check=True,
        cwd=REPO_ROOT,
        capture_output=True,
        timeout=120,
    )
    return out


def test_staged_source_holds_the_product_only(staged: Path) -> None:
    top = {p.name for p in staged.iterdir()}
    assert top == {"main.py", "shared", "functions", "requirements.txt"}
    assert not list(staged.rglob("__pycache__"))
    reqs = (staged / "requirements.txt").read_text(encoding="utf-8").lower()
    names = {re.split(r"[=<>; \[]", line, maxsplit=1)[0] for line in _requirement_lines(reqs)}
    assert {"functions-framework", "cloudevents", "kubernetes", "pydantic"} <= names
    # The local extra and the dev tools are not deployed.
    assert not names & {"cel-python", "pytest", "mypy", "python-hcl2", "checkov"}
    assert "cocoon-hibernation" not in names  # --no-emit-project


def _requirement_lines(text: str) -> list[str]:
    """One line per requirement: a hashed export continues each with `\\` and `--hash` lines."""
    joined = text.replace("\\\n", " ")
    return [line for line in joined.splitlines() if line.strip() and not line.startswith("#")]


def test_every_deployed_requirement_is_pinned_with_its_hashes(staged: Path) -> None:
    # pip installs a file with any --hash in hash-checking mode: every line needs one.
    reqs = _requirement_lines((staged / "requirements.txt").read_text(encoding="utf-8"))
    assert reqs
    for line in reqs:
        assert "==" in line and "--hash=sha256:" in line, line


def _deployed_imports() -> set[str]:
    """Top-level modules that main.py, functions/ and shared/ import (absolute imports)."""
    files = [REPO_ROOT / "main.py", *REPO_ROOT.glob("functions/**/*.py")]
    files += REPO_ROOT.glob("shared/**/*.py")
    found: set[str] = set()
    for file in files:
        for node in ast.walk(ast.parse(file.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                found |= {alias.name.split(".")[0] for alias in node.names}
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                found.add(node.module.split(".")[0])
    return found


def _normal(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _closure(dists: set[str]) -> set[str]:
    """These distributions and everything they require here (markers evaluated, no extras)."""
    from importlib.metadata import PackageNotFoundError, requires

    from packaging.requirements import Requirement

    seen: set[str] = set()
    todo = [_normal(d) for d in dists]
    while todo:
        dist = todo.pop()
        if dist in seen:
            continue
        seen.add(dist)
        try:
            reqs = requires(dist) or []
        except PackageNotFoundError:
            continue
        for line in reqs:
            req = Requirement(line)
            if req.marker is None or req.marker.evaluate({"extra": ""}):
                todo.append(_normal(req.name))
    return seen


def test_deployed_requirements_are_only_what_the_functions_import(staged: Path) -> None:
    """requirements.txt = the closure of the deployed code's imports: no CLI-only package."""
    from importlib.metadata import packages_distributions

    providers = packages_distributions()
    imported = {
        dist
        for module in _deployed_imports()
        for dist in providers.get(module, [])
        if _normal(dist) != "cocoon-hibernation"
    }
    # Loaded without an import statement: the standard library's zoneinfo reads
    # the tzdata package when the image has no /usr/share/zoneinfo (the sweep's
    # sleep-schedule zones; Cloud Run's Python images are such images).
    imported |= {"tzdata"} if "zoneinfo" in _deployed_imports() else set()
    allowed = _closure(imported)
    reqs = (staged / "requirements.txt").read_text(encoding="utf-8")
    names = {
        _normal(re.split(r"[=<>; \[]", line, maxsplit=1)[0]) for line in _requirement_lines(reqs)
    }
    assert names, "empty requirements.txt"
    assert names <= allowed, f"deployed but never imported by the functions: {names - allowed}"
    # The command line's own dependency stays out (it is in the wheel's, not the functions').
    assert "rich" not in names
    # And nothing the functions import is missing.
    assert {_normal(d) for d in imported} <= names


def test_staged_source_imports_on_its_own(staged: Path) -> None:
    """main.py loads from the stage alone: no module of the local stack or the CLI."""
    probe = (
        "import sys, json; sys.path.insert(0, sys.argv[1]);"
        "import main;"
        "own = {n: getattr(m, '__file__', '') or '' for n, m in sys.modules.items()"
        " if n.split('.')[0] in ('main', 'shared', 'functions', 'devstack', 'cocoon_hibernation')};"
        "print(json.dumps(own))"
    )
    result = subprocess.run(
        [sys.executable, "-c", probe, str(staged)],
        check=True,
        capture_output=True,
        text=True,
        cwd=staged,
        timeout=120,
    )
    loaded = json.loads(result.stdout.strip().splitlines()[-1])
    assert {"main", "functions"} <= {n.split(".")[0] for n in loaded}
    for name, file in loaded.items():
        local = ("devstack", "cocoon_hibernation")
        assert not name.startswith(local), f"the functions import {name}"
        if file:
            assert Path(file).resolve().is_relative_to(staged.resolve()), f"{name} from {file}"


# --- wake_deadline vs shared/durations ---------------------------------------------------


def _terraform_accepts(condition: str, value: str) -> bool:
    """Evaluate a validation made of `can(regex(...))` terms joined by `&&`.

    Terraform's regex() is RE2 and finds a match anywhere; RE2's `$` (no
    multiline flag) is end of text, which Python spells `\\Z` (Python's `$`
    also matches before a final newline).
    """
    terms = [t.strip() for t in norm(condition).removeprefix("${").removesuffix("}").split("&&")]
    assert all(t.startswith("can(regex(") for t in terms), condition
    patterns = hcl_regexes(condition)
    assert len(patterns) == len(terms), condition
    return all(re.search(p.pattern.replace("$", r"\Z"), value) for p in patterns)


# Values a user might write for wake_deadline, with what shared/durations makes of them.
DEADLINES = [
    pytest.param("10m", id="minutes"),
    pytest.param("90s", id="seconds"),
    pytest.param("1h30m", id="concatenated"),
    pytest.param("2d", id="days"),
    pytest.param("500ms", id="milliseconds"),
    pytest.param("1h0m0s", id="zero-parts-in-a-positive-total"),
    pytest.param("1.5h", id="decimal"),
    pytest.param("0.5m", id="decimal-below-one"),
    pytest.param("0s", id="zero"),
    pytest.param("0h0m", id="zero-concatenated"),
    pytest.param("10", id="no-unit"),
    pytest.param("m", id="no-number"),
    pytest.param("10M", id="upper-case-unit"),
    pytest.param("1w", id="weeks"),
    pytest.param("1us", id="microseconds"),
    pytest.param("-5m", id="negative"),
    pytest.param("+5m", id="plus-sign"),
    pytest.param("1h 30m", id="inner-space"),
    pytest.param("", id="empty"),
    pytest.param("10m\n", id="trailing-newline"),
]


@pytest.mark.parametrize("value", DEADLINES)
def test_wake_deadline_validation_agrees_with_parse_duration(module: TfDir, value: str) -> None:
    """A deadline `terraform plan` accepts must not fail every function's cold start."""
    from shared.durations import parse_duration

    try:
        parse_duration(value)
    except ValueError:
        code_accepts = False
    else:
        code_accepts = True
    condition = module.variables["wake_deadline"]["validation"][0]["condition"]
    if value != value.strip():
        # parse_duration strips blanks; Terraform is stricter on padded
        # values, which is the safe direction (plan fails, nothing deploys).
        assert code_accepts and not _terraform_accepts(condition, value)
        return
    assert _terraform_accepts(condition, value) is code_accepts


def test_wake_deadline_validation_in_real_terraform(tmp_path: Path) -> None:
    """The same table through Terraform's own RE2."""
    from shared.durations import parse_duration
    from tests.deploy._terraform import terraform_binary

    # A skip without a CLI, a failure under CI=true (the script can build one).
    binary = terraform_binary()
    text = (MODULE_DIR / "variables.tf").read_text(encoding="utf-8")
    block = text[text.index('variable "wake_deadline"') :]
    condition = re.search(r"condition\s*=\s*(.+)", block)
    assert condition
    values = [p.values[0] for p in DEADLINES if p.values[0] == p.values[0].strip()]
    expr = condition.group(1).replace("var.wake_deadline", "d")
    query = f"jsonencode({{for d in {json.dumps(values)} : d => {expr}}})"
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "TF_CLI_CONFIG_FILE": "/dev/null"}
    subprocess.run(
        [binary, "init", "-input=false"],
        cwd=tmp_path,
        env=env,
        check=True,
        capture_output=True,
        timeout=60,
    )
    out = subprocess.run(
        [binary, "console"],
        input=query,
        cwd=tmp_path,
        env=env,
        check=True,
        capture_output=True,
        text=True,
        timeout=60,
    )
    verdicts = json.loads(json.loads(out.stdout.strip()))
    for value in values:
        try:
            parse_duration(value)
        except ValueError:
            code_accepts = False
        else:
            code_accepts = True
        assert verdicts[value] is code_accepts, value


def test_default_wake_deadline_parses(module: TfDir) -> None:
    from shared.durations import parse_duration

    assert parse_duration(module.variables["wake_deadline"]["default"])


# --- audit logs the pod-status triggers depend on --------------------------------------


def test_status_write_triggers_have_their_data_access_logs(module: TfDir) -> None:
    """GKE logs status writes as DATA_WRITE (Data Access, off by default): turn it on."""
    audit = module.resource("google_project_iam_audit_config", "gke_data_write")
    assert audit["service"] == "container.googleapis.com"
    assert [c["log_type"] for c in blocks(audit, "audit_log_config")] == ["DATA_WRITE"]
    assert audit["count"] == "${local.manage_data_write_logs ? 1 : 0}"
    manage = norm(module.locals["manage_data_write_logs"])
    assert manage == "${var.gke_data_write_audit_logs&&local.routes_status_writes}"
    assert (
        'strcontains(r.method,".status.")'
        in norm(module.locals["routes_status_writes"]).replace('\\"', '"')
        or ".status." in module.locals["routes_status_writes"]
    )
    assert module.variables["gke_data_write_audit_logs"]["default"] is True
    # With the defaults, status methods are routed: the audit config is created.
    routed = set(_audit_methods(module)) | set(
        module.variables["pod_status_audit_methods"]["default"]
    )
    assert any(".status." in m for m in routed)
    # The triggers wait for the config, or the first status writes are lost.
    trig = module.resource("google_eventarc_trigger", "audit")
    assert "${google_project_iam_audit_config.gke_data_write}" in trig["depends_on"]
    # The cost and the authoritative scope are said where the user decides.
    description = module.variables["gke_data_write_audit_logs"]["description"]
    assert "billed" in description and "authoritative" in description


# --- the first apply ------------------------------------------------------------------


def test_every_api_the_module_uses_is_enabled(module: TfDir) -> None:
    apis = names(module.locals["apis"])
    # Service accounts and a custom role are created: the IAM API must be on.
    assert "iam.googleapis.com" in apis
    used = {
        "google_service_account": "iam.googleapis.com",
        "google_project_iam_custom_role": "iam.googleapis.com",
        "google_eventarc_trigger": "eventarc.googleapis.com",
        "google_cloudfunctions2_function": "cloudfunctions.googleapis.com",
        "google_cloud_scheduler_job": "cloudscheduler.googleapis.com",
        "google_secret_manager_secret": "secretmanager.googleapis.com",
        "google_logging_metric": "logging.googleapis.com",
        "google_monitoring_alert_policy": "monitoring.googleapis.com",
        "google_pubsub_topic": "pubsub.googleapis.com",
    }
    for rtype, api in used.items():
        assert module.of_type(rtype), rtype
        assert api in apis, f"{rtype} needs {api}"


def test_triggers_wait_for_the_eventarc_service_agent(module: TfDir) -> None:
    """Triggers created right after Eventarc is enabled fail (service agent not yet authorised)."""
    wait = module.resource("time_sleep", "eventarc_agent")
    assert wait["depends_on"] == ["${google_project_service.apis}"]
    assert "var.eventarc_agent_wait" in wait["create_duration"]
    fn = _fn(module)
    trig = module.resource("google_eventarc_trigger", "audit")
    for body in (fn, trig):
        assert "${time_sleep.eventarc_agent}" in body["depends_on"]
    assert re.fullmatch(r"[0-9]+s", module.variables["eventarc_agent_wait"]["default"])


# --- ack deadlines ------------------------------------------------------------------------


def test_ack_deadline_covers_each_function_timeout(module: TfDir) -> None:
    """Eventarc subscriptions default to 10 s: a longer run is redelivered while it runs."""
    assert norm(module.locals["ack_deadline_seconds"]) == norm(
        "${{for k, spec in local.function_specs : k => min(600, spec.timeout_seconds)}}"
    )
    for name, spec in _specs(module).items():
        assert 10 < int(spec["timeout_seconds"]) <= 600, name
    assert module.outputs["dead_letter_attachments"]["value"] == "${local.dead_letter_attachments}"
    value = json.dumps(module.locals["dead_letter_attachments"])
    # Both halves (function triggers, audit triggers) carry their function's deadline.
    assert "local.ack_deadline_seconds[k]" in value
    assert "local.ack_deadline_seconds[local.audit_routes[k].function]" in value


def test_attach_script_sets_ack_deadlines_and_dead_letters(tmp_path: Path) -> None:
    """The real script; gcloud and terraform are stand-ins (no cloud here) recording calls."""
    attachments = {
        "release": {
            "trigger": "projects/p/locations/europe-west10/triggers/cocoon-release-1",
            "ack_deadline_seconds": 300,
            "dead_letter_topic": "projects/p/topics/cocoon-release-dead-letter",
            "max_delivery_attempts": 20,
        },
        "sweep": {
            "trigger": "projects/p/locations/europe-west10/triggers/cocoon-sweep-1",
            "ack_deadline_seconds": 540,
            "dead_letter_topic": None,
            "max_delivery_attempts": 20,
        },
    }
    bindir = tmp_path / "bin"
    bindir.mkdir()
    log = tmp_path / "calls"
    (bindir / "terraform").write_text(
        f"#!/bin/sh\ncat <<'JSON'\n{json.dumps(attachments)}\nJSON\n", encoding="utf-8"
    )
    (bindir / "gcloud").write_text(
        "#!/bin/sh\n"
        f'echo "$*" >> {log}\n'
        'case "$*" in\n'
        '  "projects describe"*) echo 123 ;;\n'
        '  "eventarc triggers describe"*) echo "projects/p/subscriptions/sub-$4" ;;\n'
        "esac\n",
        encoding="utf-8",
    )
    for f in bindir.iterdir():
        f.chmod(0o755)
    script = REPO_ROOT / "infra" / "scripts" / "attach-dead-letters.sh"
    env = {"PATH": f"{bindir}:/usr/bin:/bin", "HOME": str(tmp_path)}
    subprocess.run(
        ["bash", str(script), "root"], env=env, check=True, capture_output=True, timeout=60
    )
    calls = log.read_text(encoding="utf-8").splitlines()
    updates = {c.split()[3]: c for c in calls if c.startswith("pubsub subscriptions update")}
    release = updates["projects/p/subscriptions/sub-cocoon-release-1"]
    assert "--ack-deadline 300" in release
    assert "--dead-letter-topic projects/p/topics/cocoon-release-dead-letter" in release
    assert "--max-delivery-attempts 20" in release
    sweep = updates["projects/p/subscriptions/sub-cocoon-sweep-1"]
    assert "--ack-deadline 540" in sweep and "--dead-letter-topic" not in sweep


# --- the deploy guide's Terraform section (docs/deploy.md) and the example -------------


def _readme_deploy_section() -> str:
    text = (REPO_ROOT / "docs/deploy.md").read_text(encoding="utf-8")
    start = text.index("## Deploy (Google Cloud, Terraform)")
    end = text.index("\n## ", start + 1)
    return text[start:end]


def test_readme_deploy_section_lists_the_example_inputs(example: TfDir) -> None:
    """The deploy guide's input table is the example's variables, one for one."""
    rows = re.findall(r"^\| `([a-z_]+)` \|", _readme_deploy_section(), flags=re.MULTILINE)
    assert len(rows) == len(set(rows)), "an input is listed twice"
    assert set(rows) == set(example.variables)


def test_every_variable_the_readme_names_can_be_set_in_the_example(
    module: TfDir, example: TfDir
) -> None:
    """A module variable the deploy guide tells users to set must be an input of the example."""
    named = set(re.findall(r"`([a-z_]+)(?: = [^`]*)?`", _readme_deploy_section()))
    module_vars = named & set(module.variables)
    assert module_vars, "the deploy guide's Terraform section names no variable"
    missing = module_vars - set(example.variables)
    assert not missing, f"the deploy guide names {sorted(missing)}, not in the example"
    # ... and the example passes each one through to the module.
    call = example.modules["cocoon_hibernation"]
    for name in module_vars:
        if name in ("labels", "source_dir"):
            continue
        assert call.get(name) == f"${{var.{name}}}", f"the example does not forward {name}"


def test_example_optional_inputs_fall_back_to_the_module_defaults(
    module: TfDir, example: TfDir
) -> None:
    """An example input defaulting to null must not null out the module's default."""
    for name, var in example.variables.items():
        if "default" in var and var["default"] is None and name in module.variables:
            mod = module.variables[name]
            if mod.get("default") is not None:
                assert mod.get("nullable") is False, f"{name}: null would replace the default"


def test_state_backend_is_declared_not_commented(example: TfDir) -> None:
    """The secrets comment promises a GCS backend: the example must really declare one."""
    backends = [b for t in example.terraform for b in t.get("backend", [])]
    assert backends and "gcs" in backends[0], backends
    secrets = (MODULE_DIR / "secrets.tf").read_text(encoding="utf-8")
    assert "backend-config=bucket" in secrets


@pytest.mark.parametrize(
    "value", [*DEADLINES, pytest.param("off", id="off"), pytest.param("OFF", id="off-upper")]
)
def test_seat_reclaim_grace_validation_agrees_with_settings(module: TfDir, value: str) -> None:
    """A grace `terraform plan` accepts must not fail every function's cold start."""
    from shared.config import Settings
    from shared.errors import ConfigError

    try:
        Settings.from_env({"COCOON_SEAT_RECLAIM_GRACE": value})
    except ConfigError:
        code_accepts = False
    else:
        code_accepts = True
    condition = module.variables["seat_reclaim_grace"]["validation"][0]["condition"]
    assert "var.seat_reclaim_grace==off||" in norm(condition)
    patterns = hcl_regexes(condition)
    assert len(patterns) == 2, condition
    tf_accepts = value == "off" or all(
        re.search(p.pattern.replace("$", r"\Z"), value) for p in patterns
    )
    if value != value.strip() or not value:
        # The code strips blanks and reads empty as the default; Terraform refuses
        # both, which is the safe direction (plan fails, nothing deploys).
        assert code_accepts and not tf_accepts
        return
    assert tf_accepts is code_accepts
