"""The seat economy's part of a sweep run (its page hook): sleep windows, CPU activity and
warnings about bad seat annotations, decided by `schedule.py` and `activity.py` and reported
through the run's SweepReport. One PodMetrics LIST per namespace that has `idle-cpu-below`."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from shared import constants as k
from shared import log
from shared.durations import format_rfc3339, parse_duration
from shared.errors import CocoonError
from shared.models import CocoonSet
from shared.names import SetRef, main_pod_name
from shared.ports import KubeApi
from shared.seats.activity import Activity, cpu_by_pod, cpu_nanocores, evaluate_activity
from shared.seats.schedule import Deferred, ScheduleAction, decide_schedule, parse_schedule
from shared.sweep.decide import config_action, parsed, problem
from shared.sweep.report import ActionKind, SweepReport

_MAIN_PODS = f"{k.LABEL_ROLE}={k.ROLE_MAIN}"


def config_problems(cs: CocoonSet) -> tuple[str, ...]:
    """The seat-economy annotations that do not parse, as `key=value` (the warn-once key)."""
    ann = cs.metadata.annotations
    problems: list[str] = []
    checks = (
        (k.ANN_RECLAIMABLE_AFTER, parse_duration),
        (k.ANN_SLEEP_SCHEDULE, parse_schedule),
        (k.ANN_WAKE_SCHEDULE, parse_schedule),
        (k.ANN_IDLE_CPU_BELOW, cpu_nanocores),
    )
    for key, parse in checks:
        if (raw := ann.get(key)) is not None and parsed(parse, raw) is None:
            problems.append(problem(key, raw))
        elif raw is not None and key == k.ANN_RECLAIMABLE_AFTER and not cs.is_release:
            # Valid but void (a retain set keeps its seat while suspended): say so.
            problems.append(f"{problem(key, raw)} (hibernatePolicy is not release)")
    return tuple(problems)


@dataclass
class SeatSweep:
    report: SweepReport
    kube: KubeApi
    now: datetime
    # Per run: namespace -> {main pod name -> CPU nanocores}; None = PodMetrics unavailable.
    _metrics: dict[str, dict[str, int] | None] = field(default_factory=dict)
    # Sets whose activity is unknown this run: never idle-suspended on missing data.
    _unknown: set[SetRef] = field(default_factory=set)

    def prepare_page(self, page: list[CocoonSet]) -> list[CocoonSet]:
        out: list[CocoonSet] = []
        for cs in page:
            try:
                out.append(self._one(cs))
            except CocoonError as err:
                self.report.error(SetRef(cs.namespace, cs.name), "seat economy", err)
                out.append(cs)
        return out

    def idle_allowed(self, ref: SetRef) -> bool:
        return ref not in self._unknown

    def _one(self, cs: CocoonSet) -> CocoonSet:
        ann = cs.metadata.annotations
        fingerprint = ";".join(config_problems(cs))
        if config_action(ann.get(k.ANN_SEAT_CONFIG_ERROR), fingerprint) is not None:
            written = self.report.warn_once(
                cs, k.ANN_SEAT_CONFIG_ERROR, fingerprint, subject="seat", skipped="skipped"
            )
            cs = written or cs
        if k.ANN_IDLE_CPU_BELOW in ann:
            cs = self._activity(cs)
        if k.ANN_SLEEP_SCHEDULE in ann or k.ANN_WAKE_SCHEDULE in ann:
            cs = self._schedule(cs)
        return cs

    def _usage(self, cs: CocoonSet) -> int | None:
        ns = cs.namespace
        if ns not in self._metrics:
            try:
                self._metrics[ns] = cpu_by_pod(self.kube.list_pod_metrics(ns, _MAIN_PODS))
            except CocoonError as err:
                # No metrics-server (404), or its APIService down (503): do nothing.
                if None not in self._metrics.values():  # said once per run
                    log.warning(
                        "sweep: PodMetrics unavailable; sets with idle-cpu-below are not "
                        "idle-suspended this run",
                        reason=f"{type(err).__name__}: {err}",
                    )
                self._metrics[ns] = None
        return (self._metrics[ns] or {}).get(main_pod_name(cs.name))

    def _activity(self, cs: CocoonSet) -> CocoonSet:
        ev = evaluate_activity(cs, None, now=self.now)
        if ev.state is Activity.UNKNOWN:  # opted in and Running: measure it
            ev = evaluate_activity(cs, self._usage(cs), now=self.now)
        if ev.state is Activity.REFRESH:
            used, below = (ev.usage or 0) // 10**6, (ev.threshold or 0) // 10**6
            stamp = {"metadata": {"annotations": {k.ANN_LAST_ACTIVITY: format_rfc3339(self.now)}}}
            detail = f"CPU {used}m >= idle-cpu-below {below}m"
            if (updated := self._patch(cs, stamp, ActionKind.ACTIVITY, detail)) is not None:
                return updated
        elif ev.state not in (Activity.UNKNOWN, Activity.BAD_CONFIG):
            return cs  # not measured (not opted in, not Running), or measured and recorded
        # No data, or active and not recorded (dry run, lost write): never suspended on a guess.
        self._unknown.add(SetRef(cs.namespace, cs.name))
        return cs

    def _schedule(self, cs: CocoonSet) -> CocoonSet:
        # A bad schedule is left out (and warned about once by the config check).
        sleep = parsed(parse_schedule, cs.metadata.annotations.get(k.ANN_SLEEP_SCHEDULE))
        wake = parsed(parse_schedule, cs.metadata.annotations.get(k.ANN_WAKE_SCHEDULE))
        if (decision := decide_schedule(cs, sleep=sleep, wake=wake, now=self.now)) is None:
            return cs
        if isinstance(decision, Deferred):
            log.info(
                "sweep: schedule tick deferred",
                namespace=cs.namespace,
                cocoonset=cs.name,
                tick=decision.tick.value,
                at=format_rfc3339(decision.at),
                reason=decision.reason,
            )
            return cs
        action, tick, at = decision.action, decision.tick.value, format_rfc3339(decision.at)
        kind = ActionKind(f"schedule-{action.value}")
        applied = {k.ANN_SCHEDULE_APPLIED: decision.record}
        patch: dict[str, Any] = {"metadata": {"annotations": applied}}
        if action is not ScheduleAction.RECORD:
            patch["spec"] = {"suspend": action is ScheduleAction.SUSPEND}
        updated = self._patch(cs, patch, kind, f"{tick} tick of {at}")
        if updated is None or action is ScheduleAction.RECORD:
            return updated or cs
        suspend = action is ScheduleAction.SUSPEND
        reason = k.REASON_SCHEDULE_SUSPENDED if suspend else k.REASON_SCHEDULE_WOKEN
        message = f"{'suspended' if suspend else 'woken'} by the {tick} schedule (tick {at})"
        self.report.event(updated, reason, message, warning=False, key=decision.record)
        # No reconcile: the safety net starts the release (or restore) from the updated page.
        return updated

    def _patch(
        self, cs: CocoonSet, patch: dict[str, Any], kind: ActionKind, detail: str
    ) -> CocoonSet | None:
        ref, rv = SetRef(cs.namespace, cs.name), cs.metadata.resource_version
        return self.report.patch(ref, patch, kind, detail, resource_version=rv)
