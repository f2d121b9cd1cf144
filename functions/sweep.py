"""The `sweep` function: a scheduler tick -> one sweep run, with the seat economy's page hook.

The registry client is built only when the safety net reconciles a set: an idle-suspend-only
run never needs `COCOON_REGISTRY_BASE`.
"""

from __future__ import annotations

from datetime import datetime
from functools import partial

from functions import process
from shared.config import Settings
from shared.durations import utcnow
from shared.lifecycle import FROM_SETTINGS, PublisherArg, resolve_publisher
from shared.names import SetRef
from shared.ports import KubeApi, SnapshotRegistry
from shared.reconcile import Outcome, reconcile_set
from shared.seats.sweep_hook import SeatSweep
from shared.sweep.executor import sweep
from shared.sweep.report import SweepIncomplete, SweepSummary

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
    The clock is read once: every decision of a run, and every reconcile, sees one instant."""
    client: KubeApi = kube if kube is not None else process.kube_client(settings)
    at = now or utcnow()
    events = resolve_publisher(publisher, settings)

    def reconcile(ref: SetRef) -> Outcome:
        snapshots = registry if registry is not None else process.registry_client(settings)
        return reconcile_set(
            ref, kube=client, registry=snapshots, settings=settings, now=at, publisher=events
        )

    return sweep(
        kube=client,
        settings=settings,
        reconcile=reconcile,
        now=at,
        dry_run=dry_run,
        publisher=events,
        page_hook=partial(SeatSweep, kube=client, now=at),
    )
