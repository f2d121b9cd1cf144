"""`cocoon-hibernation validate FILE…`: check CocoonSet manifests before applying them.

Each CocoonSet found is checked by `shared.validation` (the CRD's schema and
rules, as kube-apiserver checks them) and by `shared.manifest_checks`
(cocoon-webhook's CocoonSet rules with its messages, fields the CRD does not
declare — the server would drop them silently — unknown
`cocoonset.cocoonstack.io/*` annotation keys, and values of this project's
annotations the functions cannot parse). Output, for scripts and humans:

- stdout: one line per violation, `FILE: NAMESPACE/NAME: field: message`
  (`FILE: document N: message` for a document that is no Kubernetes object);
  with `-o json`, one object with the counts, the violations and the errors;
- stderr: a summary (`checked 3 CocoonSets in 2 files (1 other document
  skipped)`) and one line per file that cannot be read or parsed;
- exit 0 all valid, 1 a violation found or nothing checked (no CocoonSet in the
  input: an empty file, `kind: Cocoonset`), 2 an input could not be read or
  parsed (the other files are still checked and reported).

A check that passes what it did not check is worse than none: a misspelt kind
or an empty file must not read as "valid".
"""

from __future__ import annotations

import difflib
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import click

from cocoon_hibernation._common import EXIT_CODES_HELP, emit_structured
from cocoon_hibernation.manifests import ManifestError, objects, parse_documents, read_text
from shared import constants as k
from shared.manifest_checks import cluster_violations
from shared.validation import validate_cocoonset

EXIT_INVALID = 1
EXIT_UNREADABLE = 2


@dataclass(frozen=True, slots=True)
class Finding:
    """One violation: where (file, object) and what (the server's field and words)."""

    file: str
    object: str
    message: str

    def __str__(self) -> str:
        return f"{self.file}: {self.object}: {self.message}"


@dataclass
class Report:
    files: int = 0
    cocoonsets: int = 0
    others: int = 0
    findings: list[Finding] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)

    @property
    def violations(self) -> list[str]:
        return [str(f) for f in self.findings]

    @property
    def exit_code(self) -> int:
        if self.errors:
            return EXIT_UNREADABLE
        return EXIT_INVALID if self.findings or not self.cocoonsets else 0

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
            "violations": [
                {"file": f.file, "object": f.object, "message": f.message} for f in self.findings
            ],
            "errors": self.errors,
        }


def is_cocoonset(obj: object) -> bool:
    """Meant as a CocoonSet: our kind, or our group, or a kind one typo away from ours.

    A wrong apiVersion or a misspelt kind is then reported by the CRD check
    (`apiVersion: Unsupported value: …`), instead of the document being skipped
    as something else and the file passing unchecked.
    """
    if not isinstance(obj, Mapping):
        return False
    kind, api_version = obj.get("kind"), obj.get("apiVersion")
    if isinstance(api_version, str) and api_version.split("/")[0] == k.GROUP:
        return True
    if not isinstance(kind, str):
        return False
    return kind.lower() == k.KIND.lower() or bool(
        difflib.get_close_matches(kind, [k.KIND], n=1, cutoff=0.8)
    )


def check_files(sources: list[str]) -> Report:
    """Read, parse and validate every file; pure apart from reading the inputs."""
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
                # kubectl: "error validating data: … expected type object"; a list of
                # numbers or a bare string is no manifest at all.
                report.findings.append(
                    Finding(source, f"document {n}", f"not a Kubernetes object ({_type(obj)})")
                )
                continue
            if not is_cocoonset(obj):
                report.others += 1
                continue
            report.cocoonsets += 1
            who = _identity(obj)
            found = validate_cocoonset(obj) + cluster_violations(obj)
            report.findings.extend(Finding(source, who, str(v)) for v in found)
    return report


@click.command(name="validate", epilog=EXIT_CODES_HELP)
@click.argument("files", nargs=-1, required=True, metavar="FILE…")
@click.option(
    "-o",
    "--output",
    type=click.Choice(["text", "json"]),
    default="text",
    show_default=True,
    help="text: one line per violation; json: one object with counts and violations.",
)
def command(files: tuple[str, ...], output: str) -> None:
    """Check CocoonSet manifests (YAML or JSON, `-` for stdin) as the cluster would.

    The CRD's schema and rules, cocoon-webhook's CocoonSet rules, unknown fields
    (a typo the server would drop), unknown `cocoonset.cocoonstack.io/*`
    annotation keys and this project's annotation values.

    Multi-document files and `kind: List` are read; documents that are not
    CocoonSets are skipped and counted. Exit 0 when all are valid, 1 when a
    violation is found (one `FILE: NAMESPACE/NAME: message` line each) or no
    CocoonSet was found at all, 2 when a file cannot be read or parsed.
    """
    report = check_files(list(files))
    if output == "json":
        emit_structured(report.as_dict(), "json")
    else:
        for line in report.violations:
            click.echo(line)
    for line in report.errors:
        click.echo(f"error: {line}", err=True)
    if not report.cocoonsets and not report.findings and not report.errors:
        # An empty file, or only other kinds: one line saying what was (not) checked.
        click.echo(f"error: no CocoonSet in the input: {report.summary()}", err=True)
    else:
        click.echo(report.summary(), err=True)
    raise SystemExit(report.exit_code)


def _identity(obj: Mapping[str, Any]) -> str:
    meta = obj.get("metadata")
    meta = meta if isinstance(meta, Mapping) else {}
    namespace = meta.get("namespace") or "default"
    name = meta.get("name") or (
        f"{meta['generateName']}*" if meta.get("generateName") else "<unnamed>"
    )
    return f"{namespace}/{name}"


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
