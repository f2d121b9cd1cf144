"""`cocoon-hibernation deploy-check`: what would fail before `terraform apply`. Terraform judges
the tfvars and the module (tfcheck); Python adds only what Terraform cannot know: the project
(gcloud), the cluster's RBAC and cocoon-webhook's admission, the audit logs."""

from __future__ import annotations

import json
import shutil
import subprocess
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import click

from cocoon_hibernation import tfcheck
from cocoon_hibernation._common import (
    EXIT_CODES_HELP,
    EXIT_USAGE,
    allow_unchecked_option,
    echo_table,
    emit_structured,
    fail,
    kube_options,
    output_choice,
)
from cocoon_hibernation.deploy_check_admission import admission_findings
from cocoon_hibernation.findings import Finding, Level

# The module's defaults and formats (terraform/modules/cocoon-hibernation).
# tests/deploy/test_deploy_check.py holds these to the module's own text.
FUNCTIONS = ("release", "wake", "sweep", "ingest")
_API_NAMES = (
    "artifactregistry cloudbuild cloudfunctions cloudscheduler container eventarc iam logging "
    "monitoring pubsub run secretmanager"
)
MODULE_APIS = tuple(f"{name}.googleapis.com" for name in _API_NAMES.split())
_SETS, _PODS = "io.cocoonstack.cocoonset.v1.cocoonsets", "io.k8s.core.v1.pods"
DEFAULT_AUDIT_METHODS = (
    *(f"{_SETS}.{verb}" for verb in ("update", "patch", "status.update", "status.patch")),
    *(f"{_PODS}.{verb}" for verb in ("update", "patch", "delete")),
)
DEFAULT_POD_STATUS_METHODS = (f"{_PODS}.status.patch", f"{_PODS}.status.update")
_CLOUD_INPUTS = ("project_id", "region", "gke_cluster", "artifact_registry")
READER_ROLE = "cocoon-hibernation"
WRITER_ROLE = "cocoon-hibernation-writer"


@dataclass(frozen=True, slots=True)
class Deploy:
    """What the apply will use, from the tfvars (module defaults where unset)."""

    project_id: str
    name_prefix: str
    namespaces: tuple[str, ...]
    enable_apis: bool
    manage_data_write_logs: bool
    routed_methods: tuple[str, ...]
    registry_location: str
    repository_id: str

    @property
    def routes_status_writes(self) -> bool:
        return any(".status." in m for m in self.routed_methods)

    def runtime_users(self) -> set[str]:
        """The Kubernetes `User`s GKE maps the runtime service accounts to."""
        return {
            f"{self.name_prefix}-{f}@{self.project_id}.iam.gserviceaccount.com" for f in FUNCTIONS
        }


def deploy_from(values: Mapping[str, Any]) -> Deploy:
    """The tfvars as Terraform read them; a value of the wrong type reads as the default."""

    def typed(name: str, kind: type, default: Any) -> Any:
        value = values.get(name)
        return value if isinstance(value, kind) else default

    def strings(name: str, default: Sequence[str]) -> tuple[str, ...]:
        return tuple(map(str, typed(name, list, default)))

    registry = typed("artifact_registry", dict, {})
    return Deploy(
        project_id=typed("project_id", str, ""),
        name_prefix=typed("name_prefix", str, "cocoon"),
        namespaces=strings("namespaces", ()),
        enable_apis=typed("enable_apis", bool, True),
        manage_data_write_logs=typed("gke_data_write_audit_logs", bool, True),
        routed_methods=strings("audit_methods", DEFAULT_AUDIT_METHODS)
        + strings("pod_status_audit_methods", DEFAULT_POD_STATUS_METHODS),
        registry_location=str(registry.get("location", "")),
        repository_id=str(registry.get("repository_id", "")),
    )


def offline_findings(values: Mapping[str, Any]) -> list[Finding]:
    """What Terraform cannot judge from the tfvars: whether the routed triggers can fire."""
    d = deploy_from(values)
    if not d.routes_status_writes or d.manage_data_write_logs:
        return []
    why = (
        "status methods are routed but gke_data_write_audit_logs = false: enable DATA_WRITE "
        "audit logs for container.googleapis.com yourself, or those triggers never fire "
        "(wakes then complete on the next sweep tick)"
    )
    return [Finding(Level.WARN, "status-write triggers", why)]


@dataclass(frozen=True, slots=True)
class Answer:
    """One gcloud call: its JSON, or why there is none (absent vs. not readable)."""

    data: Any = None
    not_found: bool = False
    error: str = ""

    @property
    def ok(self) -> bool:
        return not self.error and not self.not_found


Gcloud = Callable[[Sequence[str]], Answer]


def gcloud_runner(binary: str) -> Gcloud:
    """Run `gcloud ARGS --format=json` once (no retry: a preflight reports, it does not insist)."""

    def run(args: Sequence[str]) -> Answer:
        proc = subprocess.run(
            [binary, *args, "--format=json", "--quiet"],
            check=False,
            capture_output=True,
            text=True,
            timeout=120,
        )
        if proc.returncode != 0:
            err = proc.stderr.strip()
            if "NOT_FOUND" in err or "not found" in err.lower():
                return Answer(not_found=True)
            lines = err.splitlines() or ["gcloud failed"]
            first = next((x for x in lines if x.startswith("ERROR")), lines[0])
            return Answer(error=first[:300])
        try:
            return Answer(data=json.loads(proc.stdout or "null"))
        except ValueError:
            return Answer(error="gcloud answered non-JSON")

    return run


