"""Issue 24, 6: a reclaim does not wait forever on a victim whose hibernation failed.

`Failed` keeps the seat and nothing releases it; before, the waker held
("reclaim in flight: … is releasing its seat (phase Failed)") on every
reconcile, for ever, and never tried another candidate. Pure, no I/O.
"""

from __future__ import annotations

from shared.seats.reclaim.decide import Hold, Search, choose_victim, decide_wait
from tests.fixtures.cocoon_objects import NS
from tests.unit.seats.test_seat_reclaim import GRACE, NOW, POD, claimed, suspended_by, victim, waker


def test_a_failed_victim_is_given_up_for_the_next_candidate() -> None:
    failed = suspended_by("waker", phase="Failed")
    step = decide_wait(waker(claimed()), POD, now=NOW, grace=GRACE, victim=failed)
    assert isinstance(step, Search)
    assert step.wait.victim is None and step.exclude == frozenset({f"{NS}/idle"})
    # The claim still counts: failing victims cannot cascade past the cap.
    assert step.wait.count == claimed().count
    # And the next search does not pick it again.
    other = victim("other")
    picked = choose_victim(waker(step.wait), [failed, other], now=NOW, exclude=step.exclude)
    assert [c.ref.name for c in picked] == ["other"]


def test_a_victim_still_releasing_is_waited_for() -> None:
    step = decide_wait(waker(claimed()), POD, now=NOW, grace=GRACE, victim=suspended_by("waker"))
    assert isinstance(step, Hold)
