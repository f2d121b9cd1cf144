"""`cocoon-hibernation status`: every CocoonSet (policy, phase, hint, snapshot, pod, a
stale-operator flag, why it waits), then the seats of each node pool; `-w` as kubectl's."""

from __future__ import annotations

import itertools
import json
import queue
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from datetime import datetime, timedelta
from functools import cached_property, partial
from pathlib import Path
from typing import Any

import click

from cocoon_hibernation._common import (
    ERROR_PREFIX,
    EXIT_CODES_HELP,
    EXIT_USAGE,
    allow_unchecked_option,
    emit_structured,
    fail,
    kube_options,
    output_option,
    progress,
    set_options,
)
from cocoon_hibernation._kube import cli_settings, list_sets, read_client, registry_client
from shared import constants as k
from shared import log
from shared.clients.kube import parse
from shared.clients.registry import RegistryClient
from shared.durations import format_rfc3339, utcnow
from shared.enums import CocoonSetPhase
from shared.errors import CocoonError, RegistryAuthError
from shared.models import CocoonSet, Pod
from shared.names import recorded_vm_names
from shared.seats.report import PoolSeats, seat_view
from shared.sweep.decide import format_duration

FLAG_STALE_OPERATOR = "main pod exists while Suspended without the restore marker"


@dataclass(frozen=True, slots=True)
class Snapshot:
    """Whether `<vm>:hibernate` is in the registry: present True/False, or None and why."""

    present: bool | None
    reason: str = ""  # why unknown: short, for a table cell


def short_reason(err: CocoonError) -> str:
    """A registry error as a few words for a table cell (the full text goes to -v logs)."""
    text = str(err)
    if isinstance(err, RegistryAuthError):
        return "registry refused the credentials"
    if "timed out" in text:
        return "registry timed out"
    if "cannot reach" in text:
        return "registry unreachable"
    if "answered" in text or "unexpected status" in text:
        return text.rsplit(": ", 1)[-1][:60]
    return text[:60]


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
    why: str | None = None  # why it waits or is stuck, in the cluster's words


def _settled(cs: CocoonSet) -> bool:
    """Running and not suspended, or Suspended and suspended (a Running set asked to suspend
    is in transition: a refused `spec.suspend` write leaves it there)."""
    if cs.phase is CocoonSetPhase.RUNNING:
        return not cs.suspended
    return cs.phase is CocoonSetPhase.SUSPENDED and cs.suspended


def latest_warnings(events: Sequence[Mapping[str, Any]]) -> dict[tuple[str, str], str]:
    """Pure: per (namespace, set name), the newest Warning Event as `Reason: message`."""
    best: dict[tuple[str, str], tuple[str, str]] = {}
    for ev in events:
        inv = ev.get("involvedObject") or {}
        if inv.get("kind") != k.KIND or ev.get("type") != "Warning":
            continue
        key = (str(inv.get("namespace") or ""), str(inv.get("name") or ""))
        meta = ev.get("metadata") or {}
        stamps = [ev.get(key) for key in ("lastTimestamp", "eventTime", "firstTimestamp")]
        when = str(next((t for t in stamps if t), meta.get("creationTimestamp") or ""))
        text = f"{ev.get('reason') or 'Warning'}: {' '.join(str(ev.get('message') or '').split())}"
        if key not in best or when >= best[key][0]:
            best[key] = (when, text)
    return {key: text for key, (_, text) in best.items()}