def _unknown(check: str, answer: Answer) -> Finding:
    return Finding(Level.UNCHECKED, check, f"not checked: {answer.error}")


def api_findings(d: Deploy, enabled: Iterable[str]) -> list[Finding]:
    missing = sorted(set(MODULE_APIS) - set(enabled))
    if not missing:
        return [Finding(Level.OK, "APIs", "every API the module uses is on")]
    if d.enable_apis:
        why = f"off, the apply enables them (and waits once for Eventarc): {', '.join(missing)}"
        return [Finding(Level.OK, "APIs", why)]
    return [Finding(Level.FAIL, "APIs", f"off with enable_apis = false: {', '.join(missing)}")]


def data_write_findings(d: Deploy, policy: Mapping[str, Any]) -> list[Finding]:
    if not d.routes_status_writes:
        return [Finding(Level.OK, "Data Access logs", "no status method routed: not needed")]
    configs = policy.get("auditConfigs") or []
    if any(
        c.get("service") in ("container.googleapis.com", "allServices")
        and any(lc.get("logType") == "DATA_WRITE" for lc in c.get("auditLogConfigs") or [])
        for c in configs
    ):
        return [Finding(Level.OK, "Data Access logs", "DATA_WRITE is on for GKE")]
    level, why = Level.OK, "off; the apply turns DATA_WRITE on for GKE"
    if not d.manage_data_write_logs:
        level = Level.FAIL
        why = (
            "DATA_WRITE is off for container.googleapis.com and the module will not turn it on: "
            "the status-write triggers would never fire"
        )
    elif any(c.get("service") == "container.googleapis.com" for c in configs):
        level = Level.WARN
        why = (
            "the apply replaces the existing container.googleapis.com audit config "
            "with DATA_WRITE only (its other log types and exemptions go)"
        )
    return [Finding(level, "Data Access logs", why)]


def cloud_findings(d: Deploy, gcloud: Gcloud) -> list[Finding]:
    out: list[Finding] = []
    enabled = gcloud(["services", "list", "--enabled", f"--project={d.project_id}"])
    if enabled.ok:
        out += api_findings(d, [s.get("config", {}).get("name", "") for s in enabled.data or []])
    else:
        out.append(_unknown("APIs", enabled))
    topic = gcloud(["pubsub", "topics", "describe", "gcr", f"--project={d.project_id}"])
    if topic.ok:
        out.append(Finding(Level.OK, "gcr topic", "exists"))
    elif topic.not_found:
        why = f"missing: gcloud pubsub topics create gcr --project {d.project_id}"
        out.append(Finding(Level.FAIL, "gcr topic", why))
    else:
        out.append(_unknown("gcr topic", topic))
    where = [f"--location={d.registry_location}", f"--project={d.project_id}"]
    repo = gcloud(["artifacts", "repositories", "describe", d.repository_id, *where])
    if repo.not_found:
        out.append(Finding(Level.FAIL, "snapshot repository", "missing (the module only grants)"))
    elif not repo.ok:
        out.append(_unknown("snapshot repository", repo))
    elif (fmt := (repo.data or {}).get("format")) != "DOCKER":
        shown = "not set" if fmt is None else json.dumps(fmt, ensure_ascii=False)  # as Terraform
        out.append(Finding(Level.FAIL, "snapshot repository", f"format {shown}, not DOCKER"))
    else:
        out.append(Finding(Level.OK, "snapshot repository", "a Docker repository"))
    policy = gcloud(["projects", "get-iam-policy", d.project_id])
    if policy.ok:
        out += data_write_findings(d, policy.data or {})
    else:
        out.append(_unknown("Data Access logs", policy))
    return out


def _bound(bindings: Iterable[Mapping[str, Any]], role: str) -> set[str]:
    users: set[str] = set()
    for b in bindings:
        ref = b.get("roleRef") or {}
        if ref.get("kind") == "ClusterRole" and ref.get("name") == role:
            users |= {s.get("name", "") for s in b.get("subjects") or [] if s.get("kind") == "User"}
    return users


