"""Sleep windows as tables: which tick is due, catch-up, never doubled, DST, bad input."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

import pytest

from shared import constants as k
from shared.durations import format_rfc3339
from shared.models import CocoonSet
from shared.seats.schedule import (
    Deferred,
    ScheduleAction,
    ScheduleDecision,
    Tick,
    decide_schedule,
    encode_applied,
    parse_schedule,
)
from shared.seats.sweep_hook import config_problems
from tests.fixtures.cocoon_objects import make_set

PARIS = ZoneInfo("Europe/Paris")
SLEEP = parse_schedule("0 20 * * 1-5 Europe/Paris")  # weekdays 20:00 Paris
WAKE = parse_schedule("0 8 * * 1-5 Europe/Paris")


def paris(*args: int) -> datetime:
    return datetime(*args, tzinfo=PARIS).astimezone(UTC)  # type: ignore[misc]


def running(applied: str | None = None, **kw: Any) -> CocoonSet:
    ann = dict(kw.pop("annotations", {}))
    if applied is not None:
        ann[k.ANN_SCHEDULE_APPLIED] = applied
    return make_set(
        suspend=kw.pop("suspend", None), phase=kw.pop("phase", "Running"), annotations=ann, **kw
    )


def decide(cs: CocoonSet, now: datetime, **kw: Any) -> ScheduleDecision | Deferred | None:
    return decide_schedule(cs, sleep=kw.get("sleep", SLEEP), wake=kw.get("wake", WAKE), now=now)


# Monday 2026-11-30.
MON_0800 = paris(2026, 11, 30, 8, 0)
MON_2000 = paris(2026, 11, 30, 20, 0)
FRI_2000 = paris(2026, 11, 27, 20, 0)


def test_the_first_sight_of_a_schedule_is_a_baseline_not_an_order() -> None:
    # Added at 10:00 on a Monday: the latest tick was the 08:00 wake; nothing to do but record.
    d = decide(running(), paris(2026, 11, 30, 10, 0))
    assert d == ScheduleDecision(ScheduleAction.RECORD, Tick.WAKE, MON_0800)
    # Added at 23:00: the 20:00 sleep is in the past, so the set is NOT suspended at once.
    d = decide(running(), paris(2026, 11, 30, 23, 0))
    assert d == ScheduleDecision(ScheduleAction.RECORD, Tick.SLEEP, MON_2000)


def test_the_sleep_tick_suspends_at_its_minute() -> None:
    cs = running(encode_applied(Tick.WAKE, MON_0800))
    assert decide(cs, paris(2026, 11, 30, 19, 59, 59)) is None
    d = decide(cs, paris(2026, 11, 30, 20, 0, 10))
    assert d == ScheduleDecision(ScheduleAction.SUSPEND, Tick.SLEEP, MON_2000)
    assert d.record == f"sleep@{format_rfc3339(MON_2000)}"


def test_a_missed_tick_is_caught_up_on_the_next_run() -> None:
    # The sweep did not run at 20:00 (down until 21:37): the next run applies the tick.
    cs = running(encode_applied(Tick.WAKE, MON_0800))
    d = decide(cs, paris(2026, 11, 30, 21, 37))
    assert d == ScheduleDecision(ScheduleAction.SUSPEND, Tick.SLEEP, MON_2000)


def test_an_applied_tick_is_never_applied_twice() -> None:
    applied = running(encode_applied(Tick.SLEEP, MON_2000), suspend=True, phase="Suspended")
    assert decide(applied, paris(2026, 11, 30, 20, 1)) is None
    # A user woke it by hand at 21:00: the applied sleep does not put it back to sleep.
    woken_by_hand = running(encode_applied(Tick.SLEEP, MON_2000))
    assert decide(woken_by_hand, paris(2026, 11, 30, 23, 0)) is None


def test_a_long_outage_applies_only_the_latest_tick() -> None:
    # Down from Friday 19:00 to Monday 09:00: Friday's sleep and Monday's wake were missed;
    # the state the schedule asks for now is "awake", which the set already is.
    cs = running(encode_applied(Tick.WAKE, paris(2026, 11, 27, 8, 0)))
    d = decide(cs, paris(2026, 11, 30, 9, 0))
    assert d == ScheduleDecision(ScheduleAction.RECORD, Tick.WAKE, MON_0800)


def test_the_wake_tick_unsuspends_a_sleeping_set() -> None:
    cs = running(encode_applied(Tick.SLEEP, FRI_2000), suspend=True, phase="Suspended")
    # Weekend: Friday's sleep still holds.
    assert decide(cs, paris(2026, 11, 29, 12, 0)) is None
    d = decide(cs, paris(2026, 11, 30, 8, 3))
    assert d == ScheduleDecision(ScheduleAction.WAKE, Tick.WAKE, MON_0800)


def test_a_sleep_tick_waits_for_a_wake_in_flight_and_for_an_exemption() -> None:
    base = encode_applied(Tick.WAKE, MON_0800)
    waking = running(base, phase="Waking", hint="node-1")
    assert isinstance(decide(waking, paris(2026, 11, 30, 20, 5)), Deferred)
    exempt = running(
        base,
        annotations={k.ANN_IDLE_EXEMPT_UNTIL: format_rfc3339(paris(2026, 11, 30, 22, 0))},
    )
    assert isinstance(decide(exempt, paris(2026, 11, 30, 20, 5)), Deferred)
    # Once the exemption ends, the deferred tick is caught up.
    d = decide(exempt, paris(2026, 11, 30, 22, 1))
    assert d == ScheduleDecision(ScheduleAction.SUSPEND, Tick.SLEEP, MON_2000)


def test_a_tie_wakes() -> None:
    same = parse_schedule("0 8 * * * Europe/Paris")
    cs = running(encode_applied(Tick.SLEEP, FRI_2000), suspend=True)
    d = decide_schedule(cs, sleep=same, wake=same, now=paris(2026, 11, 30, 8, 0))
    assert d is not None and not isinstance(d, Deferred) and d.tick is Tick.WAKE


# --- DST in the given zone -------------------------------------------------------------


def test_dst_spring_forward_a_skipped_time_fires_once_at_the_next_valid_minute() -> None:
    # 2026-03-29 Europe/Paris jumps 02:00 -> 03:00: 02:30 does not exist that night.
    sched = parse_schedule("30 2 * * * Europe/Paris")
    before = encode_applied(Tick.SLEEP, paris(2026, 3, 28, 2, 30))
    cs = running(before)
    at = datetime(2026, 3, 29, 1, 0, tzinfo=UTC)  # 03:00 CEST, the first valid minute
    d = decide_schedule(cs, sleep=sched, wake=None, now=at)
    assert isinstance(d, ScheduleDecision) and d.at == at
    # Applied: nothing more that night.
    done = running(d.record, suspend=True)
    assert decide_schedule(done, sleep=sched, wake=None, now=at + timedelta(hours=3)) is None


def test_dst_fall_back_a_repeated_time_fires_once() -> None:
    # 2026-10-25 Europe/Paris repeats 02:00-03:00: 02:30 happens twice.
    sched = parse_schedule("30 2 * * * Europe/Paris")
    first = datetime(2026, 10, 25, 0, 30, tzinfo=UTC)  # 02:30 CEST
    second = datetime(2026, 10, 25, 1, 30, tzinfo=UTC)  # 02:30 CET
    cs = running(encode_applied(Tick.WAKE, paris(2026, 10, 24, 8, 0)))
    d = decide_schedule(cs, sleep=sched, wake=None, now=first + timedelta(minutes=1))
    assert isinstance(d, ScheduleDecision) and d.at == first
    applied = running(d.record, suspend=True)
    assert (
        decide_schedule(applied, sleep=sched, wake=None, now=second + timedelta(minutes=1)) is None
    )


def test_ticks_follow_the_zone_not_utc() -> None:
    # 20:00 Paris is 19:00 UTC in winter and 18:00 UTC in summer.
    assert SLEEP.last_at_or_before(datetime(2026, 12, 1, 19, 0, tzinfo=UTC)).hour == 19
    assert SLEEP.last_at_or_before(datetime(2026, 7, 1, 18, 0, tzinfo=UTC)).hour == 18


# --- bad input -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("raw", "why"),
    [
        ("0 20 * * 1-5", "IANA time zone"),
        ("0 20 * * 1-5 Mars/Olympus", "unknown time zone"),
        ("61 20 * * * UTC", "bad cron expression"),
        ("0 20 30 2 * UTC", "bad cron expression"),
        ("every evening UTC", "5 cron fields"),
    ],
)
def test_bad_schedules_are_refused_with_the_reason(raw: str, why: str) -> None:
    with pytest.raises(ValueError, match=why):
        parse_schedule(raw)


def test_a_bad_schedule_is_one_config_problem_keyed_by_its_value() -> None:
    cs = make_set(
        annotations={
            k.ANN_SLEEP_SCHEDULE: "0 25 * * * UTC",
            k.ANN_WAKE_SCHEDULE: "0 8 * * * UTC",
            k.ANN_RECLAIMABLE_AFTER: "1h",
            k.ANN_IDLE_CPU_BELOW: "lots",
        }
    )
    assert config_problems(cs) == ("sleep-schedule=0 25 * * * UTC", "idle-cpu-below=lots")


def test_reclaimable_after_on_a_retain_set_is_a_config_problem() -> None:
    # A retain set keeps its seat while suspended: the opt-in could never act.
    retain = make_set(policy="retain", annotations={k.ANN_RECLAIMABLE_AFTER: "1h"})
    assert config_problems(retain) == ("reclaimable-after=1h (hibernatePolicy is not release)",)
    release = make_set(annotations={k.ANN_RECLAIMABLE_AFTER: "1h"})
    assert config_problems(release) == ()
