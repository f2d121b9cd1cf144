"""The seat-freed histogram: vk-cocoon's `hibernated` report -> the main pod's DELETE.

vk-cocoon's report (the lifecycle annotation `hibernated`) carries no time of
its own, so this interval is measured only where an invocation knows when the
report landed precisely (docs/observability.md):

- `push`: the push path's bounded wait (`functions.report_wait`) watched the
  pod and saw the report arrive; the wall clock at that watch event is the
  report time;
- `audit`: the kube-apiserver audit event of the pod write that set the
  annotation to `hibernated` carries `requestReceivedTimestamp`
  (`shared.adapters.audit_events`, carried on the `SetChanged` trigger).

The caller that knows the time wraps its reconcile in `reported(...)`; the
executor calls `main_pod_deleted` after a DELETE it won, which observes
`now - report time` once. Nothing else observes: the sweep, a push whose pod
had reported before the invocation looked, an audit event of any other
write. Standard library only (the cold-start path imports it).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Literal

from shared import log
from shared.constants import METRIC_SEAT_FREED
from shared.names import SetRef, main_pod_name

ReportSource = Literal["push", "audit"]


@dataclass(frozen=True, slots=True)
class Report:
    """vk-cocoon's `hibernated` report on pod `namespace/pod`, landed at `at` (UTC)."""

    namespace: str
    pod: str
    at: datetime
    source: ReportSource


# The reports known to the reconcile running in this context (a thread or task
# of `serve` has its own; a function instance runs one invocation at a time).
_reports: ContextVar[tuple[Report, ...]] = ContextVar("cocoon_seat_freed_reports", default=())


@contextmanager
def reported(report: Report | None) -> Iterator[None]:
    """While the block runs, a won DELETE of `report.pod` observes the histogram."""
    if report is None:
        yield
        return
    token = _reports.set((*_reports.get(), report))
    try:
        yield
    finally:
        _reports.reset(token)


def main_pod_deleted(ref: SetRef, pod: str, *, now: datetime | None = None) -> None:
    """Our DELETE of `pod` won: observe it if it is the main pod with a known report."""
    if pod != main_pod_name(ref.name):
        return
    for report in _reports.get():
        if report.namespace == ref.namespace and report.pod == pod:
            seconds = ((now or datetime.now(UTC)) - report.at).total_seconds()
            log.observe(METRIC_SEAT_FREED, seconds, namespace=ref.namespace, source=report.source)
            return
