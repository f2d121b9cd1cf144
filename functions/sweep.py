"""The `sweep` function: a scheduler tick -> one sweep run (docs/design.md#sweep).

Wires the pure planner and executor of :mod:`shared.sweep` to the process's
clients (`functions.process`, built once per instance). The registry client is only asked for when
the safety net actually reconciles a set, and the reconciler refuses on its
own when no registry is configured: an idle-suspend-only run never needs
`COCOON_REGISTRY_BASE`.
"""

from __future__ import annotations

from datetime import datetime

from functions import process
from shared.config import Settings
from shared.durations import utcnow
from shared.lifecycle import FROM_SETTINGS, PublisherArg, resolve_publisher
from shared.names import SetRef
from shared.ports import KubeApi, SnapshotRegistry
from shared.reconcile import Outcome, reconcile_set
from shared.seats.sweep_hook import SeatSweep
from shared.sweep.executor import sweep
from shared.sweep.report import SweepIncomplete, SweepReport, SweepSummary

__all__ = ["SweepIncomplete", "SweepSummary", "run_sweep"]


def run_sweep(
    *,
    settings: Settings,
    dry_run: bool,
    kube: KubeApi | None = None,
    registry: SnapshotRegistry | None = None,
    now: datetime | None = None,
    publisher: PublisherArg = FROM_SETTINGS,
) -> SweepSummary:
    """Run one sweep; raises `SweepIncomplete` (transient) when work was left undone.

    `kube`, `registry`, `now` and `publisher` are injectable for tests; by default
    the process's clients are used (no publisher when `COCOON_EVENTS_TOPIC` is
    unset) and the clock is read once, so every decision of a run (and every
    reconcile it starts) is made against the same instant.
    """
    client: KubeApi = kube if kube is not None else process.kube_client(settings)
    at = now or utcnow()
    events = resolve_publisher(publisher, settings)
    snapshots: list[SnapshotRegistry | None] = [registry] if registry is not None else []

    def reconcile(ref: SetRef) -> Outcome:
        if not snapshots:
            snapshots.append(process.registry_client(settings))
        return reconcile_set(
            ref, kube=client, registry=snapshots[0], settings=settings, now=at, publisher=events
        )

    def seats(report: SweepReport) -> SeatSweep:
        # Sleep windows, CPU activity and seat-annotation warnings, per page.
        return SeatSweep(report=report, kube=client, now=at)

    return sweep(
        kube=client,
        settings=settings,
        reconcile=reconcile,
        now=at,
        dry_run=dry_run,
        publisher=events,
        page_hook=seats,
    )
