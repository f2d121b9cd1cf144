"""The traps of a first production apply (issue 28), one test each.

Read as a user deploying would: the Kubernetes bindings must name the service
accounts the module really creates (any name_prefix, any project); every
module input must be settable from the example; the steps outside Terraform
(source staging, dead letters and ack deadlines, RBAC) must run inside the
apply or in one command; the DATA_WRITE audit config must be conditional and
its cost stated; the alerts must be ones a user keeps, each with a runbook
entry; and nothing in terraform/ or infra/ may cite a document the repository
does not hold.

The google provider cannot be installed here, so the module itself is read
statically (python-hcl2, tests/deploy/_hcl.py). The RBAC submodule needs no
provider: the real Terraform CLI renders it (`terraform console`).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.conftest import REPO_ROOT
from tests.deploy._hcl import EXAMPLE_DIR, MODULE_DIR, TF_ROOT, TfDir, blocks, load_dir, norm
from tests.deploy._terraform import clean_env, terraform_binary

RBAC_DIR = MODULE_DIR / "kubernetes-rbac"
K8S_DIR = REPO_ROOT / "infra" / "k8s"
RUNBOOK = REPO_ROOT / "docs" / "runbook.md"
SCRIPTS = REPO_ROOT / "infra" / "scripts"


@pytest.fixture(scope="module")
def module() -> TfDir:
    return load_dir(MODULE_DIR)


@pytest.fixture(scope="module")
def example() -> TfDir:
    return load_dir(EXAMPLE_DIR)


# --- RBAC from the module's own service accounts ------------------------------------------


def _render_rbac(
    tmp: Path,
    prefix: str,
    project: str,
    namespaces: list[str],
    read_namespaces: tuple[str, ...] = (),
    token_review: bool = False,
) -> list[Any]:
    """The submodule as the module calls it, evaluated by the real Terraform CLI."""
    module = load_dir(MODULE_DIR)
    call = module.modules["kubernetes_rbac"]
    assert call["source"] == "./kubernetes-rbac"
    # The users are the runtime service accounts' emails, whatever their account_id.
    assert norm(call["users"]) == norm(
        "${{for k, sa in google_service_account.runtime : k => sa.email}}"
    )
    account_id = module.resource("google_service_account", "runtime")["account_id"]
    assert account_id == "${var.name_prefix}-${each.key}"
    # What Google makes of account_id: <id>@<project>.iam.gserviceaccount.com.
    users = {fn: f"{prefix}-{fn}@{project}.iam.gserviceaccount.com" for fn in _functions(module)}
    root = tmp / "root"
    root.mkdir()
    shutil.copytree(RBAC_DIR, root / "rbac")
    (root / "main.tf").write_text(
        'module "rbac" {\n  source = "./rbac"\n'
        f"  name_prefix = {json.dumps(prefix)}\n"
        f"  users = {json.dumps(users)}\n"
        f"  namespaces = {json.dumps(namespaces)}\n"
        f"  read_namespaces = {json.dumps(list(read_namespaces))}\n"
        f"  token_review = {json.dumps(token_review)}\n}}\n",
        encoding="utf-8",
    )
    binary = terraform_binary()
    env = clean_env(tmp)
    init = subprocess.run(
        [binary, "init", "-backend=false", "-input=false", "-no-color"],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert init.returncode == 0, init.stderr
    out = subprocess.run(
        [binary, "console", "-no-color"],
        input="jsonencode(module.rbac.manifest)\n",
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert out.returncode == 0, out.stderr
    manifest = json.loads(json.loads(out.stdout.strip().splitlines()[-1]))
    return [d for d in yaml.safe_load_all(manifest) if d]


def _functions(module: TfDir) -> list[str]:
    return sorted(re.findall(r'"?(release|wake|sweep|ingest)"?', module.locals["functions"]))


def test_rbac_names_the_real_service_accounts_for_any_prefix(tmp_path: Path) -> None:
    """name_prefix "acme": the bindings name acme-*@…, never cocoon-*@PROJECT_ID (403s)."""
    docs = _render_rbac(tmp_path, "acme", "acme-prod", ["team-a", "team-b"])
    kinds = [(d["kind"], d["metadata"].get("namespace")) for d in docs]
    assert kinds == [
        ("ClusterRoleBinding", None),
        ("RoleBinding", "team-a"),
        ("RoleBinding", "team-b"),
    ]
    expected = {
        f"acme-{fn}@acme-prod.iam.gserviceaccount.com"
        for fn in ("release", "wake", "sweep", "ingest")
    }
    for doc in docs:
        assert {s["name"] for s in doc["subjects"]} == expected
        assert all(s["kind"] == "User" for s in doc["subjects"])
        # Two instances in one cluster must not overwrite each other's subjects.
        assert doc["metadata"]["name"] == "acme-hibernation-functions"
    roles = {d["metadata"]["name"] for d in yaml.safe_load_all((K8S_DIR / "rbac.yaml").read_text())}
    assert docs[0]["roleRef"]["name"] == "cocoon-hibernation" and "cocoon-hibernation" in roles
    assert {d["roleRef"]["name"] for d in docs[1:]} == {"cocoon-hibernation-writer"} <= roles


def test_token_review_is_bound_cluster_wide_only_when_asked(tmp_path: Path) -> None:
    """TokenReview is cluster-scoped: even with an allowlist its binding is a ClusterRoleBinding."""
    call = load_dir(MODULE_DIR).modules["kubernetes_rbac"]
    assert norm(call["token_review"]) == norm("${var.kubernetes_token_review}")
    docs = _render_rbac(tmp_path, "acme", "acme-prod", ["team-a"], ("team-a",), token_review=True)
    review = docs[-1]
    assert (review["kind"], review["metadata"]["name"]) == (
        "ClusterRoleBinding",
        "acme-hibernation-functions-tokenreview",
    )
    roles = {d["metadata"]["name"] for d in yaml.safe_load_all((K8S_DIR / "rbac.yaml").read_text())}
    assert review["roleRef"]["name"] == "cocoon-hibernation-tokenreview" in roles
    assert review["subjects"] == docs[0]["subjects"]


def test_rbac_for_the_default_prefix_is_the_committed_reference(tmp_path: Path) -> None:
    """infra/k8s/gke-binding.yaml and namespace-binding.yaml are what Terraform renders."""
    docs = _render_rbac(tmp_path, "cocoon", "PROJECT_ID", ["NAMESPACE"])
    cluster = yaml.safe_load((K8S_DIR / "gke-binding.yaml").read_text(encoding="utf-8"))
    per_ns = yaml.safe_load((K8S_DIR / "namespace-binding.yaml").read_text(encoding="utf-8"))

    def canon(doc: dict[str, Any]) -> str:
        doc = dict(doc)
        doc["subjects"] = sorted(doc["subjects"], key=lambda s: s["name"])
        return json.dumps(doc, sort_keys=True)

    assert [canon(d) for d in docs] == [canon(cluster), canon(per_ns)]


def test_rbac_manifest_is_an_output_and_deploy_applies_it(module: TfDir, example: TfDir) -> None:
    assert module.outputs["kubernetes_rbac_manifest"]["value"] == (
        "${module.kubernetes_rbac.manifest}"
    )
    assert example.outputs["kubernetes_rbac_manifest"]["value"] == (
        "${module.cocoon_hibernation.kubernetes_rbac_manifest}"
    )
    docs = "\n".join(
        p.read_text(encoding="utf-8")
        for p in (REPO_ROOT / "README.md", MODULE_DIR / "README.md", K8S_DIR / "gke-binding.yaml")
    )
    # The documented way is the generated manifest, never a hand-edited PROJECT_ID.
    assert "output -raw kubernetes_rbac_manifest | kubectl apply -f -" in docs
    assert "sed 's/PROJECT_ID" not in docs and 'sed -e "s/PROJECT_ID' not in docs


# --- the example exposes every input ------------------------------------------------------

# Set by the example itself: the staged source's path is the example's layout.
SET_BY_THE_EXAMPLE = {"source_dir"}


def test_example_declares_and_forwards_every_module_input(module: TfDir, example: TfDir) -> None:
    """An input missing from the example is silently ignored (a warning) when a user sets it."""
    call = example.modules["cocoon_hibernation"]
    missing = set(module.variables) - set(example.variables) - SET_BY_THE_EXAMPLE
    assert not missing, f"the example does not declare {sorted(missing)}"
    for name in set(module.variables) - SET_BY_THE_EXAMPLE:
        forwarded = call.get(name)
        assert forwarded is not None, f"the example does not pass {name} to the module"
        assert f"var.{name}" in str(forwarded), f"{name} is passed as {forwarded!r}"
        assert norm(str(example.variables[name]["type"])) == norm(
            str(module.variables[name]["type"])
        ), f"{name}: the example's type differs from the module's"


def test_an_unset_example_input_keeps_the_module_default(module: TfDir, example: TfDir) -> None:
    for name, var in example.variables.items():
        if name in module.variables and var.get("default", "unset") is None:
            mod = module.variables[name]
            if mod.get("default") is not None:
                assert mod.get("nullable") is False, f"{name}: null replaces the module default"


# --- steps outside Terraform --------------------------------------------------------------


def test_the_apply_attaches_dead_letters_and_ack_deadlines(module: TfDir) -> None:
    """Forgetting the script left Eventarc's 10 s ack deadline: redelivery mid-run."""
    attach = module.resource("terraform_data", "attach_dead_letters")
    assert attach["count"] == "${var.attach_dead_letters ? 1 : 0}"
    assert module.variables["attach_dead_letters"]["default"] is True
    assert attach["triggers_replace"] == "${local.dead_letter_attachments}"
    (exec_,) = [p["local-exec"] for p in attach["provisioner"]]
    assert "infra/scripts/attach-dead-letters.sh" in exec_["command"]
    assert "--from-env" in exec_["command"]
    assert exec_["environment"]["COCOON_DEAD_LETTER_ATTACHMENTS"] == (
        "${jsonencode(local.dead_letter_attachments)}"
    )
    # The path the command names exists relative to the module.
    assert (MODULE_DIR / "../../../infra/scripts/attach-dead-letters.sh").resolve().is_file()


