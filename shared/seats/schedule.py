"""Sleep windows (`sleep-schedule`/`wake-schedule: <cron 5 fields> <IANA zone>`), as pure
decisions: the latest tick of either is what the set should be. The tick applied is recorded
in the suspend's or wake's own CAS (each acts once); a schedule's first tick is a baseline."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from enum import StrEnum
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from cronsim import CronSim, CronSimError

from shared import constants as k
from shared.durations import format_rfc3339
from shared.enums import CocoonSetPhase
from shared.models import CocoonSet
from shared.sweep.decide import exempt_reason, parsed, read_time


class Tick(StrEnum):
    SLEEP = "sleep"
    WAKE = "wake"


@dataclass(frozen=True, slots=True)
class Schedule:
    expr: str
    zone: ZoneInfo

    def last_at_or_before(self, now: datetime) -> datetime:
        """The latest tick at or before `now` (UTC); cronsim's reverse iteration excludes its
        start, so it starts one minute past now's minute."""
        local = now.astimezone(self.zone).replace(second=0, microsecond=0)
        return next(CronSim(self.expr, local + timedelta(minutes=1), reverse=True)).astimezone(UTC)


def parse_schedule(raw: str) -> Schedule:
    """`<minute> <hour> <day> <month> <weekday> <IANA zone>`; ValueError names the problem."""
    parts = raw.split()
    if len(parts) != 6:
        raise ValueError("expected 5 cron fields and an IANA time zone, e.g. `0 20 * * 1-5 UTC`")
    expr, zone_name = " ".join(parts[:5]), parts[5]
    try:
        zone = ZoneInfo(zone_name)
    except (ZoneInfoNotFoundError, ValueError):
        raise ValueError(f"unknown time zone {zone_name!r}") from None
    try:
        # Built once to validate; an expression that never fires (Feb 30) is refused too.
        next(CronSim(expr, datetime(2000, 1, 1, tzinfo=zone)))
    except (CronSimError, StopIteration) as err:
        raise ValueError(f"bad cron expression {expr!r}: {err or 'never fires'}") from None
    return Schedule(expr=expr, zone=zone)


def encode_applied(tick: Tick, at: datetime) -> str:
    return f"{tick.value}@{format_rfc3339(at)}"


class ScheduleAction(StrEnum):
    SUSPEND = "suspend"  # write spec.suspend=true + the record (CAS)
    WAKE = "wake"  # write spec.suspend=false + the record (CAS)
    RECORD = "record"  # the set is already where the tick wants it: only the record (CAS)


@dataclass(frozen=True, slots=True)
class ScheduleDecision:
    action: ScheduleAction
    tick: Tick
    at: datetime  # the tick's time (UTC)

    @property
    def record(self) -> str:
        return encode_applied(self.tick, self.at)


@dataclass(frozen=True, slots=True)
class Deferred:
    """The tick is due but cannot be applied now (a wake in flight, an exemption)."""

    tick: Tick
    at: datetime
    reason: str


def decide_schedule(
    cs: CocoonSet, *, sleep: Schedule | None, wake: Schedule | None, now: datetime
) -> ScheduleDecision | Deferred | None:
    """What the latest due tick asks of `cs`, or None when it was already applied."""
    pairs = ((sleep, Tick.SLEEP), (wake, Tick.WAKE))
    ticks = [(s.last_at_or_before(now), tick) for s, tick in pairs if s is not None]
    if not ticks:
        return None
    # Both at the same minute: waking wins (a set is never put to sleep by a tie).
    at, tick = max(ticks, key=lambda t: (t[0], t[1] is Tick.WAKE))
    # The record, `<tick>@<time>`; an unreadable one is no record.
    kind, _, when = cs.metadata.annotations.get(k.ANN_SCHEDULE_APPLIED, "").partition("@")
    applied = read_time(when) if parsed(Tick, kind) is not None else None
    if (applied is not None and applied >= at) or cs.metadata.deletion_timestamp is not None:
        return None
    # A first sight is a baseline, not an order; a set already as the tick wants is only recorded.
    if applied is None or (tick is Tick.WAKE) != cs.suspended:
        return ScheduleDecision(ScheduleAction.RECORD, tick, at)
    if tick is Tick.WAKE:
        return ScheduleDecision(ScheduleAction.WAKE, tick, at)
    if cs.phase is CocoonSetPhase.WAKING or cs.hint:
        # Suspending mid-restore would snapshot a VM that is still restoring.
        return Deferred(tick, at, "a wake is in flight")
    if (exempt := exempt_reason(cs, now=now)) is not None:
        return Deferred(tick, at, exempt)
    return ScheduleDecision(ScheduleAction.SUSPEND, tick, at)
