"""deploy-check's Terraform part: the real `terraform` judges the tfvars and the module, in a
temporary directory (copies, TF_DATA_DIR), so the user's tree is left as is."""

from __future__ import annotations

import difflib
import json
import os
import re
import shutil
import subprocess
import tempfile
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cocoon_hibernation.findings import Finding, Level

# HCL's strings, comments and heredocs (their braces are no block's), and the braces.
_TOKEN = re.compile(
    r'"(?:\\.|[^"\\\n])*"|#[^\n]*|//[^\n]*|/\*.*?\*/|<<-?(\w+)\n.*?^[ \t]*\1[ \t]*$|[{}]',
    re.S | re.M,
)
_DEFAULT = re.compile(r"^\s*default\s*=", re.M)
_LOCAL_SOURCE = re.compile(r'^(\s*source\s*=\s*)"(\.\.?/[^"]*)"', re.M)
_CREDENTIALS = re.compile(r"credential|oauth2|access token|could not find default", re.I)
_PLAN = ("plan", "-json", "-input=false", "-lock=false")
_QUIET = {"TF_IN_AUTOMATION": "1", "TF_INPUT": "0", "CHECKPOINT_DISABLE": "1"}


class UsageError(ValueError):
    """The var-file is no tfvars Terraform reads (its own diagnostic, with the line)."""


@dataclass
class Result:
    findings: list[Finding] = field(default_factory=list)
    values: dict[str, Any] | None = None  # the root's variables as Terraform read them


def find_terraform(preferred: str | None) -> str | None:
    if preferred:
        return shutil.which(preferred)
    return shutil.which("terraform") or shutil.which("tofu")


def blocks(text: str) -> Iterator[tuple[str, str]]:
    """Each top-level block of an HCL file: (its type, its text)."""
    depth, start = 0, 0
    for m in _TOKEN.finditer(text):
        if m.group(0) == "{":
            if depth == 0:
                start = text.rfind("\n", 0, m.start()) + 1
            depth += 1
        elif m.group(0) == "}":
            depth -= 1
            if depth == 0:
                chunk = text[start : m.end()]
                yield chunk.split(None, 1)[0], chunk


def _tf_text(directory: Path) -> Iterator[tuple[str, str]]:
    for path in sorted(directory.glob("*.tf")):
        yield from blocks(path.read_text(encoding="utf-8"))


def _stub(root: Path, into: Path) -> tuple[list[Finding], set[str]]:
    """The root's variables and module calls over the modules' variables: no provider needed."""
    out: list[Finding] = []
    parts: list[str] = []
    required: set[str] = set()
    for kind, text in _tf_text(root):
        if kind == "variable" and _DEFAULT.search(text):
            parts.append(text)
        elif kind == "variable":
            # Optional in the stub, so a missing input does not stop Terraform judging the rest.
            required.add(text.split('"')[1])
            parts.append(text.replace("{", "{\n  default = null", 1))
        elif kind == "module":
            source = _LOCAL_SOURCE.search(text)
            if source is None:
                # A registry or git module would need its download (and its providers).
                why = f"not checked: {text.splitlines()[0]} is not a local module"
                out.append(Finding(Level.UNCHECKED, "module variables", why))
                continue
            called = (root / source.group(2)).resolve()
            if not called.is_dir():
                out.append(Finding(Level.FAIL, "module source", f"{called}: no such directory"))
                return out, required
            stub = f"m{len(parts)}"
            (into / stub).mkdir()
            own = [t for k, t in _tf_text(called) if k == "variable"]
            (into / stub / "variables.tf").write_text("\n".join(own), encoding="utf-8")
            parts.append(_LOCAL_SOURCE.sub(rf'\1"./{stub}"', text, count=1))
    (into / "main.tf").write_text("\n\n".join(parts), encoding="utf-8")
    return out, required


class Terraform:
    def __init__(self, binary: str, work: Path) -> None:
        self.binary, self.work = binary, work

    def run(self, cwd: Path, *args: str, data: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [self.binary, f"-chdir={cwd}", *args],
            env={**os.environ, **_QUIET, "TF_DATA_DIR": str(self.work / data)},
            check=False,
            capture_output=True,
            text=True,
            timeout=900,
        )


def _diagnostics(stdout: str) -> list[dict[str, Any]]:
    """The diagnostics of a `-json` run: a line per message, or `validate`'s one object."""
    try:
        docs = [json.loads(stdout)]
    except ValueError:
        docs = [json.loads(x) for x in stdout.splitlines() if x.startswith("{")]
    found: list[dict[str, Any]] = []
    for doc in docs:
        found += doc.get("diagnostics") or ([doc["diagnostic"]] if "diagnostic" in doc else [])
    return found


