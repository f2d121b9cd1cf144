"""`cocoon-hibernation status`: every CocoonSet, its phase, hint node and snapshot.

One row per set, release and retain alike (a retain set holds a seat too):
policy, phase, the `hibernated-on-node` hint, whether the `<vm>:hibernate`
snapshot is in the registry (release-policy sets only), the main pod and its
node, and a flag when the set is `Suspended` while a main pod without the
restore marker exists -- the mark of an operator that predates
`hibernatePolicy` recreating the pod and keeping the seat (docs/cli.md).

Then the seat view, per node pool: seats used of the pool's capacity (the
`allocatable.pods` of its Ready, schedulable nodes labelled `cocoonstack.io/pool`),
the wakes waiting for a seat, their place in the pool's line (and the seat they
reclaimed), and the sets that may give their seat (`reclaimable-after`) with
their idle time. `--seats` prints only that view.

Exit 1 when a set is flagged, or when something could not be checked (a snapshot
the registry did not answer for, a capacity the nodes could not be read for)
unless `--allow-unchecked`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import click

from cocoon_hibernation._common import (
    ERROR_PREFIX,
    EXIT_CODES_HELP,
    EXIT_FINDING,
    EXIT_USAGE,
    allow_unchecked_option,
    emit_structured,
    fail,
    format_seconds,
    kube_options,
    namespace_option,
    output_option,
    progress,
)
from cocoon_hibernation._kube import (
    Snapshot,
    cli_settings,
    kube_client,
    list_sets,
    registry_probe,
)
from shared import constants as k
from shared.durations import format_rfc3339, utcnow
from shared.enums import CocoonSetPhase
from shared.errors import CocoonError
from shared.models import CocoonSet, Pod
from shared.names import vm_name
from shared.seats.report import PoolSeats, seat_view

FLAG_STALE_OPERATOR = "main pod exists while Suspended without the restore marker"


@dataclass(frozen=True, slots=True)
class StatusRow:
    namespace: str
    name: str
    policy: str
    phase: str | None
    suspend: bool
    hint: str | None
    snapshot: bool | None  # None: not a release set, or unknown (snapshot_unknown says why)
    snapshot_unknown: str | None
    main_pod: str | None
    node: str | None
    flag: str | None

    def as_dict(self) -> dict[str, Any]:
        return {
            "namespace": self.namespace,
            "name": self.name,
            "policy": self.policy,
            "phase": self.phase,
            "suspend": self.suspend,
            "hint": self.hint,
            "snapshot": self.snapshot,
            "snapshot_unknown": self.snapshot_unknown,
            "main_pod": self.main_pod,
            "node": self.node,
            "flag": self.flag,
        }


def status_row(
    cs: CocoonSet, pods: Sequence[Pod], snapshot: Callable[[str], Snapshot]
) -> StatusRow:
    """Pure: the row for one set, given its pods and a snapshot probe."""
    # Only the pods the set controls are its pods (as the operator and the reconciler keep them).
    live = [p for p in pods if not p.terminating and p.controlled_by(cs.metadata.uid)]
    main = next((p for p in live if p.is_main), None)
    flag = None
    if (
        cs.is_release
        and cs.phase is CocoonSetPhase.SUSPENDED
        and main is not None
        and main.annotations.get(k.ANN_RESTORE) != k.TRUE
    ):
        flag = FLAG_STALE_OPERATOR
    # A retain set keeps its VM: no snapshot to look for (unless a release left a hint).
    probed = (
        snapshot(vm_name(cs.namespace, cs.name, 0))
        if cs.is_release or cs.hint
        else Snapshot(None, "")
    )
    return StatusRow(
        namespace=cs.namespace,
        name=cs.name,
        policy=cs.spec.hibernate_policy.value,
        phase=cs.phase.value if cs.phase is not None else None,
        suspend=cs.suspended,
        hint=cs.hint or None,
        snapshot=probed.present,
        snapshot_unknown=probed.reason or None,
        main_pod=main.name if main is not None else None,
        node=(main.spec.node_name or None) if main is not None else None,
        flag=flag,
    )


def _snapshot_cell(r: StatusRow) -> str:
    if r.snapshot is not None:
        return "yes" if r.snapshot else "no"
    return f"unknown ({r.snapshot_unknown})" if r.snapshot_unknown else "-"


def _table(header: Sequence[str], lines: Sequence[Sequence[str]]) -> None:
    """kubectl's plain columns: padded, the last one free."""
    rows = [list(header), *[list(x) for x in lines]]
    widths = [max(len(r[i]) for r in rows) for i in range(len(header) - 1)]
    for r in rows:
        cells = [cell.ljust(widths[i]) for i, cell in enumerate(r[:-1])]
        click.echo("  ".join([*cells, r[-1]]).rstrip())


