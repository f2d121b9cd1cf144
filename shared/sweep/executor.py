"""One sweep run: stream the set list page by page, act on each page's decisions, report once.

Requests: one paged LIST of sets per scope, at most one label-selected pod LIST per page
(the page's Suspended release and Waking sets), then only actions; memory holds one page
and the capped idle queue. A lost compare-and-swap skips the set this run; the run raises
SweepIncomplete (retried) only when a transient error left work undone.
"""

from __future__ import annotations

import time
from collections.abc import Callable
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
    ConfigAction,
    IdleCandidate,
    IdleQueue,
    SafetyNeed,
    check_wake_deadline,
    decide_set,
    format_duration,
    idle_candidate,
    name_selectors,
    pods_left,
    unlabelable,
)
from shared.sweep.report import (
    ActionKind,
    Result,
    SweepIncomplete,
    SweepReport,
    SweepSummary,
)

# The safety net's call for a set: the very reconcile an event would run.
Reconcile = Callable[[SetRef], object]


class PageHook(Protocol):
    """Work on each page before the sweep decides on it (the seat economy's), reported
    through the run's SweepReport."""

    def prepare_page(self, page: list[CocoonSet]) -> list[CocoonSet]:
        """The page to decide on (a set this hook wrote, as written)."""
        ...

    def idle_allowed(self, ref: SetRef) -> bool:
        """False for a set that must not be idle-suspended this run."""
        ...


PageHookFactory = Callable[[SweepReport], PageHook]


class _NoHook:
    def prepare_page(self, page: list[CocoonSet]) -> list[CocoonSet]:
        return page

    def idle_allowed(self, ref: SetRef) -> bool:
        return True


