"""The seat-reclaim decisions as tables (pure: no clock, no API)."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from shared import constants as k
from shared.config import Settings
from shared.durations import format_rfc3339
from shared.errors import ConfigError
from shared.models import CocoonSet
from shared.seats.reclaim.decide import (
    Candidate,
    Hold,
    MarkFreed,
    Search,
    SeatWait,
    Stamp,
    choose_victim,
    decide_wait,
    older_waiter_first,
    recorded_victim,
    why_not,
)
from tests.fixtures.cocoon_objects import NS, make_set

NOW = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)
GRACE = timedelta(seconds=30)
POD = "pod-uid-1"


def ago(**kw: float) -> str:
    return format_rfc3339(NOW - timedelta(**kw))


def waker(wait: SeatWait | None = None, **kw: Any) -> CocoonSet:
    ann = dict(kw.pop("annotations", {}))
    if wait is not None:
        ann[k.ANN_SEAT_WAIT] = wait.encode()
    return make_set(
        name=kw.pop("name", "waker"),
        suspend=False,
        phase="Waking",
        hint="node-1",
        annotations=ann,
        **kw,
    )


def victim(
    name: str = "idle", *, idle_h: float = 3, after: str | None = "1h", **kw: Any
) -> CocoonSet:
    ann = {k.ANN_LAST_ACTIVITY: ago(hours=idle_h), **kw.pop("annotations", {})}
    if after is not None:
        ann[k.ANN_RECLAIMABLE_AFTER] = after
    return make_set(
        name=name,
        suspend=kw.pop("suspend", None),
        phase=kw.pop("phase", "Running"),
        annotations=ann,
        uid=f"uid-{name}",
        **kw,
    )


# --- the waker's clock and the one-reclaim-per-wake record -----------------------------


def test_the_first_unschedulable_observation_starts_the_grace() -> None:
    step = decide_wait(waker(), POD, now=NOW, grace=GRACE)
    assert step == Stamp(SeatWait(pod=POD, since=NOW))


def test_a_new_restore_pod_restarts_the_clock() -> None:
    old = SeatWait(pod="older-pod", since=NOW - timedelta(hours=1), victim=f"{NS}/x", at=NOW)
    assert decide_wait(waker(old), POD, now=NOW, grace=GRACE) == Stamp(SeatWait(POD, NOW))


def test_an_unreadable_record_is_rewritten_from_scratch() -> None:
    cs = waker(annotations={k.ANN_SEAT_WAIT: "{not json"})
    assert decide_wait(cs, POD, now=NOW, grace=GRACE) == Stamp(SeatWait(POD, NOW))


@pytest.mark.parametrize(
    ("waited", "expect"),
    [(0, Hold), (29, Hold), (30, Search), (600, Search)],
)
def test_only_a_wake_unschedulable_for_the_grace_searches(waited: int, expect: type) -> None:
    wait = SeatWait(pod=POD, since=NOW - timedelta(seconds=waited))
    assert isinstance(decide_wait(waker(wait), POD, now=NOW, grace=GRACE), expect)


def claimed(at_s: float = 5, freed_s: float | None = None) -> SeatWait:
    return SeatWait(
        pod=POD,
        since=NOW - timedelta(minutes=5),
        victim=f"{NS}/idle",
        at=NOW - timedelta(seconds=at_s),
        freed=None if freed_s is None else NOW - timedelta(seconds=freed_s),
    )


def suspended_by(name: str, phase: str = "Suspending", by: str = f"{NS}/waker") -> CocoonSet:
    return victim(phase=phase, suspend=True, annotations={k.ANN_RECLAIMED_BY: by})


def test_a_reclaim_in_flight_holds_every_other_invocation_for_that_wake() -> None:
    step = decide_wait(waker(claimed()), POD, now=NOW, grace=GRACE, victim=suspended_by("waker"))
    assert isinstance(step, Hold) and "releasing" in step.reason


def test_a_claim_whose_victim_write_has_not_landed_holds_for_one_grace() -> None:
    not_yet = victim()  # still Running, not suspended: the other invocation is mid-write
    step = decide_wait(waker(claimed(at_s=5)), POD, now=NOW, grace=GRACE, victim=not_yet)
    assert isinstance(step, Hold) and "in flight" in step.reason


def test_a_claim_that_never_landed_is_given_up_after_one_grace() -> None:
    step = decide_wait(waker(claimed(at_s=40)), POD, now=NOW, grace=GRACE, victim=victim())
    assert isinstance(step, Search)
    # Judged afresh: an operator's status write must not cost a wake its only candidate.
    assert step.exclude == frozenset()
    assert step.wait.victim is None and step.wait.since == claimed().since


def test_a_victim_suspended_for_another_wake_is_not_ours() -> None:
    other = suspended_by("x", by=f"{NS}/someone-else")
    step = decide_wait(waker(claimed(at_s=40)), POD, now=NOW, grace=GRACE, victim=other)
    assert isinstance(step, Search) and step.wait.victim is None


@pytest.mark.parametrize("gone", [True, False])
def test_a_released_victim_is_recorded_as_freed_once(gone: bool) -> None:
    freed = None if gone else suspended_by("waker", phase="Suspended")
    step = decide_wait(waker(claimed()), POD, now=NOW, grace=GRACE, victim=freed)
    assert step == MarkFreed(replace(claimed(), freed=NOW))


def test_a_freed_seat_gives_the_scheduler_one_grace_before_another_reclaim() -> None:
    v = suspended_by("waker", phase="Suspended")
    held = decide_wait(waker(claimed(freed_s=10)), POD, now=NOW, grace=GRACE, victim=v)
    assert isinstance(held, Hold) and "scheduler" in held.reason
    again = decide_wait(waker(claimed(freed_s=31)), POD, now=NOW, grace=GRACE, victim=v)
    # The seat went to someone else: one more reclaim for this wake.
    assert isinstance(again, Search) and again.exclude == frozenset()


def test_the_record_names_the_victim_to_re_read_only_for_this_pod() -> None:
    assert str(recorded_victim(waker(claimed()), POD)) == f"{NS}/idle"
    assert recorded_victim(waker(claimed()), "another-pod") is None
    assert recorded_victim(waker(SeatWait(POD, NOW)), POD) is None


def test_the_record_round_trips() -> None:
    wait = claimed(freed_s=3)
    assert SeatWait.decode(wait.encode()) == wait


# --- who may give a seat -------------------------------------------------------------


@pytest.mark.parametrize(
    ("cs", "wk", "why"),
    [
        (victim(after=None), waker(), "not reclaimable"),
        (victim(policy="retain"), waker(), "not release"),
        (victim(phase="Waking"), waker(), "not Running"),
        (victim(suspend=True), waker(), "not Running"),
        (victim(hint="node-2"), waker(), "not Running"),
        (victim(idle_h=0.5), waker(), "reclaimable after 3600s"),
        (victim(after="soon"), waker(), "does not parse"),
        (
            victim(annotations={k.ANN_IDLE_EXEMPT_UNTIL: format_rfc3339(NOW + timedelta(hours=1))}),
            waker(),
            "idle-exempt-until",
        ),
        (victim(spec={"nodePool": "gpu"}), waker(), "another node pool"),
        (
            victim(spec={"snapshotCompatibilityClass": "zen3"}),
            waker(spec={"snapshotCompatibilityClass": "zen4"}),
            "CPU class",
        ),
        (victim(), waker(spec={"snapshotCompatibilityClass": "zen4"}), "CPU class"),
        (victim(spec={"nodeName": "node-2"}), waker(), "pinned to another node"),
        (
            victim(spec={"nodeName": "node-2"}),
            waker(spec={"nodeName": "node-1"}),
            "pinned to another node",
        ),
        (victim(), waker(spec={"nodeName": "node-1"}), "not on the waker's pinned node"),
        (victim(annotations={k.ANN_LAST_ACTIVITY: "yesterday"}), waker(), "no readable"),
    ],
)
def test_exclusions(cs: CocoonSet, wk: CocoonSet, why: str) -> None:
    res = why_not(cs, wk, now=NOW)
    assert isinstance(res, str) and why in res


@pytest.mark.parametrize(
    ("cs", "wk"),
    [
        (victim(), waker()),
        # A waker without a class takes any class: its snapshot runs anywhere in the pool.
        (victim(spec={"snapshotCompatibilityClass": "zen3"}), waker()),
        (
            victim(spec={"snapshotCompatibilityClass": "zen4"}),
            waker(spec={"snapshotCompatibilityClass": "zen4"}),
        ),
        (victim(spec={"nodeName": "node-1"}), waker(spec={"nodeName": "node-1"})),
        # An exemption that ended no longer protects.
        (victim(annotations={k.ANN_IDLE_EXEMPT_UNTIL: ago(minutes=1)}), waker()),
    ],
)
def test_fits(cs: CocoonSet, wk: CocoonSet) -> None:
    assert isinstance(why_not(cs, wk, now=NOW), Candidate)


def test_the_waker_is_never_its_own_victim() -> None:
    wk = victim(name="waker")
    assert why_not(wk, wk, now=NOW) == "the waker itself"


def test_candidates_rank_longest_idle_first_then_by_name() -> None:
    sets = [
        victim("b-2h", idle_h=2),
        victim("a-5h", idle_h=5),
        victim("c-2h", idle_h=2),
        victim("young", idle_h=0.2),
        victim("d-9h", idle_h=9, spec={"nodePool": "other"}),
    ]
    ranked = choose_victim(waker(), sets, now=NOW)
    assert [c.cs.name for c in ranked] == ["a-5h", "b-2h", "c-2h"]
    assert ranked[0].idle_for == timedelta(hours=5)


def test_an_excluded_victim_is_skipped() -> None:
    sets = [victim("a", idle_h=5), victim("b", idle_h=2)]
    ranked = choose_victim(waker(), sets, now=NOW, exclude=frozenset({f"{NS}/a"}))
    assert [c.cs.name for c in ranked] == ["b"]


def test_idle_is_measured_as_the_sweep_does_from_the_latest_stamp() -> None:
    cs = victim(idle_h=5, annotations={k.ANN_LAST_WAKE: ago(minutes=10)})
    res = why_not(cs, waker(), now=NOW)
    assert isinstance(res, str) and "idle 600s" in res


# --- configuration ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("raw", "grace"),
    [(None, timedelta(seconds=30)), ("45s", timedelta(seconds=45)), ("off", None)],
)
def test_the_grace_is_configurable_and_can_be_turned_off(
    raw: str | None, grace: timedelta | None
) -> None:
    env = {} if raw is None else {"COCOON_SEAT_RECLAIM_GRACE": raw}
    assert Settings.from_env(env).seat_reclaim_grace == grace


def test_a_bad_grace_names_the_variable() -> None:
    with pytest.raises(ConfigError, match="COCOON_SEAT_RECLAIM_GRACE"):
        Settings.from_env({"COCOON_SEAT_RECLAIM_GRACE": "soon"})


def test_a_wake_takes_at_most_three_seats_in_all() -> None:
    v = suspended_by("waker", phase="Suspended")
    for count, expect in ((1, Search), (2, Search), (3, Hold)):
        wait = replace(claimed(freed_s=31), count=count)
        step = decide_wait(waker(wait), POD, now=NOW, grace=GRACE, victim=v)
        assert isinstance(step, expect), (count, step)
    wait = replace(claimed(freed_s=31), count=3)
    assert SeatWait.decode(wait.encode()) == wait


# --- fair order among waiting wakes ------------------------------------------------------


def waiting(name: str, since_s: float, spec: dict[str, Any] | None = None, **kw: Any) -> CocoonSet:
    wait = SeatWait(pod=f"pod-{name}", since=NOW - timedelta(seconds=since_s), **kw)
    return waker(wait, name=name, uid=f"uid-{name}", spec=spec)


def test_the_longest_waiting_wake_reclaims_first() -> None:
    me = waiting("young", 60)
    wait = SeatWait.decode(me.metadata.annotations[k.ANN_SEAT_WAIT])
    assert wait is not None
    [cand] = choose_victim(me, [victim()], now=NOW)
    others = [me, waiting("old", 300), waiting("newer", 40)]
    assert older_waiter_first(me, wait, cand, others, now=NOW, grace=GRACE) == f"{NS}/old"


@pytest.mark.parametrize(
    "other",
    [
        waiting("old", 300, victim=f"{NS}/x", at=NOW),  # its reclaim is in flight
        waiting("old", 300, count=3),  # took all it may
        waiting("old", 300, spec={"nodePool": "gpu"}),  # the seat does not fit it
        waiting("old", 20),  # waits for less time than me
        make_set(name="old", suspend=False, phase="Running"),  # not waiting
    ],
)
def test_an_older_wake_blocks_only_when_it_would_take_that_seat(other: CocoonSet) -> None:
    me = waiting("me", 60)
    wait = SeatWait.decode(me.metadata.annotations[k.ANN_SEAT_WAIT])
    assert wait is not None
    [cand] = choose_victim(me, [victim()], now=NOW)
    assert older_waiter_first(me, wait, cand, [me, other], now=NOW, grace=GRACE) is None


def test_equal_waits_go_by_name() -> None:
    a, b = waiting("a", 100), waiting("b", 100)
    [cand] = choose_victim(a, [victim()], now=NOW)
    wait_b = SeatWait.decode(b.metadata.annotations[k.ANN_SEAT_WAIT])
    wait_a = SeatWait.decode(a.metadata.annotations[k.ANN_SEAT_WAIT])
    assert wait_a is not None and wait_b is not None
    assert older_waiter_first(b, wait_b, cand, [a, b], now=NOW, grace=GRACE) == f"{NS}/a"
    assert older_waiter_first(a, wait_a, cand, [a, b], now=NOW, grace=GRACE) is None


def test_a_short_grace_still_gives_a_claim_and_a_freed_seat_ten_seconds() -> None:
    short = timedelta(seconds=1)
    not_yet = victim()
    held = decide_wait(waker(claimed(at_s=5)), POD, now=NOW, grace=short, victim=not_yet)
    assert isinstance(held, Hold) and "in flight" in held.reason
    v = suspended_by("waker", phase="Suspended")
    held = decide_wait(waker(claimed(freed_s=5)), POD, now=NOW, grace=short, victim=v)
    assert isinstance(held, Hold) and "scheduler" in held.reason
    again = decide_wait(waker(claimed(freed_s=11)), POD, now=NOW, grace=short, victim=v)
    assert isinstance(again, Search)