def _render(rows: Sequence[StatusRow]) -> None:
    header = ("SET", "POLICY", "PHASE", "SUSPEND", "HINT", "SNAPSHOT", "POD", "NODE", "FLAG")
    _table(
        header,
        [
            (
                f"{r.namespace}/{r.name}",
                r.policy,
                r.phase or "-",
                "yes" if r.suspend else "no",
                r.hint or "-",
                _snapshot_cell(r),
                r.main_pod or "-",
                r.node or "-",
                r.flag or "-",
            )
            for r in rows
        ],
    )


@dataclass(frozen=True, slots=True)
class Capacity:
    """Seats a pool offers: the allocatable pods of its Ready, schedulable nodes."""

    seats: int | None  # None: unknown (reason says why)
    nodes: int = 0
    reason: str = ""


def pool_capacity(nodes: Sequence[Mapping[str, Any]]) -> dict[str, Capacity]:
    """Pure: per pool label, the seats its nodes offer (kube-scheduler's `pods` limit)."""
    seats: dict[str, int] = {}
    count: dict[str, int] = {}
    for node in nodes:
        meta = node.get("metadata") or {}
        pool = (meta.get("labels") or {}).get(k.LABEL_POOL)
        if not pool or (node.get("spec") or {}).get("unschedulable"):
            continue
        status = node.get("status") or {}
        ready = any(
            c.get("type") == "Ready" and c.get("status") == "True"
            for c in status.get("conditions") or []
        )
        if not ready:
            continue
        raw = str((status.get("allocatable") or {}).get("pods") or "0")
        seats[pool] = seats.get(pool, 0) + (int(raw) if raw.isdigit() else 0)
        count[pool] = count.get(pool, 0) + 1
    return {p: Capacity(seats[p], count[p]) for p in seats}


def _pool_dict(p: PoolSeats, cap: Capacity, now: datetime) -> dict[str, Any]:
    return {
        "pool": p.pool,
        "used": p.used,
        "capacity": cap.seats,
        "capacity_unknown": cap.reason or None,
        "nodes": cap.nodes,
        "waiting": [
            {
                "set": w.set,
                "since": format_rfc3339(now - timedelta(seconds=w.age_seconds)),
                "age_seconds": w.age_seconds,
                "victim": w.victim or None,
                "line": w.line or None,
                "position": w.position or None,
            }
            for w in p.waiting
        ],
        "reclaimable": [
            {
                "set": r.set,
                "idle_since": format_rfc3339(now - timedelta(seconds=r.idle_seconds)),
                "idle_seconds": r.idle_seconds,
                "reclaimable_after_seconds": r.reclaimable_after_seconds,
                "eligible": r.eligible,
            }
            for r in p.reclaimable
        ],
    }


def _ago(seconds: int) -> str:
    return format_seconds(timedelta(seconds=seconds))


def _render_seats(pools: Sequence[PoolSeats], caps: Mapping[str, Capacity]) -> None:
    if not pools:
        click.echo("no CocoonSets, so no node pool to show")
        return
    for p in pools:
        cap = caps[p.pool]
        if cap.seats is not None:
            offered = f"of {cap.seats} ({cap.nodes} node(s))"
        else:
            offered = f"of unknown capacity ({cap.reason})"
        click.echo(f"pool {p.pool}: {p.used} seat(s) used {offered}")
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


