"""What a sweep run did. Every action, Event, compare-and-swap write and error of a run
(the seat economy's page hook's included) goes through :class:`SweepReport`."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from shared import constants as k
from shared import log
from shared.errors import (
    AdmissionDenied,
    CocoonError,
    ConfigError,
    Conflict,
    NotFound,
    TransientError,
)
from shared.models import CocoonSet
from shared.names import SetRef
from shared.ports import KubeApi
from shared.refusal import report_refusal


class ActionKind(StrEnum):
    SUSPEND = "suspend"
    RECONCILE = "reconcile"
    WAKE_TIMED_OUT = "wake-timed-out"
    CONFIG_WARNING = "config-warning"
    CONFIG_CLEARED = "config-cleared"
    SCHEDULE_SUSPEND = "schedule-suspend"
    SCHEDULE_WAKE = "schedule-wake"
    SCHEDULE_RECORD = "schedule-record"
    ACTIVITY = "activity"


class Result(StrEnum):
    DONE = "done"
    WOULD = "would"  # dry run
    CONFLICT = "conflict"  # lost a compare-and-swap: skipped this run
    GONE = "gone"  # the set was deleted meanwhile
    ERROR = "error"


@dataclass(frozen=True, slots=True)
class SweepAction:
    kind: ActionKind
    ref: SetRef
    result: Result
    detail: str
    # For a reconcile the sweep ran: the reconcile's own result (`waiting`, `refused`, ...).
    outcome: str = ""

    @property
    def shown_result(self) -> str:
        return self.outcome or self.result.value


@dataclass(slots=True)
class SweepSummary:
    """What one run did (or, in a dry run, would do)."""

    dry_run: bool
    sets: int = 0
    set_pages: int = 0
    pod_lists: int = 0
    idle_candidates: int = 0
    deferred: int = 0  # idle sets left for a later run by the per-run cap
    errors: int = 0
    transient_errors: int = 0
    actions: list[SweepAction] = field(default_factory=list)
    # Errors no set owns (a LIST that failed): "what: error", for the CLI's last line.
    failures: list[str] = field(default_factory=list)

    def counts(self) -> dict[str, int]:
        """`<kind>` for done actions, `would-<kind>` in a dry run, plus `conflict`, `error`."""
        names = {Result.DONE: "{}", Result.WOULD: "would-{}"}
        c = Counter(names.get(a.result, a.result.value).format(a.kind.value) for a in self.actions)
        return dict(sorted(c.items()))

    def of(self, kind: ActionKind, result: Result | None = None) -> list[SweepAction]:
        want = result or (Result.WOULD if self.dry_run else Result.DONE)
        return [a for a in self.actions if a.kind is kind and a.result is want]

    @property
    def complete(self) -> bool:
        return self.transient_errors == 0

    def __str__(self) -> str:
        # The runtime logs the returned object: counts only, however many actions.
        counts = ",".join(f"{key}={n}" for key, n in self.counts().items()) or "none"
        return (
            f"sweep(dry_run={self.dry_run}, sets={self.sets}, actions={counts}, "
            f"deferred={self.deferred}, errors={self.errors})"
        )


class SweepIncomplete(TransientError):
    """A transient error left work undone; the platform should run the sweep again."""

    def __init__(self, summary: SweepSummary) -> None:
        super().__init__(
            f"sweep incomplete: {summary.transient_errors} transient error(s) left work undone"
        )
        self.summary = summary


@dataclass
class SweepReport:
    kube: KubeApi
    dry_run: bool

    def __post_init__(self) -> None:
        self.summary = SweepSummary(dry_run=self.dry_run)

    def event(
        self, cs: CocoonSet, reason: str, message: str, *, warning: bool, key: str | None = None
    ) -> None:
        kind = "Warning" if warning else "Normal"
        try:
            # `key` names the Event after the situation: two runs never warn twice for it.
            self.kube.emit_event(cs, reason=reason, message=message, type=kind, key=key)
        except CocoonError as err:
            # The write it reports landed and a rerun would not re-emit it: logged, not retried.
            self.summary.errors += 1
            log.warning(
                "sweep: event not recorded",
                namespace=cs.namespace,
                cocoonset=cs.name,
                reason=reason,
                error=str(err),
                error_type=type(err).__name__,
            )

    def act(
        self, kind: ActionKind, ref: SetRef, result: Result, detail: str, *, outcome: str = ""
    ) -> None:
        self.summary.actions.append(SweepAction(kind, ref, result, detail, outcome))
        verb = {
            Result.CONFLICT: "skipped (changed meanwhile)",
            Result.GONE: "skipped (set gone)",
            Result.ERROR: "failed",
        }.get(result, result.value)  # done, would
        log.info(
            f"sweep: {verb} {kind.value} {ref}",
            action=kind.value,
            result=result.value,
            namespace=ref.namespace,
            cocoonset=ref.name,
            detail=detail,
            dry_run=self.dry_run,
        )

    def patch(
        self,
        ref: SetRef,
        body: dict[str, Any],
        kind: ActionKind,
        detail: str,
        *,
        resource_version: str | None,
        what: str = "",
    ) -> CocoonSet | None:
        """A compare-and-swap write for `kind`, reported; the set as written, or None (a dry
        run, or lost, gone or failed: the next run re-decides from fresh state)."""
        if self.dry_run:
            self.act(kind, ref, Result.WOULD, detail)
            return None
        try:
            updated = self.kube.patch_set(ref, body, resource_version=resource_version)
        except (Conflict, NotFound) as err:
            lost = Result.CONFLICT if isinstance(err, Conflict) else Result.GONE
            self.act(kind, ref, lost, detail)
            return None
        except CocoonError as err:
            self.error(ref, what or kind.value, err, kind=kind)
            return None
        self.act(kind, ref, Result.DONE, detail)
        return updated

    def warn_once(
        self,
        cs: CocoonSet,
        key: str,
        fingerprint: str,
        *,
        subject: str,
        skipped: str,
        what: str = "",
    ) -> CocoonSet | None:
        """Record the bad `subject` annotation values (`fingerprint`) in `key` with one
        Warning, or clear the record ("" once they are fixed)."""
        kind, detail = ActionKind.CONFIG_CLEARED, f"{subject} annotations valid again"
        if fingerprint:
            kind = ActionKind.CONFIG_WARNING
            detail = f"invalid {subject} annotation(s), {skipped}: {fingerprint}"
        ref, rv = SetRef(cs.namespace, cs.name), cs.metadata.resource_version
        record = {"metadata": {"annotations": {key: fingerprint or None}}}
        updated = self.patch(ref, record, kind, detail, resource_version=rv, what=what)
        if updated is not None and fingerprint:
            self.event(updated, k.REASON_BAD_ANNOTATION, detail, warning=True)
        return updated

    def error(
        self,
        ref: SetRef | None,
        what: str,
        err: Exception,
        *,
        kind: ActionKind | None = None,
        **fields: str,
    ) -> None:
        """A failed step; an error that is not a CocoonError is a bug, logged as one."""
        # A ConfigError is retried too: fixing the deployment should let a rerun succeed.
        transient = isinstance(err, TransientError | ConfigError)
        bug = not isinstance(err, CocoonError)
        failure = f"{what}: {err!r}" if bug else f"{what}: {err}"
        self.summary.errors += 1
        if transient:
            self.summary.transient_errors += 1
        if isinstance(err, AdmissionDenied) and ref is not None and not self.dry_run:
            # The owner gets the reconciler's one Warning; the next sweep tries again.
            try:
                if (cs := self.kube.get_set(ref)) is not None:
                    report_refusal(self.kube, cs, what, err)
            except CocoonError as e:
                log.warning("sweep: refusal not recorded", set=str(ref), error=str(e))
        if ref is not None and kind is not None:
            self.summary.actions.append(SweepAction(kind, ref, Result.ERROR, failure))
        else:
            self.summary.failures.append(failure)
        log.emit(
            "ERROR" if bug else "WARNING" if transient else "INFO",
            f"sweep: {what} raised unexpectedly" if bug else f"sweep: {what} failed",
            namespace=ref.namespace if ref else None,
            cocoonset=ref.name if ref else None,
            error=repr(err) if bug else str(err),
            error_type=type(err).__name__,
            transient=transient,
            **fields,
        )
