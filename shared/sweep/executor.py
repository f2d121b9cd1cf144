"""One sweep run: stream the set list page by page, act on each page's decisions, report once.
Memory holds one page and the capped idle queue; each page costs at most one pod LIST. A lost
compare-and-swap skips the set this run; SweepIncomplete (retried) means work was left undone."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, fields
from datetime import datetime
from typing import Protocol

from shared import constants as k
from shared import lifecycle, log
from shared.config import Settings
from shared.errors import CocoonError, Conflict, NotFound
from shared.lifecycle import FROM_SETTINGS, LifecyclePublisher, PublisherArg, resolve_publisher
from shared.models import CocoonSet, Pod
from shared.names import SetRef
from shared.ports import PAGE_SIZE, KubeApi
from shared.sweep.decide import (
    IdleCandidate,
    IdleQueue,
    SafetyNeed,
    check_wake_deadline,
    decide_set,
    format_duration,
    name_selectors,
    pods_left,
    unlabelable,
)
from shared.sweep.report import ActionKind, Result, SweepIncomplete, SweepReport, SweepSummary

# The safety net's call for a set: the very reconcile an event would run.
Reconcile = Callable[[SetRef], object]


class PageHook(Protocol):
    """The seat economy's work on each page before the sweep decides on it: the page to
    decide on (a set it wrote, as written), and which sets may be idle-suspended."""

    def prepare_page(self, page: list[CocoonSet]) -> list[CocoonSet]: ...

    def idle_allowed(self, ref: SetRef) -> bool: ...


def sweep(
    *,
    kube: KubeApi,
    settings: Settings,
    reconcile: Reconcile,
    now: datetime,
    dry_run: bool,
    publisher: PublisherArg = FROM_SETTINGS,
    page_hook: Callable[[SweepReport], PageHook],
) -> SweepSummary:
    """Run one sweep; log ONE summary line; raise SweepIncomplete if work was left undone."""
    report = SweepReport(kube=kube, dry_run=dry_run)
    events = resolve_publisher(publisher, settings)
    queue = IdleQueue(settings.sweep_max_suspends)
    run = _Run(kube, settings, reconcile, now, report, events, page_hook(report), queue)
    started = time.monotonic()
    try:
        run.scopes()
    finally:
        dry = "true" if dry_run else "false"
        log.observe(k.METRIC_SWEEP_DURATION, time.monotonic() - started, dry_run=dry)
    summary = report.summary
    log.emit(
        "INFO" if summary.complete else "WARNING",
        "sweep finished" + (" (dry run)" if dry_run else ""),
        dry_run=dry_run,
        counts=summary.counts(),
        **{f.name: getattr(summary, f.name) for f in fields(summary) if f.type == "int"},
    )
    if not summary.complete:
        raise SweepIncomplete(summary)
    return summary


@dataclass
class _Run:
    """One sweep run's state: not reusable."""

    kube: KubeApi
    settings: Settings
    reconcile_fn: Reconcile
    now: datetime
    report: SweepReport
    publisher: LifecyclePublisher | None
    page_hook: PageHook
    queue: IdleQueue

    def scopes(self) -> None:
        for scope in self.settings.scopes:
            try:
                for page in self.kube.list_sets(scope, limit=PAGE_SIZE):
                    self.report.summary.set_pages += 1
                    self._page(page)
            except CocoonError as err:
                # The rest of this scope is unseen: that is work undone.
                self.report.error(None, "list sets", err, scope=scope or "*")
        self.report.summary.deferred = self.queue.deferred
        for cand in self.queue.drain():
            self._suspend(cand)

    def _page(self, page: list[CocoonSet]) -> None:
        self.report.summary.sets += len(page)
        page = self.page_hook.prepare_page(page)
        pod_checks: list[tuple[CocoonSet, SafetyNeed]] = []
        for cs in page:
            decision = decide_set(cs, now=self.now)
            if decision.config is not None:
                self.report.warn_once(
                    cs,
                    k.ANN_IDLE_CONFIG_ERROR,
                    decision.idle.fingerprint,
                    subject="idle",
                    skipped="idle suspend skipped",
                    what="record idle config error",
                )
            if (cand := decision.candidate) is not None and self.page_hook.idle_allowed(cand.ref):
                self.report.summary.idle_candidates += 1
                self.queue.offer(cand)
            if decision.safety is None:
                continue
            if decision.safety in (SafetyNeed.SUSPENDED_CHECK, SafetyNeed.WAKING):
                pod_checks.append((cs, decision.safety))
                continue
            if decision.safety is SafetyNeed.RELEASE_PENDING:
                # Counted every run: the stuck-Suspending alert fires on a steady count.
                log.count(k.METRIC_RELEASE_PENDING, namespace=cs.namespace, cocoonset=cs.name)
            self._reconcile(decision.ref, decision.safety.value)
        if pod_checks:
            self._check_with_pods(pod_checks)

    def _check_with_pods(self, checks: list[tuple[CocoonSet, SafetyNeed]]) -> None:
        wanted = {(cs.namespace, cs.name) for cs, _ in checks}
        namespaces = {ns for ns, _ in wanted}
        scope = next(iter(namespaces)) if len(namespaces) == 1 else None
        pods: dict[tuple[str, str], list[Pod]] = {key: [] for key in wanted}
        if skipped := unlabelable(name for _, name in wanted):
            # Judged with no pods (they cannot carry the label): say so once per page.
            log.info(
                "sweep: set names too long for a pod label, checked as having no pods",
                sets=len(skipped),
                names=", ".join(skipped)[:400],
            )
        try:
            for selector in name_selectors(name for _, name in wanted):
                for pod_page in self.kube.list_pods_matching(scope, selector, limit=PAGE_SIZE):
                    self.report.summary.pod_lists += 1
                    for pod in pod_page:
                        key = (pod.metadata.namespace or "", pod.labels.get(k.LABEL_SET_NAME, ""))
                        if key in pods:
                            pods[key].append(pod)
        except CocoonError as err:
            # Without the pods no check of this page can be judged: all are left to the retry.
            self.report.error(None, "list pods", err, sets=str(len(checks)), scope=scope or "*")
            return
        for cs, need in checks:
            ref = SetRef(cs.namespace, cs.name)
            # A labelled pod the set does not control is not its pod (as the operator keeps them).
            owned = [p for p in pods[(cs.namespace, cs.name)] if p.controlled_by(cs.metadata.uid)]
            if need is SafetyNeed.SUSPENDED_CHECK and pods_left(owned):
                self._reconcile(ref, "suspended-with-pods")
            elif need is SafetyNeed.WAKING:
                self._reconcile(ref, need.value)
                self._wake_deadline(cs, owned)

    def _reconcile(self, ref: SetRef, why: str) -> None:
        kind = ActionKind.RECONCILE
        if self.report.dry_run:
            self.report.act(kind, ref, Result.WOULD, why)
            return
        try:
            outcome = self.reconcile_fn(ref)
        except NotFound:
            self.report.act(kind, ref, Result.GONE, why)
            return
        except Exception as err:  # noqa: BLE001 - one set's bug must not stop the safety net for all others
            self.report.error(ref, f"reconcile ({why})", err, kind=kind)
            return
        # The reconcile's Outcome is a layer above: read by its fields.
        reason, steps = getattr(outcome, "reason", None), getattr(outcome, "steps", ())
        done = f" ({', '.join(str(s) for s in steps)})" if steps else ""
        described = f"{reason}{done}" if isinstance(reason, str) else str(outcome)
        result = getattr(outcome, "result", None)
        word = getattr(result, "value", result)
        detail = f"{why}: {'ok' if outcome is None else log.clip(described)}"
        self.report.act(
            kind, ref, Result.DONE, detail, outcome=word if isinstance(word, str) else ""
        )

    def _wake_deadline(self, cs: CocoonSet, pods: list[Pod]) -> None:
        ref, kind = SetRef(cs.namespace, cs.name), ActionKind.WAKE_TIMED_OUT
        for attempt in (1, 2):
            due = check_wake_deadline(cs, pods, now=self.now, deadline=self.settings.wake_deadline)
            if due is None:
                return  # not due, completed, or someone else reported it
            if self.report.dry_run:
                self.report.act(kind, ref, Result.WOULD, due.message)
                return
            patch = {"metadata": {"annotations": {k.ANN_WAKE_TIMEOUT_REPORTED: due.key}}}
            try:
                updated = self.kube.patch_set(
                    ref, patch, resource_version=cs.metadata.resource_version
                )
            except Conflict:
                if attempt == 2:
                    self.report.act(kind, ref, Result.CONFLICT, due.message)
                    return
                # The reconcile just ran and may have written the set: re-read, re-decide.
                log.count(k.METRIC_RETRIES, operation="wake-timeout-record")
                try:
                    fresh = self.kube.get_set(ref)
                except CocoonError as err:
                    self.report.error(ref, "re-read set", err, kind=kind)
                    return
                if fresh is None:
                    self.report.act(kind, ref, Result.GONE, due.message)
                    return
                cs = fresh
                continue
            except CocoonError as err:
                self.report.error(ref, "record wake timeout", err, kind=kind)
                return
            self.report.event(
                updated, k.REASON_WAKE_TIMED_OUT, due.message, warning=True, key=due.key
            )
            self.report.act(kind, ref, Result.DONE, due.message)
            return

    def _suspend(self, cand: IdleCandidate) -> None:
        ref, rv, suspend = cand.ref, cand.resource_version, {"spec": {"suspend": True}}
        idle, timeout = format_duration(cand.idle_for), format_duration(cand.timeout)
        detail = f"idle for {idle} (idle-timeout {timeout})"
        # CAS on the listed version: anything changed since, and it is not known idle.
        updated = self.report.patch(
            ref, suspend, ActionKind.SUSPEND, detail, resource_version=rv, what="idle suspend"
        )
        if updated is not None:
            self.report.event(
                updated, k.REASON_IDLE_SUSPENDED, f"suspended: {detail}", warning=False
            )
            lifecycle.emit(
                self.publisher,
                lifecycle.idle_suspended(
                    updated,
                    idle_for=cand.idle_for,
                    timeout=cand.timeout,
                    last_activity=cand.last_activity,
                    now=self.now,
                ),
            )
        if cand.release and (updated is not None or self.report.dry_run):
            # Start the seat release now rather than on the next event.
            self._reconcile(ref, "after idle suspend")