def _stub_bin(tmp: Path, scripts: dict[str, str]) -> Path:
    bindir = tmp / "bin"
    bindir.mkdir(exist_ok=True)
    for name, body in scripts.items():
        path = bindir / name
        path.write_text("#!/bin/sh\n" + body, encoding="utf-8")
        path.chmod(0o755)
    return bindir


def test_attach_script_from_the_apply_fails_when_a_subscription_is_missing(
    tmp_path: Path,
) -> None:
    """Run as Terraform runs it (--from-env); gcloud is a stand-in (no cloud here)."""
    attachments = {
        "wake": {
            "trigger": "projects/p/locations/europe-west1/triggers/cocoon-wake-1",
            "ack_deadline_seconds": 300,
            "dead_letter_topic": "projects/p/topics/cocoon-wake-dead-letter",
            "max_delivery_attempts": 20,
        },
        "audit:wake:pods.patch": {
            "trigger": "projects/p/locations/global/triggers/cocoon-wake-pods-patch",
            "ack_deadline_seconds": 300,
            "dead_letter_topic": "projects/p/topics/cocoon-wake-dead-letter",
            "max_delivery_attempts": 20,
        },
    }
    log = tmp_path / "calls"
    bindir = _stub_bin(
        tmp_path,
        {
            "gcloud": f'echo "$*" >> {log}\n'
            'case "$*" in\n'
            '  "projects describe"*) echo 123 ;;\n'
            # The audit trigger has no subscription yet.
            '  "eventarc triggers describe cocoon-wake-1"*) echo projects/p/subscriptions/s1 ;;\n'
            "esac\n",
        },
    )
    env = {
        "PATH": f"{bindir}:/usr/bin:/bin",
        "HOME": str(tmp_path),
        "COCOON_DEAD_LETTER_ATTACHMENTS": json.dumps(attachments),
    }
    done = subprocess.run(
        ["bash", str(SCRIPTS / "attach-dead-letters.sh"), "--from-env"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 1, done.stderr
    assert "cocoon-wake-pods-patch: no Pub/Sub subscription" in done.stderr
    calls = log.read_text(encoding="utf-8")
    assert "pubsub subscriptions update projects/p/subscriptions/s1" in calls
    assert "--ack-deadline 300" in calls


def test_the_source_must_be_staged_before_an_archive_is_made(module: TfDir) -> None:
    source = module.data[("archive_file", "source")]
    (lifecycle,) = source["lifecycle"]
    (pre,) = lifecycle["precondition"]
    assert "main.py" in pre["condition"] and "requirements.txt" in pre["condition"]
    assert "build-source.sh" in pre["error_message"]


def test_one_command_deploys_in_order(tmp_path: Path) -> None:
    """deploy.sh: stage, apply, roles, generated bindings; terraform and kubectl are stand-ins."""
    log = tmp_path / "calls"
    manifest = "---\nkind: ClusterRoleBinding\n"
    bindir = _stub_bin(
        tmp_path,
        {
            "terraform": f'echo "terraform $*" >> {log}\n'
            'case "$*" in *"output -raw kubernetes_rbac_manifest"*) '
            f'printf %s "{manifest}" ;; esac\n',
            "kubectl": f'echo "kubectl $*" >> {log}\n'
            f'case "$*" in "apply -f -") cat >> {log} ;; *current-context*) echo ctx ;; esac\n',
        },
    )
    # build-source.sh stages for real (uv export --frozen works offline).
    env = {**os.environ, "PATH": f"{bindir}:{os.environ['PATH']}"}
    done = subprocess.run(
        ["bash", str(SCRIPTS / "deploy.sh"), "terraform/examples/gke", "-auto-approve"],
        env=env,
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    staged = REPO_ROOT / "build" / "function-source"
    assert (staged / "main.py").is_file() and (staged / "requirements.txt").is_file()
    calls = [c for c in log.read_text(encoding="utf-8").splitlines() if c]
    assert calls[0] == "terraform -chdir=terraform/examples/gke apply -auto-approve"
    kubectl = [c for c in calls if c.startswith("kubectl apply")]
    assert kubectl[0].endswith("infra/k8s/rbac.yaml")
    assert kubectl[1] == "kubectl apply -f -"
    assert calls[-1] == "kind: ClusterRoleBinding"


def test_a_failing_apply_stops_the_deploy(tmp_path: Path) -> None:
    log = tmp_path / "calls"
    bindir = _stub_bin(
        tmp_path,
        {
            "terraform": f'echo "terraform $*" >> {log}\nexit 3\n',
            "kubectl": f'echo "kubectl $*" >> {log}\n',
        },
    )
    env = {**os.environ, "PATH": f"{bindir}:{os.environ['PATH']}"}
    done = subprocess.run(
        ["bash", str(SCRIPTS / "deploy.sh")],
        env=env,
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 3
    assert "kubectl" not in log.read_text(encoding="utf-8")


# --- DATA_WRITE ---------------------------------------------------------------------------


def test_data_write_is_conditional_and_its_cost_is_stated(module: TfDir) -> None:
    audit = module.resource("google_project_iam_audit_config", "gke_data_write")
    assert audit["count"] == "${local.manage_data_write_logs ? 1 : 0}"
    # Only while a routed method is a status write, and only if the user lets it.
    assert norm(module.locals["manage_data_write_logs"]) == norm(
        "${var.gke_data_write_audit_logs && local.routes_status_writes}"
    )
    doc = (REPO_ROOT / "docs" / "production.md").read_text(encoding="utf-8")
    section = doc[doc.index("## DATA_WRITE") :]
    section = section[: section.index("\n## ", 3)]
    # Exactly what it costs, and what the API cannot narrow.
    for fact in ("$0.50/GiB", "50 GiB", "container.googleapis.com", "every GKE cluster"):
        assert fact in section, fact
    # How to do without it where a push source exists.
    assert "pod_status_audit_methods = []" in section
    assert "gke_data_write_audit_logs = false" in section


# --- alerts a user can keep -------------------------------------------------------------


def _alerts(module: TfDir) -> dict[str, dict[str, Any]]:
    alerts = module.locals["alerts"]
    assert isinstance(alerts, dict)
    return alerts


def test_no_alert_pages_on_an_ordinary_wake_no_capacity(module: TfDir) -> None:
    """The seat economy makes WakeNoCapacity routine: the old 0 s alert fired on each one."""
    for name, alert in _alerts(module).items():
        text = alert["filter"]
        assert "wake_unschedulable" not in text, name
        assert "WakeNoCapacity" not in text, name
    assert not module.of_type("google_monitoring_alert_policy").keys() - {"alert"}


def test_the_alerts_cover_what_needs_a_person(module: TfDir) -> None:
    alerts = _alerts(module)
    assert set(alerts) == {
        "wake_timed_out",
        "stuck_suspending",
        "write_refused",
        "dead_letters",
        "function_errors",
    }
    assert 'reason = "WakeTimedOut"' in alerts["wake_timed_out"]["filter"]
    assert 'reason = "WriteRefused"' in alerts["write_refused"]["filter"]
    assert "num_undelivered_messages" in alerts["dead_letters"]["filter"]
    assert "dead-letter" in alerts["dead_letters"]["filter"]
    assert "5xx" in alerts["function_errors"]["filter"]
    assert alerts["stuck_suspending"]["duration"] == "${var.alert_stuck_suspending_after}"
    assert "release_pending" in alerts["stuck_suspending"]["filter"]


def test_every_alert_has_a_runbook_entry(module: TfDir) -> None:
    runbook = RUNBOOK.read_text(encoding="utf-8")
    anchors = {
        re.sub(r"[^a-z0-9 -]", "", h.lower()).replace(" ", "-")
        for h in re.findall(r"^#+ (.+)$", runbook, flags=re.MULTILINE)
    }
    for name, alert in _alerts(module).items():
        assert alert["runbook"] in anchors, f"{name}: no heading for #{alert['runbook']}"
    policy = module.resource("google_monitoring_alert_policy", "alert")
    doc = blocks(policy, "documentation")[0]["content"]
    assert "${local.docs_runbook}#${each.value.runbook}" in doc
    assert module.locals["docs_runbook"] == "docs/runbook.md"


def test_every_event_reason_has_a_runbook_entry() -> None:
    """Each Event reason the code emits is explained for the person who sees it."""
    from shared import constants as c

    reasons = {
        v
        for mod in (c,)
        for name, v in vars(mod).items()
        if name.startswith("REASON_") and isinstance(v, str)
    }
    runbook = RUNBOOK.read_text(encoding="utf-8")
    headings = set(re.findall(r"^### `(\w+)`", runbook, flags=re.MULTILINE))
    assert reasons <= headings, sorted(reasons - headings)


# --- citations ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "path",
    sorted(
        p
        for root in (TF_ROOT, REPO_ROOT / "infra")
        for p in root.rglob("*")
        if p.is_file() and ".terraform" not in p.parts
    ),
    ids=lambda p: str(p.relative_to(REPO_ROOT)),
)
def test_no_citation_of_a_document_outside_the_repository(path: Path) -> None:
    text = path.read_text(encoding="utf-8", errors="replace")
    assert not re.search(r"\bSPEC §|EVENT-FORMATS", text), path


def test_without_status_methods_no_audit_config_is_made(tmp_path: Path) -> None:
    """Terraform itself evaluates the decision: only status writes need DATA_WRITE."""
    from tests.deploy._terraform import console

    text = (MODULE_DIR / "main.tf").read_text(encoding="utf-8")
    (source,) = re.findall(r"^\s*routes_status_writes\s*=\s*(.+)$", text, re.MULTILINE)
    expr = source.replace("values(local.audit_routes)", "[for m in methods : { method = m }]")
    assert "local." not in expr and "var." not in expr, expr
    cases = {
        "defaults": [
            "io.cocoonstack.cocoonset.v1.cocoonsets.patch",
            "io.cocoonstack.cocoonset.v1.cocoonsets.status.patch",
            "io.k8s.core.v1.pods.status.patch",
        ],
        # A push source for the snapshot, pod_status_audit_methods = []:
        "push-source": [
            "io.cocoonstack.cocoonset.v1.cocoonsets.update",
            "io.cocoonstack.cocoonset.v1.cocoonsets.patch",
            "io.k8s.core.v1.pods.patch",
            "io.k8s.core.v1.pods.delete",
        ],
    }
    got = {
        name: console(tmp_path, f"[for methods in [{json.dumps(methods)}] : {expr}][0]")
        for name, methods in cases.items()
    }
    assert got == {"defaults": True, "push-source": False}