def _said(d: Mapping[str, Any]) -> str:
    detail = str(d.get("detail") or "").split("\n\n")[0].replace("\n", " ")
    return f"{d.get('summary', '')}: {detail}" if detail else str(d.get("summary", ""))


def _first_error(proc: subprocess.CompletedProcess[str]) -> str:
    errors = [d for d in _diagnostics(proc.stdout) if d.get("severity") == "error"]
    if errors:
        return _said(errors[0])
    lines = [x.strip("│╷╵ ") for x in (proc.stderr or proc.stdout).splitlines()]
    return next((x for x in lines if x), "terraform failed")


def _variable_finding(
    d: Mapping[str, Any], values: Mapping[str, Any], declared: list[str]
) -> tuple[str, Finding]:
    """One diagnostic of the stub's plan as (the variable it is about, or "", a finding)."""
    summary, detail = d.get("summary", ""), str(d.get("detail", ""))
    if named := re.search(r'declare a variable named "([^"]+)"', detail):
        # Terraform only warns, and the default stays in force: a typo must fail here.
        near = difflib.get_close_matches(named.group(1), declared, n=1, cutoff=0.6)
        hint = f"; did you mean {near[0]}?" if near else ""
        msg = f"not a variable of the module: the apply ignores it{hint}"
        return "", Finding(Level.FAIL, f"input {named.group(1)}", msg)
    if d.get("severity") != "error":
        return "", Finding(Level.WARN, "terraform", _said(d))
    if required := re.search(r'input variable "([^"]+)" is not set', detail):
        name = required.group(1)
        return name, Finding(Level.FAIL, f"input {name}", "not set (required)")
    refs = [v.get("traversal", "") for v in (d.get("snippet") or {}).get("values") or []]
    if summary == "Invalid value for variable" and refs and refs[0].startswith("var."):
        path = refs[0][4:].split(".")
        value: Any = values
        for part in path:
            value = value.get(part) if isinstance(value, dict) else None
        message = f"{json.dumps(value, ensure_ascii=False)}: {detail.partition(chr(10))[0]}"
        return path[0], Finding(Level.FAIL, ".".join(path), message)
    if typed := re.search(r"for var\.(\w+) declared", detail):
        # The stub's file and line would mislead: the user's are in the message's name.
        said = re.sub(r" declared at \S+?:[0-9,-]+", "", _said(d))
        return typed.group(1), Finding(Level.FAIL, typed.group(1), said)
    return "", Finding(Level.FAIL, "terraform", _said(d))


def _variable_findings(
    diagnostics: list[dict[str, Any]], plan: Mapping[str, Any], var_file: Path, required: set[str]
) -> list[Finding]:
    if not plan and (unreadable := _range_in(diagnostics, var_file)):
        raise UsageError(unreadable)
    values = {k: v.get("value") for k, v in (plan.get("variables") or {}).items()}
    declared = sorted(plan.get("configuration", {}).get("root_module", {}).get("variables", {}))
    unset = sorted(n for n in required if values.get(n) is None)
    judged = [(n, Finding(Level.FAIL, f"input {n}", "not set (required)")) for n in unset]
    judged += sorted(
        (j for d in diagnostics if (j := _variable_finding(d, values, declared))[0] not in unset),
        key=lambda j: (not j[1].check.startswith("input "), j[1].check),
    )
    failed = {name for name, _f in judged if name}
    checks = plan.get("checks") or []
    passed = sorted({c["address"]["name"] for c in checks if c["address"]["kind"] == "var"})
    ok = [Finding(Level.OK, n, _ok(values.get(n))) for n in passed if n not in failed]
    return ok + [f for _name, f in judged]


def _ok(value: Any) -> str:
    return "default" if value is None else value if isinstance(value, str) else "valid"


def _range_in(diagnostics: list[dict[str, Any]], var_file: Path) -> str:
    for d in diagnostics:
        where = d.get("range") or {}
        if d.get("severity") != "error" or d.get("summary", "").startswith("Invalid value for"):
            continue
        if Path(where.get("filename", "")) == var_file:
            return f"{var_file}:{where.get('start', {}).get('line', '?')}: {_said(d)}"
    return ""


