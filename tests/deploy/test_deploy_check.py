"""`cocoon-hibernation deploy-check`: the real terraform on the example, then the Python checks.

Terraform runs with a CLI config whose only provider source is an empty mirror, so `validate`
and `plan` of the module are a `skip` here (as without the registry) and the provider-less
root in `tiny` shows them passing and failing. The gcloud checks run on documented answer shapes.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner

from cocoon_hibernation import cmd_deploy_check as dc
from cocoon_hibernation.main import main as cli
from tests.conftest import REPO_ROOT
from tests.deploy._hcl import EXAMPLE_DIR, MODULE_DIR, load_dir, names, parse_file
from tests.deploy._terraform import terraform_binary

TFVARS_EXAMPLE = EXAMPLE_DIR / "terraform.tfvars.example"


@pytest.fixture
def tf(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    """The terraform binary, with no provider to install (as on a machine without the registry)."""
    (tmp_path / "mirror").mkdir()
    config = tmp_path / "terraformrc"
    config.write_text(
        f'provider_installation {{\n  filesystem_mirror {{\n    path = "{tmp_path / "mirror"}"'
        "\n  }\n}\n",
        encoding="utf-8",
    )
    monkeypatch.setenv("TF_CLI_CONFIG_FILE", str(config))
    return terraform_binary()


def _run(tf: str, *args: str, env: dict[str, str] | None = None) -> Any:
    return CliRunner(env=env).invoke(cli, ["deploy-check", "--terraform", tf, *args])


# --- the command's copies agree with the module ------------------------------------------


def test_apis_and_defaults_are_the_module_ones() -> None:
    module = load_dir(MODULE_DIR)
    assert set(dc.MODULE_APIS) == names(module.locals["apis"])
    assert list(dc.DEFAULT_AUDIT_METHODS) == module.variables["audit_methods"]["default"]
    assert (
        list(dc.DEFAULT_POD_STATUS_METHODS)
        == module.variables["pod_status_audit_methods"]["default"]
    )
    assert set(dc.FUNCTIONS) == names(module.locals["functions"])


def test_rbac_role_names_are_the_manifests() -> None:
    docs = list(yaml.safe_load_all((REPO_ROOT / "infra/k8s/rbac.yaml").read_text("utf-8")))
    roles = {d["metadata"]["name"] for d in docs if d and d["kind"] == "ClusterRole"}
    assert {dc.READER_ROLE, dc.WRITER_ROLE} <= roles


# --- offline checks ------------------------------------------------------------------------


def _values(**over: Any) -> dict[str, Any]:
    values = parse_file(TFVARS_EXAMPLE)
    values.update(over)
    return values


def _levels(findings: list[dc.Finding]) -> dict[str, str]:
    return {f.check: f.level.value for f in findings}


def _write(tmp_path: Path, values: dict[str, Any]) -> str:
    path = tmp_path / "t.tfvars.json"
    path.write_text(json.dumps(values), "utf-8")
    return str(path)


def _example(tmp_path: Path, **over: Any) -> list[str]:
    return ["--var-file", _write(tmp_path, _values(**over)), "--root", str(EXAMPLE_DIR)]


def test_the_example_passes_terraform_and_says_what_it_could_not_check(tf: str) -> None:
    before = sorted(p.name for p in EXAMPLE_DIR.iterdir())
    result = _run(tf, "--var-file", str(TFVARS_EXAMPLE), "--offline")
    assert sorted(p.name for p in EXAMPLE_DIR.iterdir()) == before  # nothing left behind
    assert result.exit_code == 1, result.output
    lines = result.stdout.splitlines()
    assert "ok    region: europe-west1" in lines
    assert "ok    wake_deadline: default" in lines  # judged by the module's own validation
    (skip,) = [line for line in lines if not line.startswith("ok")]
    assert skip.startswith("skip  terraform validate: not checked: terraform init (providers): ")
    assert result.stderr == "error: 1 check(s) not checked (--allow-unchecked accepts that)\n"
    allowed = _run(tf, "--var-file", str(TFVARS_EXAMPLE), "--offline", "--allow-unchecked")
    assert allowed.exit_code == 0, allowed.output


@pytest.mark.parametrize("region", ["europe-west10", "europe-west12", "me-central2", "us-east5"])
def test_two_digit_and_short_regions_pass(tf: str, tmp_path: Path, region: str) -> None:
    args = _example(tmp_path, region=region, gke_cluster={"name": "a", "location": f"{region}-a"})
    result = _run(tf, *args, "--offline", "--allow-unchecked")
    assert result.exit_code == 0, result.output


def test_a_misspelt_variable_is_refused_with_the_nearest_name(tf: str, tmp_path: Path) -> None:
    # `cocoon_opertor = "absent"` passed before: the default "present" stayed in force.
    result = _run(tf, *_example(tmp_path, cocoon_opertor="absent"), "--offline")
    assert result.exit_code == 1
    assert (
        "FAIL  input cocoon_opertor: not a variable of the module: the apply ignores it; "
        "did you mean cocoon_operator?"
    ) in result.stdout.splitlines()
    assert result.stderr == "error: 1 check(s) failed\n"


def test_every_finding_is_reported_at_once_and_none_is_never_shown(tf: str, tmp_path: Path) -> None:
    # A missing required input does not stop Terraform judging the others.
    values = _values(region="europe-west1-b", sweep_schedul="*/5 * * * *", wake_deadline="1.5h")
    del values["project_id"]
    values["artifact_registry"] = {"location": "europe-west1"}
    args = ["--var-file", _write(tmp_path, values), "--root", str(EXAMPLE_DIR), "--offline"]
    result = _run(tf, *args)
    assert result.exit_code == 1
    failed = [line for line in result.stdout.splitlines() if line.startswith("FAIL")]
    assert [line.split(":")[0] for line in failed] == [
        "FAIL  input project_id",
        "FAIL  input sweep_schedul",
        "FAIL  artifact_registry",
        "FAIL  region",
        "FAIL  wake_deadline",
    ]
    assert "None" not in result.stdout
    assert 'attribute "repository_id" is required' in result.stdout
    assert result.stderr == "error: 5 check(s) failed\n"


def test_the_table_is_not_the_text(tf: str) -> None:
    args = ["--var-file", str(TFVARS_EXAMPLE), "--offline"]
    text = _run(tf, *args).stdout.splitlines()
    table = _run(tf, *args, "-o", "table").stdout.splitlines()
    assert text[0] == "ok    alert_function_errors: default"
    assert table[0].split() == ["LEVEL", "CHECK", "MESSAGE"]
    assert table[1].split() == ["ok", "alert_function_errors", "default"]
    assert len(table) == len(text) + 1


def test_status_triggers_without_data_write_logs_warn() -> None:
    found = _levels(dc.offline_findings(_values(gke_data_write_audit_logs=False)))
    assert found["status-write triggers"] == "warn"
    quiet = _values(gke_data_write_audit_logs=False, pod_status_audit_methods=[])
    quiet["audit_methods"] = ["io.k8s.core.v1.pods.update"]
    assert "status-write triggers" not in _levels(dc.offline_findings(quiet))


# --- gcloud answers (documented shapes) ---------------------------------------------------


def test_data_write_logs_read_from_the_iam_policy() -> None:
    d = dc.deploy_from(_values())
    on = {
        "auditConfigs": [{"service": "allServices", "auditLogConfigs": [{"logType": "DATA_WRITE"}]}]
    }
    assert dc.data_write_findings(d, on)[0].level is dc.Level.OK
    # Off, and the module will turn it on: fine, said.
    assert dc.data_write_findings(d, {})[0].level is dc.Level.OK
    # Off, another config for GKE exists: the apply would replace it.
    other = {
        "auditConfigs": [
            {"service": "container.googleapis.com", "auditLogConfigs": [{"logType": "DATA_READ"}]}
        ]
    }
    assert dc.data_write_findings(d, other)[0].level is dc.Level.WARN
    # Off, and the module may not touch it: the status triggers would never fire.
    hands_off = dc.deploy_from(_values(gke_data_write_audit_logs=False))
    assert dc.data_write_findings(hands_off, {})[0].level is dc.Level.FAIL


def test_apis_off_fail_only_when_the_module_may_not_enable_them() -> None:
    some = ["pubsub.googleapis.com"]
    assert dc.api_findings(dc.deploy_from(_values()), some)[0].level is dc.Level.OK
    fixed = dc.deploy_from(_values(enable_apis=False))
    finding = dc.api_findings(fixed, some)[0]
    assert finding.level is dc.Level.FAIL and "iam.googleapis.com" in finding.message
    assert dc.api_findings(fixed, dc.MODULE_APIS)[0].level is dc.Level.OK


def test_cloud_checks_tell_absent_from_unreadable() -> None:
    d = dc.deploy_from(_values())

    def gcloud(args: Any) -> dc.Answer:
        if args[:2] == ["pubsub", "topics"]:
            return dc.Answer(not_found=True)
        if args[0] == "artifacts":
            return dc.Answer(data={"format": "DOCKER"})
        return dc.Answer(error="ERROR: permission denied")

    found = _levels(dc.cloud_findings(d, gcloud))
    assert found == {
        "APIs": "skip",
        "gcr topic": "FAIL",
        "snapshot repository": "ok",
        "Data Access logs": "skip",
    }


# --- RBAC, from the real binding manifests --------------------------------------------------


def _rendered(name: str, project: str, namespace: str = "") -> dict[str, Any]:
    text = (REPO_ROOT / "infra" / "k8s" / name).read_text(encoding="utf-8")
    text = text.replace("PROJECT_ID", project).replace("NAMESPACE", namespace)
    doc: dict[str, Any] = yaml.safe_load(text)
    return doc


def test_rbac_applied_as_documented_passes() -> None:
    d = dc.deploy_from(_values(namespaces=["agents", "team-b"]))
    cluster = [_rendered("gke-binding.yaml", "acme-prod")]
    per_ns = {ns: [_rendered("namespace-binding.yaml", "acme-prod", ns)] for ns in d.namespaces}
    found = dc.rbac_findings(d, cluster, per_ns)
    assert all(f.level is dc.Level.OK for f in found), found


def test_rbac_missing_namespace_or_other_project_fails() -> None:
    d = dc.deploy_from(_values(namespaces=["agents", "team-b"]))
    cluster = [_rendered("gke-binding.yaml", "other-project")]
    per_ns = {"agents": [_rendered("namespace-binding.yaml", "acme-prod", "agents")]}
    found = _levels(dc.rbac_findings(d, cluster, per_ns))
    assert found == {
        "RBAC cluster reads": "FAIL",
        "RBAC writes in agents": "ok",
        "RBAC writes in team-b": "FAIL",
    }


def test_rbac_with_another_prefix_needs_renamed_subjects() -> None:
    d = dc.deploy_from(_values(name_prefix="hib", namespaces=["agents"]))
    per_ns = {"agents": [_rendered("namespace-binding.yaml", "acme-prod", "agents")]}
    found = dc.rbac_findings(d, [], per_ns)
    message = next(f.message for f in found if f.check == "RBAC writes in agents")
    assert "hib-wake@acme-prod.iam.gserviceaccount.com" in message


# --- the command ---------------------------------------------------------------------------


def test_command_fails_on_a_bad_region(tf: str, tmp_path: Path) -> None:
    path = tmp_path / "t.tfvars"
    text = TFVARS_EXAMPLE.read_text(encoding="utf-8")
    path.write_text(re.sub(r'region\s*=\s*"[^"]+"', 'region = "europe-west1-b"', text, count=1))
    result = _run(tf, "--var-file", str(path), "--root", str(EXAMPLE_DIR), "--offline")
    assert result.exit_code == 1
    assert (
        'FAIL  region: "europe-west1-b": region must be a Google Cloud region such as '
        "europe-west1." in result.output
    )


def test_command_refuses_an_unreadable_file_in_one_line(tf: str, tmp_path: Path) -> None:
    path = tmp_path / "t.tfvars"
    path.write_text("project_id = var.x\n", encoding="utf-8")
    result = _run(tf, "--var-file", str(path), "--root", str(EXAMPLE_DIR))
    assert result.exit_code == 2
    assert result.output.strip().count("\n") == 0 and "t.tfvars:1: " in result.output
    assert "Variables not allowed" in result.output


def test_command_without_gcloud_or_cluster_fails_unless_allowed(
    tf: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Nothing can be checked in the cloud: that is no pass (it exited 0 on the old main).
    monkeypatch.setenv("PATH", str(tmp_path))  # no gcloud there
    monkeypatch.setenv("HOME", str(tmp_path))  # no ~/.kube/config
    monkeypatch.delenv("KUBECONFIG", raising=False)
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    args = ["--var-file", str(TFVARS_EXAMPLE)]
    result = _run(tf, *args)
    assert result.exit_code == 1, result.output
    assert "skip  gcloud: not installed" in result.output
    assert "skip  RBAC: not checked: no kubeconfig" in result.output
    assert "skip  terraform plan: not checked: terraform init (providers)" in result.output
    assert "error: 4 check(s) not checked (--allow-unchecked accepts" in result.output
    allowed = _run(tf, *args, "--allow-unchecked")
    assert allowed.exit_code == 0, allowed.output
    assert "skip  gcloud: not installed" in allowed.output


def test_without_terraform_it_says_what_it_did_not_check(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    args = ["deploy-check", "--var-file", _write(tmp_path, _values()), "--offline"]
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 1, result.output
    assert "skip  terraform: not checked: no terraform (or tofu) on PATH" in result.output
    # A JSON tfvars is still read for the checks Python keeps.
    warned = _write(tmp_path, _values(gke_data_write_audit_logs=False))
    allowed = CliRunner().invoke(
        cli, ["deploy-check", "--var-file", warned, "--offline", "--allow-unchecked"]
    )
    assert allowed.exit_code == 0 and "warn  status-write triggers" in allowed.output
    hcl = CliRunner().invoke(cli, ["deploy-check", "--var-file", str(TFVARS_EXAMPLE), "--offline"])
    assert "skip  tfvars: not checked: Terraform did not read them" in hcl.output


def test_gcloud_without_credentials_is_not_a_pass(tmp_path: Path) -> None:
    # A gcloud that answers every call with an error (no credentials): four skips.
    d = dc.deploy_from(_values())
    found = dc.cloud_findings(d, lambda _args: dc.Answer(error="ERROR: no credentials"))
    assert {f.level for f in found} == {dc.Level.UNCHECKED}


@pytest.mark.parametrize(
    ("variable", "value", "message"),
    [
        (
            "ingest_invoker_members",
            ["allUsers"],
            "ingest_invoker_members must be IAM principals like serviceAccount:..., user:..., "
            "group:...; allUsers and allAuthenticatedUsers are not allowed.",
        ),
        (
            "sweep_schedule",
            "every minute",
            "sweep_schedule must be a 5-field unix-cron expression.",
        ),
    ],
)
def test_command_rejects_what_the_module_rejects(
    tf: str, tmp_path: Path, variable: str, value: Any, message: str
) -> None:
    # Both were accepted (exit 0) on an older main; the module's validations refuse them.
    result = _run(tf, *_example(tmp_path, **{variable: value}), "--offline")
    assert result.exit_code == 1, result.output
    assert f"FAIL  {variable}: {json.dumps(value)}: {message}" in result.output


# --- a root without providers: terraform validate and plan really run --------------------


TINY = """
variable "project_id" {
  type = string
}