def status_row(
    cs: CocoonSet,
    pods: Sequence[Pod],
    snapshot: Callable[[str], Snapshot],
    warning: str | None = None,
) -> StatusRow:
    """Pure: the row for one set, given its pods, a snapshot probe and its latest warning."""
    # Only the pods the set controls are its pods (as the operator and the reconciler keep them).
    live = [p for p in pods if not p.terminating and p.controlled_by(cs.metadata.uid)]
    main = next((p for p in live if p.is_main), None)
    unmarked = main is not None and main.annotations.get(k.ANN_RESTORE) != k.TRUE
    stale = unmarked and cs.is_release and cs.phase is CocoonSetPhase.SUSPENDED
    flag = FLAG_STALE_OPERATOR if stale else None
    # WHY: the scheduler's verdict on a Pending main pod, else, while the set is in transition,
    # its latest Warning Event (on a settled set an old warning is history).
    why = None if _settled(cs) else warning
    if main is not None and (main.status.phase or "Pending") == "Pending":
        message = main.unschedulable_message()
        if message is not None:
            why = f"pod {main.name} unschedulable: {message or 'no message'}"
    probed = Snapshot(None)  # a retain set keeps its VM: no snapshot (unless a release left a hint)
    if cs.is_release or cs.hint:
        # Under the name the release recorded (either naming generation), as the wake probes.
        probed = snapshot(recorded_vm_names(cs.namespace, cs.name, 0, cs.recorded_vm_names)[0])
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
        why=why,
    )


_HEADER = ("SET", "POLICY", "PHASE", "SUSPEND", "HINT", "SNAPSHOT", "POD", "NODE", "FLAG", "WHY")


def _render(rows: Sequence[StatusRow], widths: list[int] | None = None) -> list[int]:
    """kubectl's plain columns; a watch's later lines pass the returned widths (no header)."""
    lines = [
        [
            f"{r.namespace}/{r.name}",
            r.policy,
            r.phase or "-",
            "yes" if r.suspend else "no",
            r.hint or "-",
            ("yes" if r.snapshot else "no")
            if r.snapshot is not None
            else (f"unknown ({r.snapshot_unknown})" if r.snapshot_unknown else "-"),
            r.main_pod or "-",
            r.node or "-",
            r.flag or "-",
            r.why or "-",
        ]
        for r in rows
    ]
    if widths is None:
        lines.insert(0, list(_HEADER))
        widths = [max(len(line[i]) for line in lines) for i in range(len(_HEADER) - 1)]
    for line in lines:
        cells = [cell.ljust(widths[i]) for i, cell in enumerate(line[:-1])]
        click.echo("  ".join([*cells, line[-1]]).rstrip())
    return widths


@dataclass(frozen=True, slots=True)
class Capacity:
    """Seats a pool offers: the allocatable pods of its Ready, schedulable nodes."""

    seats: int | None  # None: unknown (reason says why)
    nodes: int = 0
    reason: str = ""


def pool_capacity(nodes: Sequence[Mapping[str, Any]]) -> dict[str, Capacity]:
    """Pure: per pool label, the seats its nodes offer (kube-scheduler's `pods` limit)."""
    found: dict[str, Capacity] = {}
    for node in nodes:
        pool = ((node.get("metadata") or {}).get("labels") or {}).get(k.LABEL_POOL)
        status = node.get("status") or {}
        conditions = status.get("conditions") or []
        ready = any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)
        if not pool or not ready or (node.get("spec") or {}).get("unschedulable"):
            continue
        raw = str((status.get("allocatable") or {}).get("pods") or "0")
        had = found.get(pool, Capacity(0))
        found[pool] = Capacity((had.seats or 0) + (int(raw) if raw.isdigit() else 0), had.nodes + 1)
    return found


def _pool_dict(p: PoolSeats, cap: Capacity, now: datetime) -> dict[str, Any]:
    def since(seconds: int) -> str:
        return format_rfc3339(now - timedelta(seconds=seconds))

    # asdict's fields after the set and its start; "" and 0 (none) as null.
    waiting = [
        {"set": w.set, "since": since(w.age_seconds), **asdict(w)}
        | {"victim": w.victim or None, "line": w.line or None, "position": w.position or None}
        for w in p.waiting
    ]
    reclaimable = [
        {"set": r.set, "idle_since": since(r.idle_seconds), **asdict(r)} for r in p.reclaimable
    ]
    return {
        "pool": p.pool,
        "used": p.used,
        "capacity": cap.seats,
        "capacity_unknown": cap.reason or None,
        "nodes": cap.nodes,
        "waiting": waiting,
        "reclaimable": reclaimable,
    }


def _ago(seconds: int) -> str:
    return format_duration(timedelta(seconds=seconds))


