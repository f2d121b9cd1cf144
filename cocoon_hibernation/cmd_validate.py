"""`cocoon-hibernation validate FILE…`: check CocoonSet manifests before applying them. A
reachable cluster judges each set by a server-side dry-run create (strict fields); otherwise the
pinned CRD and cocoon-webhook rules do (`OFFLINE_RULES`). Our annotations are checked either way."""

from __future__ import annotations

import difflib
import json
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import click

from cocoon_hibernation._common import (
    ERROR_PREFIX,
    EXIT_CODES_HELP,
    EXIT_FINDING,
    EXIT_USAGE,
    emit_structured,
    fail,
    kube_options,
    output_choice,
)
from cocoon_hibernation.manifests import ManifestError, objects, parse_documents, read_text
from shared import admission, errors
from shared import constants as k
from shared.manifest_checks import annotation_violations, cluster_violations
from shared.validation import validate_cocoonset

# How the sets were judged, named on the summary line.
OFFLINE_RULES = f"offline: the pinned CRD and {admission.RULES_SOURCE}"
# A dry run's answer: the server's refusals (empty when admitted), or None (not asked).
Ask = Callable[[Mapping[str, Any]], list[str]]


@dataclass(frozen=True, slots=True)
class Finding:
    """One violation: where (file, object) and what (the server's field and words)."""

    file: str
    object: str
    message: str


@dataclass
class Report:
    files: int = 0
    cocoonsets: int = 0
    others: int = 0
    findings: list[Finding] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)

    @property
    def violations(self) -> list[str]:
        return [f"{f.file}: {f.object}: {f.message}" for f in self.findings]

    @property
    def exit_code(self) -> int:
        if self.errors:
            return EXIT_USAGE
        return EXIT_FINDING if self.findings or not self.cocoonsets else 0

    def summary(self) -> str:
        line = f"checked {_plural(self.cocoonsets, 'CocoonSet')} in {_plural(self.files, 'file')}"
        if self.others:
            line += f" ({_plural(self.others, 'other document')} skipped)"
        return line

    def as_dict(self) -> dict[str, Any]:
        return {
            "valid": self.exit_code == 0,
            "files": self.files,
            "cocoonsets": self.cocoonsets,
            "skipped": self.others,
            "violations": [asdict(f) for f in self.findings],
            "errors": self.errors,
        }


def is_cocoonset(obj: Mapping[str, Any]) -> bool:
    """Meant as a CocoonSet: our kind, our group, or a kind one typo away from ours (so a
    wrong apiVersion or kind is reported by the CRD check, not skipped as another kind)."""
    kind, api_version = obj.get("kind"), obj.get("apiVersion")
    if isinstance(api_version, str) and api_version.split("/")[0] == k.GROUP:
        return True
    if not isinstance(kind, str):
        return False
    return kind.lower() == k.KIND.lower() or bool(
        difflib.get_close_matches(kind, [k.KIND], n=1, cutoff=0.8)
    )


def check_files(sources: list[str], ask: Ask | None = None) -> Report:
    """Read, parse and validate every file; `ask` is the cluster's dry run, else offline rules."""
    report = Report()
    for source in sources:
        try:
            text = read_text(source)
            documents = parse_documents(text, json_only=source.lower().endswith(".json"))
        except ManifestError as e:
            report.errors.append(f"{source}: {e}")
            continue
        report.files += 1
        for n, obj in enumerate(objects(documents), start=1):
            if not isinstance(obj, Mapping):
                # As kubectl: a list of numbers or a bare string is no manifest at all.
                why = f"not a Kubernetes object ({_type(obj)})"
                report.findings.append(Finding(source, f"document {n}", why))
                continue
            if not is_cocoonset(obj):
                report.others += 1
                continue
            report.cocoonsets += 1
            if ask is not None:  # the server's verdict, and what only this project knows
                found = [*ask(obj), *map(str, annotation_violations(obj))]
            else:
                found = [str(v) for v in validate_cocoonset(obj) + cluster_violations(obj)]
            report.findings.extend(Finding(source, _identity(obj), msg) for msg in found)
    return report


def dry_run(kubeconfig: Path | None, context: str | None) -> Ask | None:
    """The cluster's verdict per set, or None (with why on stderr) when no cluster answers."""
    from cocoon_hibernation._kube import cli_settings, kube_client  # noqa: PLC0415 - lazy

    try:
        client = kube_client(cli_settings(kubeconfig, context))
    except errors.CocoonError as err:
        if kubeconfig or context:
            fail(f"cluster: {err}")
        return None

    def ask(obj: Mapping[str, Any]) -> list[str]:
        try:
            try:
                client.dry_run_set(obj, replace=False)
            except errors.AlreadyExists:
                client.dry_run_set(obj, replace=True)  # it exists: ask about the update instead
            return []
        except (errors.AdmissionDenied, errors.Invalid, errors.NotFound) as err:
            return [getattr(err, "server_message", "") or str(err)]
        except errors.CocoonError as err:
            if isinstance(err, errors.PermanentError) and "HTTP 400" in str(err):
                return [str(err)]  # strict field validation, a malformed value
            fail(f"cluster: {err}")

    return ask


@click.command(name="validate", epilog=EXIT_CODES_HELP)
@click.argument("files", nargs=-1, required=True, metavar="FILE…")
@output_choice(
    ("text", "json"), "text: one line per violation; json: one object with counts and violations."
)
@click.option("--offline", is_flag=True, help="Use the pinned rules even if a cluster answers.")
@kube_options
def command(
    files: tuple[str, ...], output: str, offline: bool, kubeconfig: Path | None, context: str | None
) -> None:
    """Check CocoonSet manifests (YAML or JSON, `-` for stdin) as the cluster would.

    A reachable cluster answers (a dry-run create); otherwise the pinned CRD and
    cocoon-webhook rules do, and the summary names their version. Exit 0 when all are
    valid, 1 on a violation or no CocoonSet at all, 2 when a file cannot be read.
    """
    ask = None if offline else dry_run(kubeconfig, context)
    by = OFFLINE_RULES if ask is None else "by the cluster: dry-run create"
    report = check_files(list(files), ask)
    if output == "json":
        emit_structured({**report.as_dict(), "checked_by": by}, "json")
    else:
        for line in report.violations:
            click.echo(line)
    for line in report.errors:
        click.echo(f"{ERROR_PREFIX}{line}", err=True)
    if not report.cocoonsets and not report.findings and not report.errors:
        # An empty file, or only other kinds: one line saying what was (not) checked.
        click.echo(f"{ERROR_PREFIX}no CocoonSet in the input: {report.summary()}", err=True)
    else:
        click.echo(f"{report.summary()}; {by}", err=True)
    raise SystemExit(report.exit_code)


def _identity(obj: Mapping[str, Any]) -> str:
    meta = obj.get("metadata")
    meta = meta if isinstance(meta, Mapping) else {}
    generated = f"{meta['generateName']}*" if meta.get("generateName") else "<unnamed>"
    return f"{meta.get('namespace') or 'default'}/{meta.get('name') or generated}"


def _type(obj: object) -> str:
    if isinstance(obj, list):
        return "a list"
    if isinstance(obj, str):
        return f"a string, {json.dumps(obj[:40])}"
    if obj is None:
        return "null"
    return f"a {type(obj).__name__}"


def _plural(n: int, noun: str) -> str:
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"
