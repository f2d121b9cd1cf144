"""`cocoon-hibernation deploy-check`: the checks that need no cloud.

The tfvars reader is judged by python-hcl2 (a real HCL parser) on the
example's file; the command's copies of the module's defaults and formats
are held to the module's own text; the RBAC check reads the real binding
manifests of infra/k8s as a cluster would hold them once applied. The gcloud
checks are exercised on the documented answer shapes (no project here).
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
from cocoon_hibernation.tfvars import TfvarsError, parse_tfvars, read_tfvars
from tests.conftest import REPO_ROOT
from tests.deploy._hcl import EXAMPLE_DIR, MODULE_DIR, load_dir, names, parse_file

TFVARS_EXAMPLE = EXAMPLE_DIR / "terraform.tfvars.example"


# --- the tfvars reader ----------------------------------------------------------------


def test_reads_the_example_as_hcl_does() -> None:
    assert read_tfvars(TFVARS_EXAMPLE) == parse_file(TFVARS_EXAMPLE)


def test_reads_every_literal_form() -> None:
    text = """
    # comment
    a = "x\\"y\\n"   // trailing comment
    b = 3
    c = 1.5
    d = true
    e = null
    f = ["p", "q",]
    /* block
       comment */
    g = {
      name     = "agents"
      "quoted" = 2, other: false
    }
    h = <<-EOT
      line one
        line two
    EOT
    i = "$${literal}"
    """
    assert parse_tfvars(text) == {
        "a": 'x"y\n',
        "b": 3,
        "c": 1.5,
        "d": True,
        "e": None,
        "f": ["p", "q"],
        "g": {"name": "agents", "quoted": 2, "other": False},
        "h": "line one\n  line two\n",
        "i": "${literal}",
    }


@pytest.mark.parametrize(
    ("text", "line"),
    [
        ("region = var.region\n", 1),
        ('a = "x"\nb = "${var.x}"\n', 2),
        ('a = upper("x")\n', 1),
        ('a = "x"\na = "y"\n', 2),
        ('a = "unterminated\n', 1),
        ('a = ["x" "y"]\n', 1),
    ],
)
def test_refuses_what_is_not_a_literal_with_its_line(text: str, line: int) -> None:
    with pytest.raises(TfvarsError, match=rf"^f.tfvars:{line}: "):
        parse_tfvars(text, "f.tfvars")


def test_reads_tfvars_json(tmp_path: Path) -> None:
    path = tmp_path / "x.tfvars.json"
    path.write_text(json.dumps({"project_id": "acme-prod", "namespaces": ["a"]}), encoding="utf-8")
    assert read_tfvars(path) == {"project_id": "acme-prod", "namespaces": ["a"]}
    path.write_text("[1]", encoding="utf-8")
    with pytest.raises(TfvarsError):
        read_tfvars(path)


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


def test_the_variables_are_the_modules_and_the_examples() -> None:
    module, example = set(load_dir(MODULE_DIR).variables), set(load_dir(EXAMPLE_DIR).variables)
    assert set(dc.MODULE_VARIABLES) == module | example
    assert set(dc.declared_variables(TFVARS_EXAMPLE)) == set(load_dir(EXAMPLE_DIR).variables)


def test_rbac_role_names_are_the_manifests() -> None:
    docs = list(yaml.safe_load_all((REPO_ROOT / "infra/k8s/rbac.yaml").read_text("utf-8")))
    roles = {d["metadata"]["name"] for d in docs if d and d["kind"] == "ClusterRole"}
    assert {dc.READER_ROLE, dc.WRITER_ROLE} <= roles


# --- offline checks ------------------------------------------------------------------------


def _values(**over: Any) -> dict[str, Any]:
    values = read_tfvars(TFVARS_EXAMPLE)
    values.update(over)
    return values


def _levels(findings: list[dc.Finding]) -> dict[str, str]:
    return {f.check: f.level.value for f in findings}


def test_the_example_passes_offline() -> None:
    found = dc.offline_findings(_values())
    assert all(f.level is dc.Level.OK for f in found), found


@pytest.mark.parametrize("region", ["europe-west10", "europe-west12", "me-central2", "us-east5"])
def test_two_digit_and_short_regions_pass(region: str) -> None:
    values = _values(region=region, gke_cluster={"name": "a", "location": f"{region}-a"})
    assert _levels(dc.offline_findings(values))["region"] == "ok"
    assert _levels(dc.offline_findings(values))["gke_cluster.location"] == "ok"


def test_a_zone_is_not_a_region() -> None:
    assert _levels(dc.offline_findings(_values(region="europe-west1-b")))["region"] == "FAIL"


def test_a_missing_required_input_fails() -> None:
    values = _values()
    del values["artifact_registry"]
    assert _levels(dc.offline_findings(values))["input artifact_registry"] == "FAIL"


def test_a_misspelt_variable_is_refused_with_the_nearest_name(tmp_path: Path) -> None:
    # `cocoon_opertor = "absent"` passed before: the default "present" stayed in force.
    path = tmp_path / "t.tfvars.json"
    path.write_text(json.dumps({**_values(), "cocoon_opertor": "absent"}), "utf-8")
    result = CliRunner().invoke(cli, ["deploy-check", "--var-file", str(path), "--offline"])
    assert result.exit_code == 1
    assert (
        "FAIL  input cocoon_opertor: not a variable of the module: the apply ignores it; "
        "did you mean cocoon_operator?"
    ) in result.stdout.splitlines()
    assert result.stderr == "error: 1 check(s) failed\n"


def test_every_finding_is_reported_at_once_and_none_is_never_shown(tmp_path: Path) -> None:
    # A missing required input used to end the checks: the bad region, the typo and the
    # half-filled registry below must all be reported by the same run.
    values = _values(region="europe-west1-b", sweep_schedul="*/5 * * * *")
    del values["project_id"]
    values["artifact_registry"] = {"location": "europe-west1"}
    path = tmp_path / "t.tfvars.json"
    path.write_text(json.dumps(values), "utf-8")
    result = CliRunner().invoke(cli, ["deploy-check", "--var-file", str(path), "--offline"])
    assert result.exit_code == 1
    failed = [line for line in result.stdout.splitlines() if line.startswith("FAIL")]
    assert [line.split(":")[0] for line in failed] == [
        "FAIL  input sweep_schedul",
        "FAIL  input project_id",
        "FAIL  region",
        "FAIL  artifact_registry.repository_id",
    ]
    assert "None" not in result.stdout
    assert "FAIL  artifact_registry.repository_id: not set:" in result.stdout
    assert result.stderr == "error: 4 check(s) failed\n"


def test_the_table_is_not_the_text(tmp_path: Path) -> None:
    args = ["deploy-check", "--var-file", str(TFVARS_EXAMPLE), "--offline"]
    text = CliRunner().invoke(cli, args).stdout.splitlines()
    table = CliRunner().invoke(cli, [*args, "-o", "table"]).stdout.splitlines()
    assert text[0] == "ok    input project_id: set"
    assert table[0].split() == ["LEVEL", "CHECK", "MESSAGE"]
    assert table[1].split() == ["ok", "input", "project_id", "set"]
    assert len(table) == len(text) + 1


def test_a_bad_wake_deadline_fails() -> None:
    assert _levels(dc.offline_findings(_values(wake_deadline="1.5h")))["wake_deadline"] == "FAIL"


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


def test_command_offline_on_the_example(tmp_path: Path) -> None:
    result = CliRunner().invoke(
        cli, ["deploy-check", "--var-file", str(TFVARS_EXAMPLE), "--offline", "-o", "json"]
    )
    assert result.exit_code == 0, result.output
    found = json.loads(result.output)
    assert {f["level"] for f in found} == {"ok"}


def test_command_fails_on_a_bad_region(tmp_path: Path) -> None:
    path = tmp_path / "t.tfvars"
    text = TFVARS_EXAMPLE.read_text(encoding="utf-8")
    path.write_text(re.sub(r'region\s*=\s*"[^"]+"', 'region = "europe-west1-b"', text, count=1))
    result = CliRunner().invoke(cli, ["deploy-check", "--var-file", str(path), "--offline"])
    assert result.exit_code == 1
    assert (
        'FAIL  region: "europe-west1-b": region must be a Google Cloud region such as '
        "europe-west1." in result.output
    )


def test_command_refuses_an_unreadable_file_in_one_line(tmp_path: Path) -> None:
    path = tmp_path / "t.tfvars"
    path.write_text("project_id = var.x\n", encoding="utf-8")
    result = CliRunner().invoke(cli, ["deploy-check", "--var-file", str(path)])
    assert result.exit_code == 2
    assert result.output.strip().count("\n") == 0 and "t.tfvars:1:" in result.output


def test_command_without_gcloud_or_cluster_fails_unless_allowed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Nothing can be checked in the cloud: that is no pass (it exited 0 on the old main).
    monkeypatch.setenv("PATH", str(tmp_path))  # no gcloud there
    monkeypatch.setenv("HOME", str(tmp_path))  # no ~/.kube/config
    monkeypatch.delenv("KUBECONFIG", raising=False)
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    args = ["deploy-check", "--var-file", str(TFVARS_EXAMPLE)]
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 1, result.output
    assert "skip  gcloud: not installed" in result.output
    assert "skip  RBAC: not checked: no kubeconfig" in result.output
    assert "error: 2 check(s) not checked (--allow-unchecked accepts" in result.output
    allowed = CliRunner().invoke(cli, [*args, "--allow-unchecked"])
    assert allowed.exit_code == 0, allowed.output
    assert "skip  gcloud: not installed" in allowed.output


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
    tmp_path: Path, variable: str, value: Any, message: str
) -> None:
    # Both were accepted (exit 0) on the old main; the module's validations refuse them.
    path = tmp_path / "t.tfvars.json"
    path.write_text(json.dumps({**read_tfvars(TFVARS_EXAMPLE), variable: value}), "utf-8")
    result = CliRunner().invoke(cli, ["deploy-check", "--var-file", str(path), "--offline"])
    assert result.exit_code == 1, result.output
    assert f"FAIL  {variable}: {json.dumps(value)}: {message}" in result.output
