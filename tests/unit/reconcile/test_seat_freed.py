"""The seat-freed histogram's report time: where it comes from, and where it must not.

vk-cocoon's `hibernated` report carries no time (docs/observability.md), so
the only audit-path time is the `requestReceivedTimestamp` of the audit event
of the very patch that set the annotation to `hibernated`. Any other write
(our keep-snapshot flag on a hibernated pod, a PUT of the whole pod, a
Metadata-level event with no body) must give no time, or the histogram would
measure from the wrong write.
"""

from __future__ import annotations

import io
import json
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from shared import constants as k
from shared import log
from shared.adapters import parse_audit_eventlist
from shared.adapters.audit_events import report_time
from shared.config import LogFormat, Settings
from shared.constants import METRIC_SEAT_FREED
from shared.metric_names import BY_NAME
from shared.names import SetRef
from shared.ports import Report
from shared.reconcile import Outcome
from shared.reconcile.report_wait import observe_seat_freed, settle
from shared.triggers import SetChanged
from tests.fixtures.cocoon_objects import NS, SET, VM0, make_pod, make_set

RECEIVED = "2026-12-01T19:40:11.102331Z"


def report_event(**over: Any) -> dict[str, Any]:
    """vk-cocoon's report as a kube-apiserver audit event at level Request."""
    event: dict[str, Any] = {
        "level": "Request",
        "auditID": "a-report",
        "stage": "ResponseComplete",
        "verb": "patch",
        "objectRef": {
            "resource": "pods",
            "namespace": "team-a",
            "name": "agent-0",
            "apiVersion": "v1",
        },
        "responseStatus": {"metadata": {}, "code": 200},
        "requestReceivedTimestamp": RECEIVED,
        "requestObject": {
            "metadata": {
                "annotations": {
                    k.ANN_LIFECYCLE_STATE: "hibernated",
                    k.ANN_LIFECYCLE_GENERATION: "2",
                }
            }
        },
    }
    event.update(over)
    return event


def test_the_reports_patch_gives_its_received_time_to_the_microsecond() -> None:
    assert report_time(report_event()) == datetime(2026, 12, 1, 19, 40, 11, 102331, tzinfo=UTC)


def _without_body() -> dict[str, Any]:
    e = report_event(level="Metadata")
    del e["requestObject"]
    return e


def _state(value: str) -> dict[str, Any]:
    e = report_event()
    e["requestObject"]["metadata"]["annotations"][k.ANN_LIFECYCLE_STATE] = value
    return e


def _flag_only() -> dict[str, Any]:
    # Our keep-snapshot flag on a pod that is already hibernated: not the report.
    return report_event(requestObject={"metadata": {"annotations": {k.ANN_KEEP_SNAPSHOT: "true"}}})


def _set_write() -> dict[str, Any]:
    e = report_event()
    e["objectRef"] = {
        "resource": "cocoonsets",
        "apiGroup": k.GROUP,
        "namespace": "team-a",
        "name": "agent",
    }
    return e


@pytest.mark.parametrize(
    "event",
    [
        pytest.param(_without_body(), id="metadata-level-no-body"),
        pytest.param(_state("hibernating"), id="hibernating-is-not-the-report"),
        pytest.param(_flag_only(), id="another-annotation"),
        pytest.param(report_event(verb="update"), id="put-of-the-whole-pod"),
        pytest.param(_set_write(), id="a-cocoonset-write"),
        pytest.param(report_event(requestReceivedTimestamp="yesterday"), id="bad-timestamp"),
        pytest.param(report_event(requestReceivedTimestamp=None), id="no-timestamp"),
        pytest.param(report_event(requestObject=[{"op": "add"}]), id="json-patch"),
    ],
)
def test_no_time_for_anything_but_the_report(event: dict[str, Any]) -> None:
    assert report_time(event) is None


def _eventlist(*items: dict[str, Any]) -> bytes:
    return json.dumps(
        {"kind": "EventList", "apiVersion": "audit.k8s.io/v1", "items": items}
    ).encode()


def test_the_trigger_carries_the_report_even_after_an_earlier_write_in_the_batch() -> None:
    # kubelet's status write lands in the same batch first; the one reconcile keeps the time.
    status = report_event(auditID="a-status", requestObject={"status": {"phase": "Running"}})
    status["objectRef"] = {**status["objectRef"], "subresource": "status"}
    parsed = parse_audit_eventlist(_eventlist(status, report_event()), Settings())
    assert len(parsed.triggers) == 1
    trigger = parsed.triggers[0]
    assert isinstance(trigger, SetChanged)
    assert trigger.ref == SetRef("team-a", "agent")
    assert trigger.report == Report(
        "team-a", "agent-0", datetime(2026, 12, 1, 19, 40, 11, 102331, tzinfo=UTC), "audit"
    )


