"""`cocoon-hibernation status`: release-policy sets, their phase, hint node and snapshot.

One row per release-policy set: phase, the `hibernated-on-node` hint, whether
the `<vm>:hibernate` snapshot is in the registry, and a flag (SPEC §12) when
the set is `Suspended` while a main pod without the restore marker exists --
the mark of an operator that predates `hibernatePolicy` recreating the pod and
keeping the seat. Works against any kubeconfig; the registry column needs
`COCOON_REGISTRY_BASE` (else it shows `?`).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

import click
from rich.console import Console
from rich.table import Table

from cocoon_hibernation._common import fail, is_tty, kube_options, progress
from cocoon_hibernation._kube import cli_settings, kube_client, registry_probe
from shared import constants as k
from shared.enums import CocoonSetPhase
from shared.errors import CocoonError
from shared.models import CocoonSet, Pod
from shared.names import SetRef, vm_name

FLAG_STALE_OPERATOR = "main pod exists while Suspended without the restore marker"


@dataclass(frozen=True, slots=True)
class StatusRow:
    namespace: str
    name: str
    phase: str
    suspend: bool
    hint: str
    snapshot: str  # "yes", "no", "?" (no registry configured), "error: ..."
    main_pod: str  # "-" or "<name> on <node>"
    flag: str


def status_row(cs: CocoonSet, pods: Sequence[Pod], snapshot: Callable[[str], str]) -> StatusRow:
    """Pure: the row for one release-policy set, given its pods and a snapshot probe."""
    # Only the pods the set controls are its pods (as the operator and the reconciler keep them).
    live = [p for p in pods if not p.terminating and p.controlled_by(cs.metadata.uid)]
    main = next((p for p in live if p.is_main), None)
    flag = ""
    if (
        cs.phase is CocoonSetPhase.SUSPENDED
        and main is not None
        and main.annotations.get(k.ANN_RESTORE) != k.TRUE
    ):
        flag = FLAG_STALE_OPERATOR
    main_text = "-"
    if main is not None:
        main_text = main.name + (f" on {main.spec.node_name}" if main.spec.node_name else "")
    return StatusRow(
        namespace=cs.namespace,
        name=cs.name,
        phase=cs.phase.value if cs.phase is not None else "-",
        suspend=cs.suspended,
        hint=cs.hint,
        snapshot=snapshot(vm_name(cs.namespace, cs.name, 0)),
        main_pod=main_text,
        flag=flag,
    )


def _render(rows: Sequence[StatusRow]) -> None:
    if is_tty():
        table = Table(title="release-policy CocoonSets")
        for col in ("set", "phase", "suspend", "hint node", "snapshot", "main pod", "flag"):
            table.add_column(col)
        for r in rows:
            table.add_row(
                f"{r.namespace}/{r.name}",
                r.phase,
                "yes" if r.suspend else "no",
                r.hint or "-",
                r.snapshot,
                r.main_pod,
                f"[red]{r.flag}[/]" if r.flag else "",
            )
        Console().print(table)
        return
    header = ("SET", "PHASE", "SUSPEND", "HINT", "SNAPSHOT", "MAIN", "FLAG")
    lines = [header] + [
        (
            f"{r.namespace}/{r.name}",
            r.phase,
            "yes" if r.suspend else "no",
            r.hint or "-",
            r.snapshot,
            r.main_pod,
            r.flag or "-",
        )
        for r in rows
    ]
    widths = [max(len(line[i]) for line in lines) for i in range(len(header) - 1)]
    for line in lines:
        cells = [cell.ljust(widths[i]) for i, cell in enumerate(line[:-1])]
        click.echo("  ".join([*cells, line[-1]]).rstrip())


@click.command(name="status")
@kube_options
@click.option("-n", "--namespace", default=None, help="Only this namespace (default: all).")
@click.option(
    "-o",
    "--output",
    type=click.Choice(["table", "json"]),
    default="table",
    show_default=True,
    help="Output format.",
)
def command(*, kubeconfig: Path | None, namespace: str | None, output: str) -> None:
    """Release-policy sets: phase, hint node, snapshot in the registry, stale-operator flag."""
    try:
        settings = cli_settings(kubeconfig)
        with progress("reading CocoonSets"):
            client = kube_client(settings)
            sets = [s for page in client.list_sets(namespace) for s in page if s.is_release]
            probe = registry_probe(settings)
            rows = [
                status_row(cs, client.list_pods(SetRef(cs.namespace, cs.name)), probe)
                for cs in sets
            ]
    except CocoonError as err:
        fail(str(err))
    if output == "json":
        click.echo(json.dumps([asdict(r) for r in rows], indent=2))
        return
    if not rows:
        click.echo("no release-policy CocoonSets" + (f" in {namespace}" if namespace else ""))
        return
    _render(rows)
