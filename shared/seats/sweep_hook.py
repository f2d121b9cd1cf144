"""The seat economy's part of a sweep run (its page hook): sleep windows, CPU activity and
warnings about bad seat annotations, decided by `schedule.py` and `activity.py` and reported
through the run's SweepReport. One PodMetrics LIST per namespace that has `idle-cpu-below`.
"""

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
from shared.seats.schedule import (
    Deferred,
    Schedule,
    ScheduleAction,
    ScheduleDecision,
    decide_schedule,
    parse_schedule,
)
from shared.sweep.decide import config_action, problem
from shared.sweep.report import ActionKind, Result, SweepReport

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
        raw = ann.get(key)
        if raw is None:
            continue
        try:
            parse(raw)
        except ValueError:
            problems.append(problem(key, raw))
            continue
        if key == k.ANN_RECLAIMABLE_AFTER and not cs.is_release:
            # Valid but void (a retain set keeps its seat while suspended): say so.
            problems.append(f"{problem(key, raw)} (hibernatePolicy is not release)")
    return tuple(problems)


def _schedule(cs: CocoonSet, key: str) -> Schedule | None:
    raw = cs.metadata.annotations.get(key)
    if raw is None:
        return None
    try:
        return parse_schedule(raw)
    except ValueError:
        return None  # warned about once by the config check