def _render_seats(pools: Sequence[PoolSeats], caps: Mapping[str, Capacity]) -> None:
    if not pools:
        click.echo("no CocoonSets, so no node pool to show")
        return
    for p in pools:
        cap = caps[p.pool]
        offered = f"{cap.seats} ({cap.nodes} node(s))"
        if cap.seats is None:
            offered = f"unknown capacity ({cap.reason})"
        click.echo(f"pool {p.pool}: {p.used} seat(s) used of {offered}")
        click.echo("  waiting wakes (longest first):" if p.waiting else "  no wake waiting")
        for w in p.waiting:
            took = f", reclaimed the seat of {w.victim}" if w.victim else ""
            line = f", #{w.position} in line ({w.line})" if w.position else ""
            click.echo(f"    {w.set}  waiting {_ago(w.age_seconds)}{line}{took}")
        click.echo(
            "  reclaimable sets (longest idle first):" if p.reclaimable else "  no reclaimable set"
        )
        for r in p.reclaimable:
            mark = "can be reclaimed now" if r.eligible else "not yet"
            click.echo(
                f"    {r.set}  idle {_ago(r.idle_seconds)} "
                f"(reclaimable after {_ago(r.reclaimable_after_seconds)}): {mark}"
            )


def _capacities(client: Any, pools: Sequence[PoolSeats]) -> dict[str, Capacity]:
    try:
        found = pool_capacity(client.list_nodes(k.LABEL_POOL))
    except CocoonError as err:
        reason = "may not list nodes" if "RBAC" in str(err) else short_reason(err)
        return {p.pool: Capacity(None, 0, reason) for p in pools}
    return {p.pool: found.get(p.pool, Capacity(0, 0)) for p in pools}


@dataclass
class _Reader:
    """One read of everything status shows; kept between a watch's reads."""

    client: Any
    settings: Any
    selector: str | None
    # (namespace, name) -> (resourceVersion, Snapshot): re-probed when the set changed.
    snapshots: dict[tuple[str, str], tuple[str, Snapshot]] = field(default_factory=dict)
    warned: dict[tuple[str, str], str] = field(default_factory=dict)
    warned_at: float = -1e9

    @cached_property
    def registry(self) -> RegistryClient | None:
        return registry_client(self.settings)

    def sets_and_pods(self) -> tuple[list[CocoonSet], list[Pod]]:
        every = list_sets(self.client, self.settings, self.selector)
        # Every cocoon pod (the label's existence selector): seats in use.
        scopes = self.settings.scopes
        pages = [pg for s in scopes for pg in self.client.list_pods_matching(s, k.LABEL_SET_NAME)]
        return every, [p for page in pages for p in page]

    def warnings(self, every: Sequence[CocoonSet]) -> dict[tuple[str, str], str]:
        """Read only while a set is in transition; reused for WARNINGS_TTL_S (a burst: one LIST)."""
        if all(_settled(cs) for cs in every):
            return {}
        if time.monotonic() - self.warned_at >= WARNINGS_TTL_S:
            selector = f"involvedObject.kind={k.KIND},type=Warning"
            try:
                scopes = self.settings.scopes
                events = [e for s in scopes for e in self.client.list_events(s, selector)]
            except CocoonError as err:
                log.info("events not read", error=str(err))
                events = []
            self.warned, self.warned_at = latest_warnings(events), time.monotonic()
        return self.warned

    def rows(self, every: Sequence[CocoonSet], pods: Sequence[Pod]) -> list[StatusRow]:
        by_set: dict[tuple[str, str], list[Pod]] = {}
        for pod in pods:
            key = (pod.metadata.namespace or "", pod.labels.get(k.LABEL_SET_NAME, ""))
            by_set.setdefault(key, []).append(pod)
        warnings = self.warnings(every)
        return [
            status_row(
                cs,
                by_set.get((cs.namespace, cs.name), []),
                partial(self._snapshot, cs),
                warnings.get((cs.namespace, cs.name)),
            )
            for cs in every
        ]

    def _snapshot(self, cs: CocoonSet, vm: str) -> Snapshot:
        key, version = (cs.namespace, cs.name), cs.metadata.resource_version or ""
        hit = self.snapshots.get(key)
        if hit is None or hit[0] != version or hit[1].present is None:
            hit = self.snapshots[key] = (version, self._probe(vm))
        return hit[1]

    def _probe(self, vm: str) -> Snapshot:
        """An error is never read as absent."""
        if self.registry is None:
            return Snapshot(None, "COCOON_REGISTRY_BASE not set")
        try:
            return Snapshot(self.registry.snapshot_present(vm))
        except CocoonError as err:
            log.info("snapshot probe failed", vm=vm, error=str(err))
            return Snapshot(None, short_reason(err))


