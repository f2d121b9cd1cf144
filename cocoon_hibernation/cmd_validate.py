"""`cocoon-hibernation validate FILE…`: check CocoonSet manifests before applying them.

Each CocoonSet found is checked by `shared.validation` (the CRD's schema and
rules, as kube-apiserver checks them) and by `shared.manifest_checks`
(cocoon-webhook's CocoonSet rules with its messages, fields the CRD does not
declare — the server would drop them silently — and values of this project's
annotations the functions cannot parse). Output, for scripts and humans:

- stdout: one line per violation, `FILE: NAMESPACE/NAME: field: message`;
- stderr: a summary (`checked 3 CocoonSets in 2 files (1 other document
  skipped)`) and one line per file that cannot be read or parsed;
- exit 0 all valid, 1 a violation found, 2 an input could not be read or parsed
  (the other files are still checked and reported).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import click

from cocoon_hibernation._common import EXIT_CODES_HELP
from cocoon_hibernation.manifests import ManifestError, objects, parse_documents, read_text
from shared import constants as k
from shared.manifest_checks import cluster_violations
from shared.validation import validate_cocoonset

EXIT_INVALID = 1
EXIT_UNREADABLE = 2


@dataclass
class Report:
    files: int = 0
    cocoonsets: int = 0
    others: int = 0
    violations: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)

    @property
    def exit_code(self) -> int:
        if self.errors:
            return EXIT_UNREADABLE
        return EXIT_INVALID if self.violations else 0

    def summary(self) -> str:
        line = f"checked {_plural(self.cocoonsets, 'CocoonSet')} in {_plural(self.files, 'file')}"
        if self.others:
            line += f" ({_plural(self.others, 'other document')} skipped)"
        return line


def is_cocoonset(obj: object) -> bool:
    """A CocoonSet of any version of our group (a wrong version is then reported)."""
    if not isinstance(obj, Mapping) or obj.get("kind") != k.KIND:
        return False
    api_version = obj.get("apiVersion")
    return isinstance(api_version, str) and api_version.split("/")[0] == k.GROUP


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
        for obj in objects(documents):
            if not is_cocoonset(obj):
                report.others += 1
                continue
            report.cocoonsets += 1
            who = _identity(obj)
            found = validate_cocoonset(obj) + cluster_violations(obj)
            report.violations.extend(f"{source}: {who}: {v}" for v in found)
    return report


@click.command(name="validate", epilog=EXIT_CODES_HELP)
@click.argument("files", nargs=-1, required=True, metavar="FILE…")
def command(files: tuple[str, ...]) -> None:
    """Check CocoonSet manifests (YAML or JSON, `-` for stdin) as the cluster would.

    The CRD's schema and rules, cocoon-webhook's CocoonSet rules, unknown fields
    (a typo the server would drop) and this project's annotation values.

    Multi-document files and `kind: List` are read; documents that are not
    CocoonSets are skipped and counted. Exit 0 when all are valid, 1 when a
    violation is found (one `FILE: NAMESPACE/NAME: message` line each), 2 when
    a file cannot be read or parsed.
    """
    report = check_files(list(files))
    for line in report.violations:
        click.echo(line)
    for line in report.errors:
        click.echo(f"error: {line}", err=True)
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


def _plural(n: int, noun: str) -> str:
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"