def rbac_findings(
    d: Deploy,
    cluster_bindings: Iterable[Mapping[str, Any]],
    namespace_bindings: Mapping[str, Iterable[Mapping[str, Any]]],
) -> list[Finding]:
    """The bindings Terraform's kubernetes_rbac_manifest creates, checked."""
    want = d.runtime_users()
    level, why = Level.OK, f"{READER_ROLE} bound to every runtime account"
    if missing := sorted(want - _bound(cluster_bindings, READER_ROLE)):
        level = Level.FAIL
        why = (
            f"no ClusterRoleBinding to {READER_ROLE} for {', '.join(missing)} "
            "(apply it: terraform output -raw kubernetes_rbac_manifest | kubectl apply -f -)"
        )
    out = [Finding(level, "RBAC cluster reads", why)]
    if not d.namespaces:
        why = (
            "not checked: namespaces is empty: list every namespace that holds CocoonSets "
            "in rbac_namespaces and apply kubernetes_rbac_manifest"
        )
        out.append(Finding(Level.UNCHECKED, "RBAC namespace writes", why))
    for ns in d.namespaces:
        if missing := sorted(want - _bound(namespace_bindings.get(ns, ()), WRITER_ROLE)):
            why = (
                f"no RoleBinding to {WRITER_ROLE} for {', '.join(missing)} "
                "(apply kubernetes_rbac_manifest: it binds every namespace in namespaces)"
            )
            out.append(Finding(Level.FAIL, f"RBAC writes in {ns}", why))
        else:
            out.append(Finding(Level.OK, f"RBAC writes in {ns}", f"{WRITER_ROLE} bound"))
    return out


def kube_findings(d: Deploy, kubeconfig: Path | None, context: str | None = None) -> list[Finding]:
    from cocoon_hibernation._kube import cli_settings, kube_client  # noqa: PLC0415 - lazy
    from shared.errors import CocoonError  # noqa: PLC0415 - lazy

    try:
        client = kube_client(cli_settings(kubeconfig, context))
        cluster = client.list_role_bindings(None)
        per_ns = {ns: client.list_role_bindings(ns) for ns in d.namespaces}
    except CocoonError as err:
        return [Finding(Level.UNCHECKED, "RBAC", f"not checked: {err}")]
    admission = admission_findings(client, users=d.runtime_users(), namespaces=d.namespaces)
    return rbac_findings(d, cluster, per_ns) + admission


def _render(findings: Sequence[Finding], output: str) -> None:
    if output == "text":
        # One line per finding, greppable: `FAIL  region: "europe-west1-b": ...`.
        for f in findings:
            click.echo(f"{f.level.value:<4}  {f.check}: {f.message}")
    elif output == "table":
        rows = [(f.level.value, f.check, f.message) for f in findings]
        echo_table(("LEVEL", "CHECK", "MESSAGE"), rows, gap="  ")
    else:
        emit_structured([asdict(f) for f in findings], output)


@click.command(name="deploy-check", epilog=EXIT_CODES_HELP)
@click.option(
    "--var-file",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    default=Path("terraform/examples/gke/terraform.tfvars"),
    show_default=True,
    help="The tfvars (or .tfvars.json) file the apply will use.",
)
@click.option(
    "--root",
    type=click.Path(exists=True, file_okay=False, path_type=Path),
    help="The Terraform root module [default: the var-file's directory].",
)
@click.option("--terraform", help="The terraform (or tofu) binary [default: PATH].")
@click.option("--offline", is_flag=True, help="No gcloud, cluster or `terraform plan`.")
@output_choice(
    ("text", "table", "json", "yaml"),
    "Output format: text (a line per finding), table (aligned columns), json, yaml.",
)
@allow_unchecked_option
@kube_options
def command(
    var_file: Path,
    root: Path | None,
    terraform: str | None,
    offline: bool,
    output: str,
    allow_unchecked: bool,
    kubeconfig: Path | None,
    context: str | None,
) -> None:
    """Report what would fail before `terraform apply` (nothing is changed).

    Each finding is ok, warn, skip (not checked: no terraform or providers, no gcloud, no
    cluster) or FAIL. A skip fails the command unless --allow-unchecked."""
    binary = tfcheck.find_terraform(terraform)
    try:
        result = tfcheck.check(binary, root or var_file.parent, var_file, plan=not offline)
    except tfcheck.UsageError as err:
        fail(str(err), code=EXIT_USAGE)
    findings, values = result.findings, result.values
    if values is None and var_file.name.endswith(".json"):
        # Without Terraform a JSON tfvars is still plain JSON: the other checks need its values.
        try:
            loaded = json.loads(var_file.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, ValueError) as err:
            fail(f"{var_file}: {err}", code=EXIT_USAGE)
        values = loaded if isinstance(loaded, dict) else None
    if values is None:
        why = "not checked: Terraform did not read them"
        findings.append(Finding(Level.UNCHECKED, "tfvars", why))
        values = {}
    findings += offline_findings(values)
    # The cloud checks need to know which project, region and repository to ask about.
    if not offline and all(values.get(r) for r in _CLOUD_INPUTS):
        d = deploy_from(values)
        gcloud = shutil.which("gcloud")
        if gcloud is None:
            why = "not installed: cloud checks not checked"
            findings.append(Finding(Level.UNCHECKED, "gcloud", why))
        else:
            findings += cloud_findings(d, gcloud_runner(gcloud))
        findings += kube_findings(d, kubeconfig, context)
    _render(findings, output)
    failed = sum(f.level is Level.FAIL for f in findings)
    unchecked = 0 if allow_unchecked else sum(f.level is Level.UNCHECKED for f in findings)
    if failed:
        fail(f"{failed} check(s) failed")
    if unchecked:
        fail(f"{unchecked} check(s) not checked (--allow-unchecked accepts that)")