@click.command(name="status", epilog=EXIT_CODES_HELP)
@kube_options
@set_options
@click.option("-A", "--all-namespaces", is_flag=True, help="Every namespace (the default).")
@output_option
@click.option("--seats", "seats_only", is_flag=True, help="Only the seat view per node pool.")
@click.option("-w", "--watch", is_flag=True, help="Then each changed set's line, until Ctrl-C.")
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
    watch: bool,
    allow_unchecked: bool,
) -> None:
    """Every CocoonSet (policy, phase, hint node, snapshot, pod and node, stale-operator flag,
    why it waits), then per node pool: seats used of capacity, waiting wakes, reclaimable sets."""
    if all_namespaces and namespace:
        fail("-A and -n together", code=EXIT_USAGE)
    if watch and seats_only:
        fail("--watch shows the sets; --seats cannot be watched", code=EXIT_USAGE)
    now = utcnow()
    try:
        settings = cli_settings(kubeconfig, context, namespace)
        with progress("reading CocoonSets"):
            reader = _Reader(read_client(settings), settings, selector)
            every, pods = reader.sets_and_pods()
            pools = seat_view(every, pods, now=now)
            caps = _capacities(reader.client, pools)
            rows = [] if seats_only else reader.rows(every, pods)
    except CocoonError as err:
        fail(str(err))
    widths = None
    if output == "table" and not seats_only:
        if rows:
            widths = _render(rows)
        else:
            click.echo("no CocoonSets" + (f" in {namespace}" if namespace else ""))
    if watch:
        _watch(reader, rows, output, widths)
        return
    if output != "table":
        seat_data = [_pool_dict(p, caps[p.pool], now) for p in pools]
        both = {"sets": [asdict(r) for r in rows], "pools": seat_data}
        emit_structured(seat_data if seats_only else both, output)
    else:
        if not seats_only:
            click.echo("")
        _render_seats(pools, caps)
    _exit(rows, caps, allow_unchecked)


# A watch's poll when the client cannot watch; how long the Warning Events for WHY are reused.
WATCH_INTERVAL_S = 1.0
WARNINGS_TTL_S = 1.0

Update = list[StatusRow] | str  # every row now, or an error to tell (and retry)


def _watch(reader: _Reader, rows: list[StatusRow], output: str, widths: list[int] | None) -> None:
    """kubectl get -w: after the table, a line per changed or deleted set until Ctrl-C (with
    -o json/yaml, one JSON object a line); a failed read is said on stderr and retried."""
    # The table is printed already; JSON lines start with every set.
    shown = {(r.namespace, r.name): r for r in rows} if output == "table" else {}
    failing = ""
    updates = _streamed(reader) if hasattr(reader.client, "watch") else _polled(reader)
    try:
        for update in itertools.chain([rows], updates):
            if isinstance(update, str):
                if update != failing:
                    click.echo(f"{ERROR_PREFIX}{update} (retrying)", err=True)
                failing = update
                continue
            failing = ""
            changed = [r for r in update if shown.get((r.namespace, r.name)) != r]
            gone = sorted(set(shown) - {(r.namespace, r.name) for r in update})
            if output != "table":
                for r in changed:
                    click.echo(json.dumps(asdict(r), ensure_ascii=False))
            elif changed:
                widths = _render(changed, widths)
            for ns, name in gone:
                click.echo(
                    json.dumps({"namespace": ns, "name": name, "deleted": True})
                    if output != "table"
                    else f"{ns}/{name}  deleted"
                )
            shown = {(r.namespace, r.name): r for r in update}
    except KeyboardInterrupt:
        return  # Ctrl-C ends a watch; it is not an error (kubectl exits 0 too)


