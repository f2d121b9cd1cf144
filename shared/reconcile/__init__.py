"""The level-triggered reconciler of released seats: `decide` (pure) picks the next step,
`reconcile_set` / `request_wake` perform steps until the set waits or is done.
"""

from __future__ import annotations

from shared.ports import SnapshotRegistry
from shared.reconcile.executor import reconcile_set, request_wake
from shared.reconcile.steps import Outcome, OutcomeResult

__all__ = ["Outcome", "OutcomeResult", "SnapshotRegistry", "reconcile_set", "request_wake"]
