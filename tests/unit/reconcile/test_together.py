"""`together`: two writes at once, both always answered before it returns, and the error
a caller must act on when either fails (docs/reads.md#writes-sent-at-once)."""

from __future__ import annotations

import threading

import pytest

from shared.errors import Conflict, PermanentError, TransientError
from shared.reconcile.together import together, worse


def test_both_run_at_once_and_both_results_come_back() -> None:
    # Each waits for the other to have started: sequential calls would time out.
    started = threading.Barrier(2, timeout=5)

    def one() -> str:
        started.wait()
        return "stash"

    def two() -> str:
        started.wait()
        return "flag"

    assert together(one, two) == ("stash", "flag")


def test_the_second_is_answered_before_the_first_ones_error_is_raised() -> None:
    finished = threading.Event()

    def slow_ok() -> None:
        finished.wait(0.2)
        finished.set()

    def fails() -> None:
        raise TransientError("the stash's answer was lost")

    with pytest.raises(TransientError):
        together(fails, slow_ok)
    assert finished.is_set(), "nothing is still in flight when together raises"


def test_a_conflict_yields_to_an_error_that_fails_the_invocation() -> None:
    def conflict() -> None:
        raise Conflict("the set changed")

    def lost() -> None:
        raise TransientError("the Event's answer was lost")

    # A re-read would retry the Event inside this run; a failed invocation is redelivered.
    with pytest.raises(TransientError):
        together(conflict, lost)
    with pytest.raises(TransientError):
        together(lost, conflict)


def test_the_first_error_wins_otherwise() -> None:
    assert isinstance(worse(PermanentError("a"), TransientError("b")), PermanentError)
    assert isinstance(worse(Conflict("a"), Conflict("b")), Conflict)
    one = Conflict("a")
    assert worse(one, Conflict("b")) is one


def test_the_second_ones_error_alone_is_raised() -> None:
    def fine() -> int:
        return 1

    def conflict() -> int:
        raise Conflict("the pod changed")

    with pytest.raises(Conflict):
        together(fine, conflict)