def _capacities(client: Any, pools: Sequence[PoolSeats]) -> dict[str, Capacity]:
    try:
        found = pool_capacity(client.list_nodes(k.LABEL_POOL))
    except CocoonError as err:
        from cocoon_hibernation._kube import short_reason  # noqa: PLC0415

        reason = "may not list nodes" if "RBAC" in str(err) else short_reason(err)
        return {p.pool: Capacity(None, 0, reason) for p in pools}
    return {p.pool: found.get(p.pool, Capacity(0, 0)) for p in pools}


@click.command(name="status", epilog=EXIT_CODES_HELP)
@kube_options
@namespace_option
@click.option("-l", "--selector", default=None, metavar="SELECTOR", help="Only matching sets.")
@click.option("-A", "--all-namespaces", is_flag=True, help="Every namespace (the default).")
@output_option
@click.option("--seats", "seats_only", is_flag=True, help="Only the seat view per node pool.")
@allow_unchecked_option
def command(
    *,
    kubeconfig: Path | None,
    context: str | None,
    namespace: str | None,
    selector: str | None,
    all_namespaces: bool,
    output: str,
    seats_only: bool,
    allow_unchecked: bool,
) -> None:
    """Every CocoonSet (policy, phase, hint node, snapshot, pod and node, stale-operator
    flag), then per node pool the seats used of its capacity, the waiting wakes and
    the reclaimable sets."""
    if all_namespaces and namespace:
        fail("-A and -n together", code=EXIT_USAGE)
    now = utcnow()
    try:
        settings = cli_settings(kubeconfig, context, namespace)
        with progress("reading CocoonSets"):
            client = kube_client(settings)
            every = list_sets(client, settings, selector)
            # Every cocoon pod (the label's existence selector): seats in use.
            pods = [
                p
                for scope in settings.scopes
                for pg in client.list_pods_matching(scope, k.LABEL_SET_NAME)
                for p in pg
            ]
            pools = seat_view(every, pods, now=now)
            caps = _capacities(client, pools)
            rows: list[StatusRow] = []
            if not seats_only:
                probe = registry_probe(settings)
                by_set: dict[tuple[str, str], list[Pod]] = {}
                for pod in pods:
                    key = (pod.metadata.namespace or "", pod.labels.get(k.LABEL_SET_NAME, ""))
                    by_set.setdefault(key, []).append(pod)
                rows = [
                    status_row(cs, by_set.get((cs.namespace, cs.name), []), probe) for cs in every
                ]
    except CocoonError as err:
        fail(str(err))
    if output != "table":
        seat_data = [_pool_dict(p, caps[p.pool], now) for p in pools]
        if seats_only:
            emit_structured(seat_data, output)
        else:
            emit_structured({"sets": [r.as_dict() for r in rows], "pools": seat_data}, output)
    elif seats_only:
        _render_seats(pools, caps)
    else:
        if rows:
            _render(rows)
        else:
            click.echo("no CocoonSets" + (f" in {namespace}" if namespace else ""))
        click.echo("")
        _render_seats(pools, caps)
    _exit(rows, caps, allow_unchecked)


def _exit(rows: Sequence[StatusRow], caps: Mapping[str, Capacity], allow_unchecked: bool) -> None:
    flagged = [r for r in rows if r.flag]
    unknown = [r for r in rows if r.snapshot_unknown]
    blind = sorted(p for p, c in caps.items() if c.seats is None)
    problems: list[str] = []
    if flagged:
        problems.append(f"{len(flagged)} set(s) flagged: {flagged[0].flag}")
    if not allow_unchecked:
        if unknown:
            problems.append(
                f"snapshot not checked for {len(unknown)} set(s): {unknown[0].snapshot_unknown}"
            )
        if blind:
            problems.append(
                f"capacity not checked for pool(s) {', '.join(blind)}: {caps[blind[0]].reason}"
            )
    if problems:
        hint = "" if allow_unchecked or not (unknown or blind) else " (--allow-unchecked accepts)"
        click.echo(f"{ERROR_PREFIX}{'; '.join(problems)}{hint}", err=True)
        raise SystemExit(EXIT_FINDING)
