"""Two API writes that do not read each other, sent at once. Each is guarded on its own (a
CAS, a uid, a deterministic name), so any subset can land before a crash and the reconciler
decides from every such state. Nothing outlives the invocation: both are always awaited.
"""

from __future__ import annotations

import contextvars
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import TypeVar

from shared.errors import Conflict

A = TypeVar("A")
B = TypeVar("B")

# Shared by every run in the process (requests are served on threads); its threads start on
# first use. A task never submits another, so a full pool only queues, never deadlocks.
_POOL = ThreadPoolExecutor(max_workers=8, thread_name_prefix="cocoon-write")


def beside(fn: Callable[[], A]) -> Future[A]:
    """Start `fn` on a pool thread (in a copy of the caller's context); the caller must
    wait for the future before it answers."""
    return _POOL.submit(contextvars.copy_context().run, fn)


def worse(first: BaseException, second: BaseException) -> BaseException:
    """The error to act on when both writes failed: a Conflict only means "re-read and decide
    again", which any other error covers (the redelivery re-reads too); else the first's."""
    if isinstance(first, Conflict) and not isinstance(second, Conflict):
        return second
    return first


def together(first: Callable[[], A], second: Callable[[], B]) -> tuple[A, B]:
    """Run `second` on a pool thread while `first` runs here; both are always waited for.
    When one fails, the other's result is dropped with the view, which the caller re-reads."""
    pending = beside(second)
    try:
        a = first()
    except BaseException as e:
        other = pending.exception()
        if other is not None and worse(e, other) is other:
            raise other from e
        raise
    return a, pending.result()