class Sweeper:
    """One sweep run. Not reusable: build one per run."""

    def __init__(
        self,
        *,
        kube: KubeApi,
        settings: Settings,
        reconcile: Reconcile,
        now: datetime,
        dry_run: bool,
        publisher: PublisherArg = FROM_SETTINGS,
        page_hook: PageHookFactory | None = None,
    ) -> None:
        self.kube = kube
        self.publisher: LifecyclePublisher | None = resolve_publisher(publisher, settings)
        self.settings = settings
        self.reconcile_fn = reconcile
        self.now = now
        self.dry_run = dry_run
        self.report = SweepReport(kube=kube, dry_run=dry_run)
        self.summary = self.report.summary
        self.queue = IdleQueue(settings.sweep_max_suspends)
        self.page_hook: PageHook = page_hook(self.report) if page_hook is not None else _NoHook()

    def run(self) -> SweepSummary:
        started = time.monotonic()
        try:
            return self._run()
        finally:
            log.observe(
                k.METRIC_SWEEP_DURATION,
                time.monotonic() - started,
                dry_run="true" if self.dry_run else "false",
            )

    def _run(self) -> SweepSummary:
        for scope in self.settings.scopes:
            try:
                for page in self.kube.list_sets(scope, limit=PAGE_SIZE):
                    self.summary.set_pages += 1
                    self._page(page)
            except CocoonError as err:
                # The rest of this scope is unseen: that is work undone.
                self.report.error(None, "list sets", err, scope=scope or "*")
        self._suspend_idle()
        return self.summary

    def _page(self, page: list[CocoonSet]) -> None:
        self.summary.sets += len(page)
        page = self.page_hook.prepare_page(page)
        pod_checks: list[tuple[CocoonSet, SafetyNeed]] = []
        for cs in page:
            decision = decide_set(cs, now=self.now)
            if decision.config is not None:
                self._config(cs, decision.config, decision.idle.fingerprint)
            cand = idle_candidate(decision)
            if cand is not None and self.page_hook.idle_allowed(cand.ref):
                self.summary.idle_candidates += 1
                self.queue.offer(cand)
            if decision.safety is None:
                continue
            if decision.safety.needs_pods:
                pod_checks.append((cs, decision.safety))
            else:
                if decision.safety is SafetyNeed.RELEASE_PENDING:
                    # Counted every run: the stuck-Suspending alert fires on a steady count.
                    log.count(
                        k.METRIC_RELEASE_PENDING,
                        namespace=decision.ref.namespace,
                        cocoonset=decision.ref.name,
                    )
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
                    self.summary.pod_lists += 1
                    for pod in pod_page:
                        key = (pod.metadata.namespace or "", pod.labels.get(k.LABEL_SET_NAME, ""))
                        if key in pods:
                            pods[key].append(pod)
        except CocoonError as err:
            # Without the pods none of this page's checks can be judged: one failure,
            # all of them undone (the next run, or the retry, repeats them).
            self.report.error(None, "list pods", err, sets=str(len(checks)), scope=scope or "*")
            return
        for cs, need in checks:
            ref = SetRef(cs.namespace, cs.name)
            # A labelled pod the set does not control is not its pod (as the operator keeps them).
            set_pods = [
                p for p in pods[(cs.namespace, cs.name)] if p.controlled_by(cs.metadata.uid)
            ]
            if need is SafetyNeed.SUSPENDED_CHECK:
                if pods_left(set_pods):
                    self._reconcile(ref, "suspended-with-pods")
            elif need is SafetyNeed.WAKING:
                self._reconcile(ref, need.value)
                self._wake_deadline(cs, set_pods)

    def _reconcile(self, ref: SetRef, why: str) -> None:
        if self.dry_run:
            self.report.act(ActionKind.RECONCILE, ref, Result.WOULD, why)
            return
        try:
            outcome = self.reconcile_fn(ref)
        except NotFound:
            self.report.act(ActionKind.RECONCILE, ref, Result.GONE, why)
            return
        except CocoonError as err:
            self.report.error(ref, f"reconcile ({why})", err, kind=ActionKind.RECONCILE)
            return
        except Exception as err:  # noqa: BLE001 - one set's bug must not stop the safety net for all others
            self.report.unexpected(ref, f"reconcile ({why})", err, kind=ActionKind.RECONCILE)
            return
        self.report.act(
            ActionKind.RECONCILE,
            ref,
            Result.DONE,
            f"{why}: {_describe(outcome)}",
            outcome=_outcome_word(outcome),
        )

    def _wake_deadline(self, cs: CocoonSet, pods: list[Pod]) -> None:
        ref = SetRef(cs.namespace, cs.name)
        due = check_wake_deadline(cs, pods, now=self.now, deadline=self.settings.wake_deadline)
        if due is None:
            return
        if self.dry_run:
            self.report.act(ActionKind.WAKE_TIMED_OUT, ref, Result.WOULD, due.message)
            return
        # The reconcile just ran and may have written the set: on a lost CAS re-read
        # once and re-decide from the fresh set.
        current: CocoonSet | None = cs
        for attempt in (1, 2):
            assert current is not None
            patch = {"metadata": {"annotations": {k.ANN_WAKE_TIMEOUT_REPORTED: due.key}}}
            try:
                updated = self.kube.patch_set(
                    ref, patch, resource_version=current.metadata.resource_version
                )
            except Conflict:
                if attempt == 2:
                    self.report.act(ActionKind.WAKE_TIMED_OUT, ref, Result.CONFLICT, due.message)
                    return
                log.count(k.METRIC_RETRIES, operation="wake-timeout-record")
                try:
                    current = self.kube.get_set(ref)
                except CocoonError as err:
                    self.report.error(ref, "re-read set", err, kind=ActionKind.WAKE_TIMED_OUT)
                    return
                if current is None:
                    self.report.act(ActionKind.WAKE_TIMED_OUT, ref, Result.GONE, due.message)
                    return
                fresh = check_wake_deadline(
                    current, pods, now=self.now, deadline=self.settings.wake_deadline
                )
                if fresh is None:
                    return  # completed, or someone else reported it
                due = fresh
                continue
            except CocoonError as err:
                self.report.error(ref, "record wake timeout", err, kind=ActionKind.WAKE_TIMED_OUT)
                return
            self.report.event(
                updated, k.REASON_WAKE_TIMED_OUT, due.message, warning=True, key=due.key
            )
            self.report.act(ActionKind.WAKE_TIMED_OUT, ref, Result.DONE, due.message)
            return

    def _config(self, cs: CocoonSet, action: ConfigAction, fingerprint: str) -> None:
        warn = action is ConfigAction.WARN
        detail = (
            f"invalid idle annotation(s), idle suspend skipped: {fingerprint}"
            if warn
            else "idle annotations valid again"
        )
        record = fingerprint if warn else None
        what = "record idle config error"
        self.report.warn_once(cs, k.ANN_IDLE_CONFIG_ERROR, record, detail, what=what)

    def _suspend_idle(self) -> None:
        self.summary.deferred = self.queue.deferred
        for cand in self.queue.drain():
            self._suspend(cand)

    def _suspend(self, cand: IdleCandidate) -> None:
        ref = cand.ref
        detail = (
            f"idle for {format_duration(cand.idle_for)} "
            f"(idle-timeout {format_duration(cand.timeout)})"
        )
        if self.dry_run:
            self.report.act(ActionKind.SUSPEND, ref, Result.WOULD, detail)
            if cand.release:
                self.report.act(ActionKind.RECONCILE, ref, Result.WOULD, "after idle suspend")
            return
        # CAS on the listed version: anything changed since, and it is not known idle.
        updated = self.report.patch(
            ref,
            {"spec": {"suspend": True}},
            ActionKind.SUSPEND,
            detail,
            resource_version=cand.resource_version,
            what="idle suspend",
        )
        if updated is None:
            return
        self.report.event(updated, k.REASON_IDLE_SUSPENDED, f"suspended: {detail}", warning=False)
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
        if cand.release:
            # Start the seat release now rather than on the next event.
            self._reconcile(ref, "after idle suspend")


