"""Ack or retry, decided in one place: a PermanentError is logged and acknowledged (2xx); a
TransientError or ConfigError is logged and re-raised (500: the platform redelivers). Every
trigger is attempted even after a failure (reconciles are idempotent), one log line each.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import partial
from typing import Any

from functions.process import kube_client, registry_client
from shared import log
from shared.config import Settings
from shared.constants import METRIC_RETRIES
from shared.errors import ConfigError, PermanentError, TransientError
from shared.reconcile import Outcome, OutcomeResult, reconcile_set, request_wake
from shared.reconcile.report_wait import settle
from shared.triggers import SetChanged, SnapshotPushed, SweepTick, Trigger, WakeRequested, describe


def _summary(out: Outcome) -> dict[str, Any]:
    return {
        "cocoonset": str(out.ref),
        "result": out.result,
        "reason": out.reason,
        "steps": list(out.steps),
    }


def _reconcile_candidates(trigger: SnapshotPushed, s: Settings) -> list[dict[str, Any]]:
    """Every set the VM name may belong to (from the adapter): a wrong one is a no-op."""
    refs = trigger.sets
    if not refs:
        raise PermanentError(f"VM name {trigger.vm_name!r} names no set in an allowed namespace")
    kube, registry = kube_client(s), registry_client(s)
    results: list[dict[str, Any]] = []
    first_error: Exception | None = None
    for ref in refs:
        try:
            out = reconcile_set(ref, kube=kube, registry=registry, settings=s)
            if out.result == OutcomeResult.WAITING:
                # The push beat vk-cocoon's report: wait for it here, bounded.
                out = settle(
                    ref,
                    trigger.vm_name,
                    out,
                    kube=kube,
                    reconcile=partial(reconcile_set, ref, kube=kube, registry=registry, settings=s),
                    budget=s.report_wait,
                )
            # Still waiting and the announced tag absent: a registry may notify before it
            # links the tag, so retry (asked only when waiting: a release pays no HEAD).
            if (
                out.result == OutcomeResult.WAITING
                and registry is not None
                and not registry.snapshot_present(trigger.vm_name)
            ):
                raise TransientError(
                    f"the registry announced {trigger.vm_name}:hibernate but does not serve "
                    "it yet; retry (the announcement can precede the tag)"
                )
        except (TransientError, ConfigError) as e:
            first_error = first_error or e
            results.append({"cocoonset": str(ref), "result": "error", "reason": str(e)})
            continue
        except PermanentError as e:
            # This candidate's own dead end (acknowledged): the others still get
            # reconciled, and an earlier retryable failure is still raised below.
            log.info("candidate set skipped", cocoonset=str(ref), reason=str(e))
            results.append({"cocoonset": str(ref), "result": "ignored", "reason": str(e)})
            continue
        if out.result != OutcomeResult.NOT_FOUND:
            results.append(_summary(out))
    if first_error is not None:
        raise first_error
    return results


def _handle(trigger: Trigger, s: Settings) -> Any:
    if isinstance(trigger, SnapshotPushed):
        return _reconcile_candidates(trigger, s)
    if isinstance(trigger, SetChanged | WakeRequested):
        if not s.namespace_allowed(trigger.ref.namespace):
            raise PermanentError(f"namespace {trigger.ref.namespace} is not in COCOON_NAMESPACES")
        kube, registry, ref = kube_client(s), registry_client(s), trigger.ref
        if isinstance(trigger, WakeRequested):
            requester = trigger.requester
            wake = request_wake(ref, kube=kube, registry=registry, settings=s, requester=requester)
            return _summary(wake)
        # An audit event of vk-cocoon's report carries its time (the seat-freed histogram).
        report = trigger.report
        return _summary(reconcile_set(ref, kube=kube, registry=registry, settings=s, report=report))
    if isinstance(trigger, SweepTick):
        # The sweep is another function's code: it loads only for ticks.
        from functions import sweep  # noqa: PLC0415 - lazy: cold start

        return sweep.run_sweep(settings=s, dry_run=trigger.dry_run)
    raise PermanentError(f"unknown trigger {trigger!r}")  # pragma: no cover


def run(triggers: Sequence[Trigger], *, settings: Settings, target: str) -> None:
    """Handle every trigger; raise the first retryable failure after trying them all."""
    failure: Exception | None = None
    for trigger in triggers:
        fields = {
            "target": target,
            "trigger": type(trigger).__name__,
            "source": trigger.source.value,
            "event_id": trigger.event_id,
            **describe(trigger),
        }
        try:
            outcome = _handle(trigger, settings)
        except PermanentError as e:
            log.info("trigger acknowledged", **fields, outcome="ignored", reason=str(e))
        except (TransientError, ConfigError) as e:
            kind = "config" if isinstance(e, ConfigError) else "transient"
            log.error("trigger failed; redelivery expected", **fields, outcome=kind, reason=str(e))
            failure = failure or e
        else:
            log.info("trigger handled", **fields, outcome=outcome)
    if failure is not None:
        # Failing the invocation is the retry: the platform redelivers the event.
        log.count(METRIC_RETRIES, operation=f"redelivery:{target}")
        raise failure