def test_a_metadata_level_batch_carries_no_report() -> None:
    parsed = parse_audit_eventlist(_eventlist(_without_body()), Settings())
    assert [t.report for t in parsed.triggers if isinstance(t, SetChanged)] == [None]


def _observed(run: Any) -> list[dict[str, Any]]:
    out = io.StringIO()
    log.configure(LogFormat.JSON, out)
    try:
        run()
    finally:
        log.configure(LogFormat.JSON)
    lines = [json.loads(line) for line in out.getvalue().splitlines()]
    return [m for m in lines if m.get("metric") == METRIC_SEAT_FREED]


AT = datetime(2026, 12, 1, 19, 40, 0, tzinfo=UTC)
REF = SetRef("team-a", "agent")


def test_the_won_delete_of_the_main_pod_observes_now_minus_the_report() -> None:
    report = Report("team-a", "agent-0", AT, "push")

    def run() -> None:
        observe_seat_freed(REF, "agent-0", report, now=AT + timedelta(milliseconds=180))

    [m] = _observed(run)
    assert m["value"] == 0.18
    assert m["labels"] == {"namespace": "team-a", "source": "push"}


def test_nothing_is_observed_without_a_report_or_for_another_pod() -> None:
    report = Report("team-a", "agent-0", AT, "audit")

    def run() -> None:
        observe_seat_freed(REF, "agent-0", None, now=AT)  # the sweep: no report known
        observe_seat_freed(REF, "agent-1", report, now=AT)  # a sub-agent pod
        observe_seat_freed(SetRef("team-b", "agent"), "agent-0", report, now=AT)

    assert _observed(run) == []


def test_serve_exposes_it_with_its_own_fine_buckets() -> None:
    from functions.metrics import install

    registry = install()
    labels = {"namespace": "ns-sf", "source": "push"}
    before = registry.get_sample_value(f"{METRIC_SEAT_FREED}_bucket", {**labels, "le": "0.1"})
    log.observe(METRIC_SEAT_FREED, 0.07, **labels)
    after = registry.get_sample_value(f"{METRIC_SEAT_FREED}_bucket", {**labels, "le": "0.1"})
    assert (after or 0) - (before or 0) == 1
    assert BY_NAME[METRIC_SEAT_FREED].buckets[0] == 0.05
    assert registry.get_sample_value(f"{METRIC_SEAT_FREED}_bucket", {**labels, "le": "0.05"}) == 0


# --- the push path: only a report the watch saw land has a time ---------------------


class _WatchingKube:
    """The three reads `shared.reconcile.report_wait.settle` makes, from a script.

    A fake, not the real client: which event of the watch carries the report
    (the first = the LIST's state, or a later change) is the point under test,
    and a real server cannot be made to order that deterministically. The
    e2e (tests/e2e/test_seat_freed_e2e.py) runs the real order.
    """

    def __init__(self, states: list[str]) -> None:
        self.states = states

    def get_set(self, ref: SetRef) -> Any:
        return make_set()

    def list_pods(self, ref: SetRef) -> list[Any]:
        return [make_pod(hibernate=True, state=self.states[0])]

    def watch_pod(self, namespace: str, name: str, *, timeout: float) -> Any:
        for state in self.states:
            yield make_pod(hibernate=True, state=state, generation=2)


def _settle(states: list[str]) -> list[dict[str, Any]]:
    ref = SetRef(NS, SET)
    main = make_pod().name

    def reconcile(*, report: Report | None) -> Outcome:
        # What the executor's won DELETE of the main pod calls.
        observe_seat_freed(ref, main, report, now=datetime.now(UTC))
        return Outcome(ref, "done", "released")

    def run() -> None:
        settle(
            ref,
            VM0,
            Outcome(ref, "waiting", "hibernating"),
            kube=_WatchingKube(states),  # type: ignore[arg-type]
            reconcile=reconcile,
            budget=timedelta(seconds=2),
        )

    return _observed(run)


def test_a_report_the_watch_saw_land_is_observed_as_push() -> None:
    [m] = _settle(["hibernating", "hibernated"])
    assert m["labels"]["source"] == "push"
    assert 0 <= m["value"] < 1.0


def test_a_report_already_there_when_the_watch_opened_is_not_observed() -> None:
    # The LIST already shows `hibernated`: when it landed is unknown.
    assert _settle(["hibernated"]) == []


def test_a_failed_hibernation_is_not_a_report() -> None:
    assert _settle(["hibernating", "failed"]) == []