@dataclass
class SeatSweep:
    report: SweepReport
    kube: KubeApi
    now: datetime
    # Per run: namespace -> {main pod name -> CPU nanocores}; None = PodMetrics unavailable.
    _metrics: dict[str, dict[str, int] | None] = field(default_factory=dict)
    _metrics_warned: bool = False
    # Sets whose activity is unknown this run: never idle-suspended on missing data.
    _unknown: set[tuple[str, str]] = field(default_factory=set)

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
        return (ref.namespace, ref.name) not in self._unknown

    def _one(self, cs: CocoonSet) -> CocoonSet:
        ann = cs.metadata.annotations
        fingerprint = ";".join(config_problems(cs))
        if config_action(ann.get(k.ANN_SEAT_CONFIG_ERROR), fingerprint) is not None:
            cs = self._record_config(cs, fingerprint or None) or cs
        if k.ANN_IDLE_CPU_BELOW in ann:
            cs = self._activity(cs)
        if k.ANN_SLEEP_SCHEDULE in ann or k.ANN_WAKE_SCHEDULE in ann:
            cs = self._schedule(cs)
        return cs

    def _record_config(self, cs: CocoonSet, fingerprint: str | None) -> CocoonSet | None:
        detail = (
            f"invalid seat annotation(s), skipped: {fingerprint}"
            if fingerprint
            else "seat annotations valid again"
        )
        kind = ActionKind.CONFIG_WARNING if fingerprint else ActionKind.CONFIG_CLEARED
        return self.report.warn_once(
            cs, k.ANN_SEAT_CONFIG_ERROR, fingerprint, detail, what=kind.value
        )

    def _usage(self, cs: CocoonSet) -> int | None:
        ns = cs.namespace
        if ns not in self._metrics:
            self._metrics[ns] = self._list_metrics(ns)
        pods = self._metrics[ns]
        return None if pods is None else pods.get(main_pod_name(cs.name))

    def _list_metrics(self, ns: str) -> dict[str, int] | None:
        try:
            items = self.kube.list_pod_metrics(ns, _MAIN_PODS)
        except CocoonError as err:
            # No metrics-server (404), or its APIService down (503): do nothing.
            self._warn_metrics(f"{type(err).__name__}: {err}")
            return None
        return cpu_by_pod(items)

    def _warn_metrics(self, why: str) -> None:
        if not self._metrics_warned:
            self._metrics_warned = True
            log.warning(
                "sweep: PodMetrics unavailable; sets with idle-cpu-below are not idle-suspended "
                "this run",
                reason=why,
            )

    def _activity(self, cs: CocoonSet) -> CocoonSet:
        state = evaluate_activity(cs, None, now=self.now).state
        if state is Activity.BAD_CONFIG:
            # It asked to be measured by CPU and cannot be: no idle suspend on a guess.
            self._unknown.add((cs.namespace, cs.name))
            return cs
        if state in (Activity.NOT_OPTED_IN, Activity.NOT_RUNNING):
            return cs
        ev = evaluate_activity(cs, self._usage(cs), now=self.now)
        ref = SetRef(cs.namespace, cs.name)
        if ev.state is Activity.UNKNOWN:
            self._unknown.add((cs.namespace, cs.name))
            return cs
        if ev.state is not Activity.REFRESH:
            return cs
        used, below = (ev.usage or 0) // 10**6, (ev.threshold or 0) // 10**6
        detail = f"CPU {used}m >= idle-cpu-below {below}m"
        if self.report.dry_run:
            self.report.act(ActionKind.ACTIVITY, ref, Result.WOULD, detail)
            self._unknown.add((cs.namespace, cs.name))  # active: not idle this run either
            return cs
        updated = self._patch(
            cs,
            {"metadata": {"annotations": {k.ANN_LAST_ACTIVITY: format_rfc3339(self.now)}}},
            ActionKind.ACTIVITY,
            detail,
        )
        if updated is None:
            self._unknown.add((cs.namespace, cs.name))
            return cs
        return updated

    def _schedule(self, cs: CocoonSet) -> CocoonSet:
        sleep = _schedule(cs, k.ANN_SLEEP_SCHEDULE)
        wake = _schedule(cs, k.ANN_WAKE_SCHEDULE)
        decision = decide_schedule(cs, sleep=sleep, wake=wake, now=self.now)
        if decision is None:
            return cs
        ref = SetRef(cs.namespace, cs.name)
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
        kind = {
            ScheduleAction.SUSPEND: ActionKind.SCHEDULE_SUSPEND,
            ScheduleAction.WAKE: ActionKind.SCHEDULE_WAKE,
            ScheduleAction.RECORD: ActionKind.SCHEDULE_RECORD,
        }[decision.action]
        detail = f"{decision.tick.value} tick of {format_rfc3339(decision.at)}"
        if self.report.dry_run:
            self.report.act(kind, ref, Result.WOULD, detail)
            return cs
        patch: dict[str, Any] = {
            "metadata": {"annotations": {k.ANN_SCHEDULE_APPLIED: decision.record}}
        }
        if decision.action is not ScheduleAction.RECORD:
            patch["spec"] = {"suspend": decision.action is ScheduleAction.SUSPEND}
        updated = self._patch(cs, patch, kind, detail)
        if updated is None or decision.action is ScheduleAction.RECORD:
            return updated or cs
        self._after_schedule(updated, decision)
        return updated

    def _after_schedule(self, cs: CocoonSet, decision: ScheduleDecision) -> None:
        reason = (
            k.REASON_SCHEDULE_SUSPENDED
            if decision.action is ScheduleAction.SUSPEND
            else k.REASON_SCHEDULE_WOKEN
        )
        verb = "suspended" if decision.action is ScheduleAction.SUSPEND else "woken"
        self.report.event(
            cs,
            reason,
            f"{verb} by the {decision.tick.value} schedule (tick {format_rfc3339(decision.at)})",
            warning=False,
            key=decision.record,
        )
        # No reconcile here: the page carries the updated set, so the safety net starts
        # the release (or the restore) in this same run, exactly once.

    def _patch(
        self, cs: CocoonSet, patch: dict[str, Any], kind: ActionKind, detail: str
    ) -> CocoonSet | None:
        ref = SetRef(cs.namespace, cs.name)
        rv = cs.metadata.resource_version
        return self.report.patch(ref, patch, kind, detail, resource_version=rv, what=kind.value)
