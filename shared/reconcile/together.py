"""Two API writes that do not read each other, sent at once. Each is guarded on its own (a
CAS, a uid, a deterministic name), so any subset can land before a crash and the reconciler
decides from every such state. Nothing outlives the invocation: both are always awaited.
"""

from __future__ import annotations

import contextvars
import threading
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import TypeVar

from shared.errors import Conflict

A = TypeVar("A")
B = TypeVar("B")

# Shared by every run in the process (functions-framework serves requests on threads).
# A task never submits another, so a full pool only queues, never deadlocks.
_WORKERS = 8
_pool: ThreadPoolExecutor | None = None
_pool_lock = threading.Lock()


def _executor() -> ThreadPoolExecutor:
    global _pool  # noqa: PLW0603 - one pool per process, made on first use (cold start)
    with _pool_lock:
        if _pool is None:
            _pool = ThreadPoolExecutor(max_workers=_WORKERS, thread_name_prefix="cocoon-write")
        return _pool


def beside(fn: Callable[[], A]) -> Future[A]:
    """Start `fn` on a pool thread (in a copy of the caller's context); the caller must
    wait for the future before it answers."""
    return _executor().submit(contextvars.copy_context().run, fn)


def worse(first: BaseException, second: BaseException) -> BaseException:
    """The error the caller should act on when both writes failed. A Conflict only means
    "re-read and decide again", which any other error (a failed invocation, redelivered,
    re-reads too) covers; otherwise the first write's error."""
    if isinstance(first, Conflict) and not isinstance(second, Conflict):
        return second
    return first


def together(first: Callable[[], A], second: Callable[[], B]) -> tuple[A, B]:
    """Run `second` on a pool thread while `first` runs here; return both results.

    Both are always waited for, so no request is still in flight when this returns or
    raises. Each callable applies its own lasting effects (a count, a log line) before
    it returns: when one fails, the other's result is dropped with the run's view,
    which the caller re-reads.
    """
    pending = beside(second)
    try:
        a = first()
    except BaseException as e:
        other = pending.exception()
        if other is not None and worse(e, other) is other:
            raise other from e
        raise
    return a, pending.result()
