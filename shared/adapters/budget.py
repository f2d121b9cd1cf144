"""Bounded work per request: how many sets one request may make the functions read.

A trigger costs the sets it makes the reconciler look at: a push of a VM name
costs one per candidate set (`SnapshotPushed.sets`: one for today's hashed
names, one per split for a legacy name like `vk-a-b-c-d-e-f-0`); a set change
or a wake request one; a sweep tick one (a batch holds at most two, deduped).
Each candidate set is at least one API read, so without a bound one
notification of 1,000 distinct legacy names costs over 10,000 requests.

Triggers are kept in arrival order until the next one would pass the budget;
the rest are *deferred*, never silently dropped: the caller answers how many
and why (a batch's sender retries the whole batch, which would repeat the kept
work and never get further, so the answer is a 2xx naming the deferred count),
and the scheduled sweep converges every set a deferred push or set change was
about. A wake request is not a hint the sweep can rebuild, but it arrives one per
request (a CloudEvent, a Pub/Sub push), and the first trigger is always kept, so
a single event always makes progress.
"""

from __future__ import annotations

from collections.abc import Sequence

from shared.triggers import SnapshotPushed, Trigger

# Sets one request may make the functions look at. A release of a real set costs
# a handful of requests, a candidate that does not exist one GET: 100 sets keep
# one request under about 300 API requests (tests/e2e/test_hostile_input.py).
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
