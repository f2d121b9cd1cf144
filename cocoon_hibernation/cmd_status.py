"""`cocoon-hibernation status`: release-policy sets, their phase, hint node and snapshot.

One row per release-policy set: phase, the `hibernated-on-node` hint, whether
the `<vm>:hibernate` snapshot is in the registry, and a flag (SPEC §12) when
the set is `Suspended` while a main pod without the restore marker exists --
the mark of an operator that predates `hibernatePolicy` recreating the pod and
keeping the seat. Works against any kubeconfig; the registry column needs
`COCOON_REGISTRY_BASE` (else it shows `?`).

Then the seat view, per node pool: seats used of offered, the wakes waiting
for a seat with their age, their place in the pool's line (and the seat they
reclaimed), and the sets that may give their seat (`reclaimable-after`) with
their idle time. Seats used are the bound pods of the pool's sets (nodes are
not read: no RBAC on nodes). `--seats` prints only that view (`-o json` then
prints it as JSON).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from datetime import timedelta
from pathlib import Path

import click
from rich.console import Console
from rich.table import Table

from cocoon_hibernation._common import fail, is_tty, kube_options, progress
from cocoon_hibernation._kube import cli_settings, kube_client, registry_probe
from shared import constants as k
from shared.durations import utcnow
from shared.enums import CocoonSetPhase
from shared.errors import CocoonError
from shared.models import CocoonSet, Pod
from shared.names import SetRef, vm_name
from shared.seats.report import PoolSeats, seat_view
from shared.sweep.plan import format_duration

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


def _ago(seconds: int) -> str:
    return format_duration(timedelta(seconds=seconds))


def _render_seats(pools: Sequence[PoolSeats]) -> None:
    if not pools:
        click.echo("no CocoonSets, so no node pool to show")
        return
    for p in pools:
        click.echo(f"pool {p.pool}: {p.used} seat(s) used")
        if p.waiting:
            click.echo("  waiting wakes (longest first):")
            for w in p.waiting:
                took = f", reclaimed the seat of {w.victim}" if w.victim else ""
                line = f", #{w.position} in line ({w.line})" if w.position else ""
                click.echo(f"    {w.set}  waiting {_ago(w.age_seconds)}{line}{took}")
        else:
            click.echo("  no wake waiting")
        if p.reclaimable:
            click.echo("  reclaimable sets (longest idle first):")
            for r in p.reclaimable:
                mark = "can be reclaimed now" if r.eligible else "not yet"
                click.echo(
                    f"    {r.set}  idle {_ago(r.idle_seconds)} "
                    f"(reclaimable after {_ago(r.reclaimable_after_seconds)}): {mark}"
                )
        else:
            click.echo("  no reclaimable set")


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
@click.option("--seats", "seats_only", is_flag=True, help="Only the seat view per node pool.")
def command(
    *, kubeconfig: Path | None, namespace: str | None, output: str, seats_only: bool
) -> None:
    """Release-policy sets (phase, hint node, snapshot, stale-operator flag), then per
    node pool the seats used, the waiting wakes and the reclaimable sets."""
    try:
        settings = cli_settings(kubeconfig)
        with progress("reading CocoonSets"):
            client = kube_client(settings)
            every = [s for page in client.list_sets(namespace) for s in page]
            # Every cocoon pod (the label's existence selector): seats in use.
            pods = [p for pg in client.list_pods_matching(namespace, k.LABEL_SET_NAME) for p in pg]
            pools = seat_view(every, pods, now=utcnow())
            rows: list[StatusRow] = []
            if not seats_only:
                probe = registry_probe(settings)
                rows = [
                    status_row(cs, client.list_pods(SetRef(cs.namespace, cs.name)), probe)
                    for cs in every
                    if cs.is_release
                ]
    except CocoonError as err:
        fail(str(err))
    if seats_only:
        if output == "json":
            click.echo(json.dumps([asdict(p) for p in pools], indent=2))
        else:
            _render_seats(pools)
        return
    if output == "json":
        click.echo(json.dumps([asdict(r) for r in rows], indent=2))
        return
    if not rows:
        click.echo("no release-policy CocoonSets" + (f" in {namespace}" if namespace else ""))
        return
    _render(rows)
    click.echo("")
    _render_seats(pools)
