"""The `sweep` function: a scheduler tick -> one sweep run (SPEC §6).

Wires the pure planner and executor of :mod:`shared.sweep` to the real
clients. The Kubernetes client is built (once per process) when the run
starts; the registry client only when the safety net actually reconciles a
set, so an idle-suspend-only run never needs `COCOON_REGISTRY_BASE`.
"""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING

from shared.config import Settings
from shared.durations import utcnow
from shared.names import SetRef
from shared.sweep.execute import SweepKube, SweepSummary, sweep

if TYPE_CHECKING:
    from shared.clients.registry import RegistryClient

__all__ = ["SweepSummary", "run_sweep"]


def run_sweep(
    *,
    settings: Settings,
    dry_run: bool,
    kube: SweepKube | None = None,
    registry: RegistryClient | None = None,
    now: datetime | None = None,
) -> SweepSummary:
    """Run one sweep; raises `SweepIncomplete` (transient) when work was left undone.

    `kube`, `registry` and `now` are injectable for tests; by default the
    process's clients are used and the clock is read once, so every decision of
    a run is made against the same instant.
    """
    if kube is None:
        from shared.clients.kube import get_client as get_kube  # noqa: PLC0415  (cold start)

        kube = get_kube(settings)
    at = now or utcnow()
    clients: dict[str, RegistryClient] = {}
    if registry is not None:
        clients["registry"] = registry
    kube_client = kube

    def reconcile(ref: SetRef) -> object:
        # Imported here: the reconciler and the registry client load only when the
        # safety net has something to do.
        from shared.reconcile import reconcile_set  # noqa: PLC0415

        reg = clients.get("registry")
        if reg is None:
            from shared.clients.registry import get_client as get_registry  # noqa: PLC0415

            reg = clients["registry"] = get_registry(settings)
        return reconcile_set(ref, kube=kube_client, registry=reg, settings=settings, now=now)

    return sweep(kube=kube, settings=settings, reconcile=reconcile, now=at, dry_run=dry_run)