def check_variables(tf: Terraform, root: Path, var_file: Path) -> Result:
    """Plan a provider-less stub of the root: Terraform's own types, validations and defaults."""
    stub = tf.work / "stub"
    stub.mkdir()
    stubbed, required = _stub(root, stub)
    result = Result(stubbed)
    if any(f.check == "module source" for f in result.findings):
        return result
    init = tf.run(stub, "init", "-backend=false", "-input=false", "-json", data="stub-data")
    if init.returncode != 0:
        why = f"not checked: {_first_error(init)}"
        result.findings.append(Finding(Level.UNCHECKED, "variables", why))
        return result
    plan_file = tf.work / "stub.plan"
    args = (*_PLAN, "-refresh=false", f"-var-file={var_file}", f"-out={plan_file}")
    proc = tf.run(stub, *args, data="stub-data")
    plan: dict[str, Any] = {}
    if plan_file.exists():  # also written when planning failed (Terraform 1.6+)
        shown = tf.run(stub, "show", "-json", str(plan_file), data="stub-data")
        plan = json.loads(shown.stdout) if shown.returncode == 0 else {}
    result.findings += _variable_findings(_diagnostics(proc.stdout), plan, var_file, required)
    if plan:
        result.values = {k: v.get("value") for k, v in plan["variables"].items()}
    return result


def _copy_root(root: Path, into: Path) -> Path:
    """The root and the local modules it calls, copied with their relative layout; the copy's
    neighbours link to the originals, so a path such as `../../../build` resolves."""
    sources = [
        (root / m.group(2)).resolve()
        for _kind, text in _tf_text(root)
        for m in _LOCAL_SOURCE.finditer(text)
    ]
    top = Path(os.path.commonpath([root, *sources]))
    shutil.copytree(top, into / top.name, ignore=shutil.ignore_patterns(".terraform*", ".git"))
    for sibling in top.parent.iterdir():
        if sibling != top:
            (into / sibling.name).symlink_to(sibling)
    return into / top.name / root.relative_to(top)


def check_module(tf: Terraform, root: Path, var_file: Path, *, plan: bool) -> list[Finding]:
    """`terraform validate`, then `plan` (with no state) when asked; both need the providers."""
    (tf.work / "root").mkdir()
    copy = _copy_root(root, tf.work / "root")
    init = tf.run(copy, "init", "-backend=false", "-input=false", "-json", data="root-data")
    if init.returncode != 0:
        why = f"not checked: terraform init (providers): {_first_error(init)}"
        skipped = [Finding(Level.UNCHECKED, "terraform validate", why)]
        return skipped + ([Finding(Level.UNCHECKED, "terraform plan", why)] if plan else [])
    valid = tf.run(copy, "validate", "-json", "-no-color", data="root-data")
    levels = {"error": Level.FAIL}
    found = [
        Finding(levels.get(d.get("severity", ""), Level.WARN), "terraform validate", _said(d))
        for d in _diagnostics(valid.stdout)
    ]
    if valid.returncode != 0 and not found:
        found.append(Finding(Level.FAIL, "terraform validate", _first_error(valid)))
    if not found:
        found.append(Finding(Level.OK, "terraform validate", "the configuration is valid"))
    if not plan or valid.returncode != 0:
        return found
    proc = tf.run(copy, *_PLAN, f"-var-file={var_file}", data="root-data")
    errors = [d for d in _diagnostics(proc.stdout) if d.get("severity") == "error"]
    if proc.returncode == 0:
        return [*found, Finding(Level.OK, "terraform plan", "planned without error")]
    if errors and all(_CREDENTIALS.search(_said(d)) for d in errors):
        why = f"not checked: {_said(errors[0])}"
        return [*found, Finding(Level.UNCHECKED, "terraform plan", why)]
    failed = [Finding(Level.FAIL, "terraform plan", _said(d)) for d in errors]
    return found + (failed or [Finding(Level.FAIL, "terraform plan", _first_error(proc))])


def check(binary: str | None, root: Path, var_file: Path, *, plan: bool) -> Result:
    if binary is None:
        why = "not checked: no terraform (or tofu) on PATH (--terraform names one)"
        return Result([Finding(Level.UNCHECKED, "terraform", why)])
    if not any(root.glob("*.tf")):
        why = f"not checked: no root module (*.tf) in {root} (--root names it)"
        return Result([Finding(Level.UNCHECKED, "terraform", why)])
    with tempfile.TemporaryDirectory(prefix="cocoon-deploy-check-") as work:
        tf = Terraform(binary, Path(work))
        result = check_variables(tf, root.resolve(), var_file.resolve())
        if not any(f.check == "module source" for f in result.findings):
            result.findings += check_module(tf, root.resolve(), var_file.resolve(), plan=plan)
    return result