def _describe(outcome: object) -> str:
    """The reconcile's Outcome (a layer above: read by its fields) in a few words."""
    if outcome is None:
        return "ok"
    reason = getattr(outcome, "reason", None)
    if not isinstance(reason, str):
        return log.clip(str(outcome))
    steps = getattr(outcome, "steps", ())
    done = f" ({', '.join(str(s) for s in steps)})" if steps else ""
    return log.clip(f"{reason}{done}")


def _outcome_word(outcome: object) -> str:
    """The reconcile's result word (`done`, `waiting`, ...); empty when it gave none."""
    result = getattr(outcome, "result", None)
    value = getattr(result, "value", result)
    return value if isinstance(value, str) else ""


def sweep(
    *,
    kube: KubeApi,
    settings: Settings,
    reconcile: Reconcile,
    now: datetime,
    dry_run: bool,
    publisher: PublisherArg = FROM_SETTINGS,
    page_hook: PageHookFactory | None = None,
) -> SweepSummary:
    """Run one sweep; log ONE summary line; raise SweepIncomplete if work was left undone."""
    summary = Sweeper(
        kube=kube,
        settings=settings,
        reconcile=reconcile,
        now=now,
        dry_run=dry_run,
        publisher=publisher,
        page_hook=page_hook,
    ).run()
    log.emit(
        "INFO" if summary.complete else "WARNING",
        "sweep finished" + (" (dry run)" if dry_run else ""),
        dry_run=dry_run,
        sets=summary.sets,
        set_pages=summary.set_pages,
        pod_lists=summary.pod_lists,
        idle_candidates=summary.idle_candidates,
        deferred=summary.deferred,
        counts=summary.counts(),
        errors=summary.errors,
        transient_errors=summary.transient_errors,
    )
    if not summary.complete:
        raise SweepIncomplete(summary)
    return summary