variable "size" {
  type    = number
  default = 1
}

resource "terraform_data" "seat" {
  input = var.size
  lifecycle {
    precondition {
      condition     = var.size < 10
      error_message = "size must stay below 10."
    }
  }
}
"""


def test_validate_and_plan_run_where_no_provider_is_needed(tf: str, tmp_path: Path) -> None:
    root = tmp_path / "tiny"
    root.mkdir()
    (root / "main.tf").write_text(TINY, encoding="utf-8")
    args = ["--root", str(root), "--allow-unchecked", "-o", "json"]

    def found(values: dict[str, Any], *extra: str) -> dict[str, tuple[str, str]]:
        result = _run(tf, "--var-file", _write(tmp_path, values), *args, *extra)
        return {f["check"]: (f["level"], f["message"]) for f in json.loads(result.stdout)}

    good = found({"project_id": "acme-prod"}, "--offline")
    assert good["terraform validate"] == ("ok", "the configuration is valid")
    assert "terraform plan" not in good  # --offline: no plan
    planned = found({"project_id": "acme-prod"})
    assert planned["terraform plan"] == ("ok", "planned without error")
    refused = found({"project_id": "acme-prod", "size": 12})
    assert refused["terraform plan"][0] == "FAIL"
    assert "size must stay below 10." in refused["terraform plan"][1]
    (root / "main.tf").write_text(TINY + "output x { value = var.nothing }\n", encoding="utf-8")
    broken = found({"project_id": "acme-prod"})
    assert broken["terraform validate"][0] == "FAIL"
    assert "Reference to undeclared input variable" in broken["terraform validate"][1]
    assert sorted(p.name for p in root.iterdir()) == ["main.tf"]


def test_a_plan_that_crashes_without_a_diagnostic_is_a_failure(tf: str, tmp_path: Path) -> None:
    # A Terraform or provider crash prints a panic, not a JSON diagnostic, and cannot
    # be provoked on purpose: the real binary runs every step but plan, which "crashes".
    root = tmp_path / "tiny"
    root.mkdir()
    (root / "main.tf").write_text(TINY, encoding="utf-8")
    crashing = tmp_path / "terraform"
    crashing.write_text(
        '#!/bin/sh\nfor a in "$@"; do [ "$a" = plan ] && plan=1; done\n'
        'if [ -n "$plan" ] && [ -n "$CRASH_ON_PLAN" ]; then\n'
        "  echo 'panic: runtime error: invalid memory address' >&2; exit 11\nfi\n"
        f'exec {tf} "$@"\n',
        encoding="utf-8",
    )
    crashing.chmod(0o755)
    var_file = _write(tmp_path, {"project_id": "acme-prod"})
    args = ["--var-file", var_file, "--root", str(root), "--allow-unchecked", "-o", "json"]
    result = _run(str(crashing), *args, env={"CRASH_ON_PLAN": "1"})
    found = {f["check"]: (f["level"], f["message"]) for f in json.loads(result.stdout)}
    assert found["terraform plan"] == ("FAIL", "panic: runtime error: invalid memory address")
    assert result.exit_code == 1
