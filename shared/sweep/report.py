"""What a sweep run did, and the one way anything in a run reports it (docs/design.md#sweep).

:class:`SweepReport` is the run's reporting object: every action (done, would, lost,
gone, failed), every Event and the error policy go through it, so the sweep's own
work and a page hook's (shared/seats/sweep_hook.py) land in one summary, one dry
run and one log vocabulary.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from enum import StrEnum

from shared import log
from shared.errors import AdmissionDenied, CocoonError, ConfigError, TransientError
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
    # The seat economy (shared.seats.sweep_hook).
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
    # For a reconcile the sweep ran: how it ended (`done`, `waiting`, `refused`, ...,
    # the reconcile's OutcomeResult), which `result` (the sweep's own act: ran it) hides.
    outcome: str = ""

    @property
    def shown_result(self) -> str:
        """What a person or a script is told: the reconcile's outcome when there is one."""
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
        c: Counter[str] = Counter()
        for a in self.actions:
            if a.result is Result.DONE:
                c[a.kind.value] += 1
            elif a.result is Result.WOULD:
                c[f"would-{a.kind.value}"] += 1
            else:
                c[a.result.value] += 1
        return dict(sorted(c.items()))

    def of(self, kind: ActionKind, result: Result | None = None) -> list[SweepAction]:
        want = result or (Result.WOULD if self.dry_run else Result.DONE)
        return [a for a in self.actions if a.kind is kind and a.result is want]

    @property
    def complete(self) -> bool:
        return self.transient_errors == 0

    def __str__(self) -> str:
        # What a log line shows for the run (the runtime logs the returned object):
        # counts only, however many actions there were.
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


def _is_transient(err: BaseException) -> bool:
    # ConfigError is retried by the targets too: fixing the deployment should let a
    # rerun succeed (docs/design.md#ack-or-retry).
    return isinstance(err, TransientError | ConfigError)


class SweepReport:
    """One run's summary, and how its actions, Events and errors are recorded and logged."""

    def __init__(self, *, kube: KubeApi, dry_run: bool) -> None:
        self.kube = kube
        self.dry_run = dry_run
        self.summary = SweepSummary(dry_run=dry_run)

    def event(
        self, cs: CocoonSet, reason: str, message: str, *, warning: bool, key: str | None = None
    ) -> None:
        try:
            # `key` names the Event after the situation, so even two runs that both
            # believed they won cannot produce two warnings for one situation.
            self.kube.emit_event(
                cs,
                reason=reason,
                message=message,
                type="Warning" if warning else "Normal",
                key=key,
            )
        except CocoonError as err:
            # The write it reports already landed; a rerun would not re-emit it (the
            # CAS-guarded record says it is done), so this is logged, not retried.
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
            Result.DONE: "sweep: done",
            Result.WOULD: "sweep: would",
            Result.CONFLICT: "sweep: skipped (changed meanwhile)",
            Result.GONE: "sweep: skipped (set gone)",
            Result.ERROR: "sweep: failed",
        }[result]
        log.info(
            f"{verb} {kind.value} {ref}",
            action=kind.value,
            result=result.value,
            namespace=ref.namespace,
            cocoonset=ref.name,
            detail=detail,
            dry_run=self.dry_run,
        )

    def error(
        self,
        ref: SetRef | None,
        what: str,
        err: CocoonError,
        *,
        kind: ActionKind | None = None,
        **fields: str,
    ) -> None:
        transient = _is_transient(err)
        self.summary.errors += 1
        if isinstance(err, AdmissionDenied) and ref is not None:
            self._refused(ref, what, err)
        if transient:
            self.summary.transient_errors += 1
        if ref is not None and kind is not None:
            self.summary.actions.append(SweepAction(kind, ref, Result.ERROR, f"{what}: {err}"))
        else:
            self.summary.failures.append(f"{what}: {err}")
        log.emit(
            "WARNING" if transient else "INFO",
            f"sweep: {what} failed",
            namespace=ref.namespace if ref else None,
            cocoonset=ref.name if ref else None,
            error=str(err),
            error_type=type(err).__name__,
            transient=transient,
            **fields,
        )

    def _refused(self, ref: SetRef, what: str, err: AdmissionDenied) -> None:
        """A spec write refused by admission (cocoon-webhook's CocoonSet rules, say):
        the set's owner gets the one Warning the reconciler would give; the next
        sweep tries again (at its pace, not a redelivery storm)."""
        try:
            cs = self.kube.get_set(ref)
            if cs is not None and not self.dry_run:
                report_refusal(self.kube, cs, what, err)
        except CocoonError as e:
            log.warning("sweep: refusal not recorded", set=str(ref), error=str(e))

    def unexpected(self, ref: SetRef, what: str, err: Exception, *, kind: ActionKind) -> None:
        self.summary.errors += 1
        self.summary.actions.append(SweepAction(kind, ref, Result.ERROR, f"{what}: {err!r}"))
        log.error(
            f"sweep: {what} raised unexpectedly",
            namespace=ref.namespace,
            cocoonset=ref.name,
            error=repr(err),
            error_type=type(err).__name__,
        )
