"""deploy-check's copy of the module's variable validations (cocoon_hibernation/tfrules.py).

Held to the module two ways: every `validation` block of variables.tf (the
module's and the example's) has its rule with the same error message, and
`terraform console` evaluates the module's own condition text on a table of
values that the rule must judge alike (Terraform's RE2 and functions, no provider).
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from cocoon_hibernation.tfrules import MODULE_RULES, Rule, judge
from tests.deploy._hcl import EXAMPLE_DIR, MODULE_DIR, load_dir
from tests.deploy._terraform import console

LONG = "a" * 64
OBJ_CLUSTER = {"name": "agents", "location": "europe-west1"}
OBJ_REGISTRY = {"location": "europe-west1", "repository_id": "snapshots"}

# Values per (variable, validation index): each table holds accepted and rejected ones.
VALUES: dict[tuple[str, int], list[Any]] = {
    ("project_id", 0): ["acme-prod", "abcdef", "a", "Acme-prod", "acme-prod-", "a" * 31],
    ("region", 0): ["europe-west1", "europe-west12", "europe-west1-b", "us", "europe-west1\n"],
    ("name_prefix", 0): [
        "cocoon",
        "abc",
        "ab",
        "Cocoon",
        "coc-",
        "a-b-c-d-e-f-g",
        "abcdefghijklmn",
    ],
    ("gke_cluster", 0): [
        OBJ_CLUSTER,
        {**OBJ_CLUSTER, "name": "Agents"},
        {**OBJ_CLUSTER, "name": "a" * 40},
        {**OBJ_CLUSTER, "name": "a" * 41},
        {**OBJ_CLUSTER, "name": "a-"},
    ],
    ("gke_cluster", 1): [
        OBJ_CLUSTER,
        {**OBJ_CLUSTER, "location": "europe-west1-b"},
        {**OBJ_CLUSTER, "location": "europe"},
        {**OBJ_CLUSTER, "location": "europe-west1-bb"},
    ],
    ("kube_server_override", 0): [
        "https://10.0.0.2",
        "https://x.gke.goog/path",
        "http://10.0.0.2",
        "https://",
        "https://a b",
    ],
    ("vpc_connector", 0): [
        "projects/p/locations/r/connectors/c",
        "projects/p/connectors/c",
        "projects/p/locations/r/connectors/c/x",
    ],
    ("namespaces", 0): [["agents"], [], ["Agents"], ["a", "-b"], [LONG]],
    ("audit_methods", 0): [
        ["io.k8s.core.v1.pods.patch"],
        ["io.cocoonstack.cocoonset.v1.cocoonsets.status.patch"],
        [],
        ["io.k8s.core.v1.pods.get"],
        ["io.k8s.core.v1.pods.patch", "io.k8s.core.v1.nodes.patch"],
    ],
    ("pod_status_audit_methods", 0): [
        [],
        ["io.k8s.core.v1.pods.status.patch"],
        ["io.k8s.core.v1.pods.patch"],
        ["io.k8s.core.v1.pods.status.create"],
    ],
    ("eventarc_agent_wait", 0): ["120s", "3m", "1h", "1.5m", "s", "10"],
    ("log_metric_wait", 0): ["300s", "10m", "1h", "5 m"],
    ("artifact_registry", 0): [
        OBJ_REGISTRY,
        {**OBJ_REGISTRY, "location": "us"},
        {**OBJ_REGISTRY, "location": "europe-west1-b"},
        {**OBJ_REGISTRY, "location": "global"},
    ],
    ("artifact_registry", 1): [
        OBJ_REGISTRY,
        {**OBJ_REGISTRY, "repository_id": "Snapshots"},
        {**OBJ_REGISTRY, "repository_id": "s" * 64},
        {**OBJ_REGISTRY, "repository_id": "s-"},
    ],
    ("sweep_schedule", 0): [
        "* * * * *",
        " */5 * * * * ",
        "every minute",
        "*  * * * *",
        "0 0 * * * *",
    ],
    ("wake_deadline", 0): ["90s", "10m", "1h30m", "2d", "100ms", "0s", "1.5h", "", "10"],
    ("seat_reclaim_grace", 0): ["off", "30s", "2m", "0s", "Off", "30"],
    ("cocoon_operator", 0): ["present", "absent", "Absent", "none", ""],
    ("seat_order", 0): ["gate", "off", "Gate", "fifo"],
    ("sweep_max_suspends", 0): [0, 5, 50, -1, 1.5],
    ("max_instances", 0): [1, 100, 0, 101],
    ("dead_letter_retention", 0): ["600s", "604800s", "2678400s", "599s", "2678401s", "7d"],
    ("dead_letter_max_delivery_attempts", 0): [5, 100, 4, 101],
    ("ingest_ingress", 0): ["ALLOW_ALL", "ALLOW_INTERNAL_ONLY", "allow_all", "INTERNAL"],
    ("ingest_invoker_members", 0): [
        [],
        ["serviceAccount:relay@acme-prod.iam.gserviceaccount.com"],
        ["user:a@example.com", "group:g@example.com"],
        ["allUsers"],
        ["allAuthenticatedUsers"],
        ["serviceAccount:"],
    ],
    ("wake_publishers", 0): [
        [],
        ["serviceAccount:portal@acme-prod.iam.gserviceaccount.com"],
        ["allUsers"],
        ["allAuthenticatedUsers"],
    ],
    ("ingest_push_service_accounts", 0): [
        ["push@acme-prod.iam.gserviceaccount.com"],
        ["PUSH@ACME-PROD.IAM.GSERVICEACCOUNT.COM"],
        ["me@gmail.com"],
    ],
    ("alert_notification_channels", 0): [
        ["projects/p/notificationChannels/1"],
        ["1234"],
        ["projects/p/notificationChannels/"],
    ],
    ("environment", 0): ["prod", "a" * 63, "Prod", LONG, ""],
    ("rbac_namespaces", 0): [["agents"], [], ["Agents"], ["a", "-b"]],
    ("alert_stuck_suspending_after", 0): ["1800s", "600s", "599s", "30m", "86401s", "x"],
    ("alert_function_errors", 0): [0, 5, -1, 1.5],
}


def _validations(directory: Path) -> dict[tuple[str, int], str]:
    """(variable, index) -> error_message of every validation block in a directory."""
    out: dict[tuple[str, int], str] = {}
    for name, body in load_dir(directory).variables.items():
        for i, block in enumerate(body.get("validation") or []):
            out[(name, i)] = block["error_message"]
    return out


def _source(rule: Rule) -> Path:
    return (EXAMPLE_DIR if rule.example_only else MODULE_DIR) / "variables.tf"


def condition_text(variables_tf: Path, variable: str, index: int) -> str:
    """The index-th `condition = ...` of `variable`, over as many lines as its brackets span."""
    text = variables_tf.read_text(encoding="utf-8")
    start = text.index(f'variable "{variable}" {{')
    end = text.find('\nvariable "', start + 1)
    block = text[start : end if end != -1 else len(text)]
    found = list(re.finditer(r"^\s*condition\s*=\s*", block, flags=re.MULTILINE))
    pos = found[index].end()
    depth, out, in_string = 0, [], False
    for i in range(pos, len(block)):
        ch = block[i]
        if ch == '"' and block[i - 1] != "\\":
            in_string = not in_string
        elif not in_string and ch in "([{":
            depth += 1
        elif not in_string and ch in ")]}":
            depth -= 1
        elif ch == "\n" and depth == 0 and not in_string:
            break
        out.append(ch)
    return " ".join("".join(out).split("\n")).strip()


def test_every_module_validation_has_its_rule_with_the_module_message() -> None:
    module = _validations(MODULE_DIR)
    example = _validations(EXAMPLE_DIR)
    ours = {(r.variable, r.index): r for r in MODULE_RULES}
    assert {key for key, r in ours.items() if not r.example_only} == set(module)
    assert {key for key, r in ours.items() if r.example_only} == set(example)
    for key, rule in ours.items():
        assert rule.message == (example if rule.example_only else module)[key], key


def test_every_rule_has_a_table_that_accepts_and_rejects() -> None:
    assert set(VALUES) == {(r.variable, r.index) for r in MODULE_RULES}
    for rule in MODULE_RULES:
        verdicts = {judge(rule, v).ok for v in VALUES[(rule.variable, rule.index)]}
        assert verdicts == {True, False}, rule.check


def test_rules_judge_as_terraform_does(tmp_path: Path) -> None:
    # One console run for every rule: {"<variable>/<index>" = [for v in values : condition]}.
    parts = []
    for rule in MODULE_RULES:
        condition = condition_text(_source(rule), rule.variable, rule.index)
        expr = re.sub(rf"\bvar\.{rule.variable}\b", "v", condition)
        assert "var." not in expr, expr
        values = json.dumps(VALUES[(rule.variable, rule.index)])
        parts.append(f'"{rule.variable}/{rule.index}" = [for v in {values} : {expr}]')
    verdicts = console(tmp_path, "{" + ", ".join(parts) + "}")
    for rule in MODULE_RULES:
        values = VALUES[(rule.variable, rule.index)]
        ours = [judge(rule, v).ok for v in values]
        theirs = verdicts[f"{rule.variable}/{rule.index}"]
        disagree = [v for v, a, b in zip(values, ours, theirs, strict=True) if a != b]
        assert not disagree, f"{rule.check}: tfrules and Terraform disagree on {disagree}"


@pytest.mark.parametrize(
    ("variable", "value"),
    [("ingest_invoker_members", ["allUsers"]), ("sweep_schedule", "every minute")],
)
def test_the_issue_examples_fail(variable: str, value: Any) -> None:
    rule = next(r for r in MODULE_RULES if r.variable == variable)
    assert judge(rule, value).ok is False
