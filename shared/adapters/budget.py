"""At most `MAX_SETS_PER_REQUEST` candidate sets per request, each at least one API read.

Triggers past it are deferred (a 2xx naming the count, since a retried batch would redo the
kept work too; the sweep converges them). The first is always kept, so one event progresses.
"""

from __future__ import annotations

from collections.abc import Sequence

from shared.triggers import SnapshotPushed, Trigger

# A real set's release costs a handful of API requests, a candidate that does not exist
# one GET (tests/e2e/test_hostile_input.py bounds a request's total).
MAX_SETS_PER_REQUEST = 100


def cost(trigger: Trigger) -> int:
    """The sets `trigger` makes the reconciler read."""
    if isinstance(trigger, SnapshotPushed):
        return max(1, len(trigger.sets))
    return 1


def within_budget(
    triggers: Sequence[Trigger], limit: int = MAX_SETS_PER_REQUEST
) -> tuple[list[Trigger], list[Trigger]]:
    """(kept, deferred): the longest prefix whose cost fits `limit`, at least one trigger."""
    spent = 0
    for index, trigger in enumerate(triggers):
        spent += cost(trigger)
        if spent > limit and index > 0:
            return list(triggers[:index]), list(triggers[index:])
    return list(triggers), []
