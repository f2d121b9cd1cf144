"""The level-triggered reconciler of released seats: `decide` (pure) picks the next step,
`reconcile_set` / `request_wake` perform steps until the set waits or is done.
"""

from __future__ import annotations

from shared.ports import KubeApi, SnapshotRegistry
from shared.reconcile.decide import Observed, decide
from shared.reconcile.executor import reconcile_set, request_wake
from shared.reconcile.mainpod import build_main_pod
from shared.reconcile.steps import Outcome, OutcomeResult, Probe

__all__ = [
    "KubeApi",
    "Observed",
    "Outcome",
    "OutcomeResult",
    "Probe",
    "SnapshotRegistry",
    "build_main_pod",
    "decide",
    "reconcile_set",
    "request_wake",
]