def _read(rows: Callable[..., list[StatusRow]], *args: Any) -> Update:
    try:
        return rows(*args)
    except CocoonError as err:
        return str(err)


def _polled(reader: _Reader) -> Iterator[Update]:
    while True:
        time.sleep(WATCH_INTERVAL_S)
        yield _read(lambda: reader.rows(*reader.sets_and_pods()))


def _streamed(reader: _Reader) -> Iterator[Update]:
    """The rows after each change, from one watch thread per (resource, scope) feeding a
    queue, applied in order; an expired or broken watch lists again."""
    client = reader.client
    models: dict[str, type[CocoonSet | Pod]] = {"cocoonsets": CocoonSet, "pods": Pod}
    selectors = {"cocoonsets": reader.selector, "pods": k.LABEL_SET_NAME}
    # (resource, scope, a watch event's type, or LIST with every item, or FAILED, its payload)
    feed: queue.Queue[tuple[str, str | None, str, Any]] = queue.Queue()
    stores: dict[str, dict[tuple[str, str], Any]] = {"cocoonsets": {}, "pods": {}}

    def apply(resource: str, scope: str | None, kind: str, obj: Any) -> None:
        store = stores[resource]
        if kind == "LIST":
            for key in [key for key in store if scope in (None, key[0])]:
                del store[key]
        for raw in obj if kind == "LIST" else [obj]:
            try:
                item = parse(models[resource], raw)
            except CocoonError:
                continue  # an unreadable object is left out, as a LIST leaves it out
            key = (item.metadata.namespace or "", item.metadata.name)
            if kind == "DELETED":
                store.pop(key, None)
            else:
                store[key] = item

    def follow(resource: str, scope: str | None) -> None:
        version = ""
        while True:
            try:
                if not version:
                    items, version = client.list_raw(resource, scope, selectors[resource])
                    feed.put((resource, scope, "LIST", items))
                # Ends at the server's timeout: watch on from `version`.
                for event in client.watch(resource, scope, selectors[resource], version):
                    obj = event.get("object") or {}
                    if event.get("type") == "ERROR":
                        version = ""  # the resourceVersion is too old (410): list again
                        break
                    version = str((obj.get("metadata") or {}).get("resourceVersion") or version)
                    if event.get("type") != "BOOKMARK":
                        feed.put((resource, scope, str(event.get("type")), obj))
            except CocoonError as err:
                feed.put((resource, scope, "FAILED", str(err)))
                version = ""
                time.sleep(WATCH_INTERVAL_S)

    # Rows once every (resource, scope) was listed, then after each change.
    pending = {(resource, scope) for resource in stores for scope in reader.settings.scopes}
    for resource, scope in pending:
        threading.Thread(target=follow, args=(resource, scope), daemon=True).start()
    while True:
        try:
            resource, scope, kind, obj = feed.get(timeout=0.5)  # so Ctrl-C is not held up
        except queue.Empty:
            continue
        if kind == "FAILED":
            yield str(obj)
            continue
        apply(resource, scope, kind, obj)
        pending.discard((resource, scope))
        if not pending:
            sets, pods = stores["cocoonsets"], list(stores["pods"].values())
            yield _read(reader.rows, [sets[key] for key in sorted(sets)], pods)


def _exit(rows: Sequence[StatusRow], caps: Mapping[str, Capacity], allow_unchecked: bool) -> None:
    flagged = [r for r in rows if r.flag]
    unknown = [] if allow_unchecked else [r for r in rows if r.snapshot_unknown]
    blind = [] if allow_unchecked else sorted(p for p, c in caps.items() if c.seats is None)
    problems: list[str] = []
    if flagged:
        problems.append(f"{len(flagged)} set(s) flagged: {flagged[0].flag}")
    if unknown:
        why = unknown[0].snapshot_unknown
        problems.append(f"snapshot not checked for {len(unknown)} set(s): {why}")
    if blind:
        why = caps[blind[0]].reason
        problems.append(f"capacity not checked for pool(s) {', '.join(blind)}: {why}")
    if problems:
        hint = " (--allow-unchecked accepts)" if unknown or blind else ""
        fail(f"{'; '.join(problems)}{hint}")
