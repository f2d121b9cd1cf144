"""The seat-freed histogram after releases in vk-cocoon's real order, through functions-framework.

vk-cocoon pushes `:hibernate`, removes the VM (`gap` seconds), then reports
`hibernated` (devstack/vkorder.py). The push reaches `ingest` first; its
bounded wait watches the report land, and the DELETE that frees the seat
observes `cocoon_hibernation_seat_freed_seconds` (source=push) from that
moment (shared/reconcile/report_wait.py). A release the sweep completes has no report
time and must not be observed. The samples are read from ingest's log lines:
the same call feeds `serve`'s /metrics (tests/unit/reconcile/test_seat_freed.py).
"""

from __future__ import annotations

import base64
import json
import time
from collections.abc import Callable
from typing import Any

import pytest
import requests

from devstack.triggerrig import TriggerRig
from shared.constants import METRIC_SEAT_FREED
from tests.e2e.test_trigger_configs_e2e import log_messages, rig_for

pytestmark = pytest.mark.e2e

__all__ = ["rig_for"]  # a fixture, found by pytest through this name

GAP_S = 0.5
RELEASES = 3
# A loaded 2-core machine: the release after the report is a handful of requests.
SLACK_S = 3.0


def samples(rig: TriggerRig, after: int = 0, *, want: int = 0) -> list[dict[str, Any]]:
    """The samples logged after line `after`; waits (briefly) for `want` of them.

    The watch can see the DELETE a moment before ingest writes the line that follows it.
    """
    deadline = time.monotonic() + 5.0
    while True:
        got = [m for m in log_messages(rig)[after:] if m.get("metric") == METRIC_SEAT_FREED]
        if len(got) >= want or time.monotonic() > deadline:
            return got
        time.sleep(0.05)


WAITED = "vk-cocoon reported after the push; reconciling again"


def settled_start(rig: TriggerRig, *, warm_up_samples: int) -> int:
    """The log line the measured releases start after, once the warm-up's own sample is in.

    The warm-up release is observed too, and its line can land after the watch saw
    its DELETE (CI once counted it as the next release's second sample).
    """
    samples(rig, 0, want=warm_up_samples)
    return len(log_messages(rig))


def test_a_push_release_observes_the_seat_freed_after_the_report(
    rig_for: Callable[..., TriggerRig],
) -> None:
    with rig_for("push", gap=GAP_S) as rig:
        assert rig.warm_up().deleted is not None
        warm_waits = sum(1 for m in log_messages(rig) if m.get("message") == WAITED)
        start = settled_start(rig, warm_up_samples=warm_waits)
        for _ in range(RELEASES):
            r = rig.release(timeout=20.0)
            assert r.deleted is not None, rig.log_tail()
        waited = [m for m in log_messages(rig)[start:] if m.get("message") == WAITED]
        assert waited, rig.log_tail(40)  # the pushes beat their reports (the real order)
        got = samples(rig, start, want=len(waited))
        # One sample per release whose push watched the report land, and no other.
        assert len(got) == len(waited), rig.log_tail(40)
        for m in got:
            assert m["kind"] == "histogram"
            assert m["labels"] == {"namespace": "trig", "source": "push"}
            # From the report to the DELETE: after it, and well under the push->report gap
            # plus slack (a sample measured from the push would exceed the gap).
            assert 0 < m["value"] < GAP_S + SLACK_S, m


def test_an_audit_release_observes_from_the_report_writes_received_time(
    rig_for: Callable[..., TriggerRig], kube_backend: str
) -> None:
    # The embedded server audits at level Request (the patch body is in the event);
    # the real one runs the shipped infra/k8s/audit/policy.yaml, level Metadata: no
    # body, so no way to tell the report from any other pod write, so no sample.
    with rig_for("audit", gap=GAP_S) as rig:
        assert rig.warm_up().deleted is not None
        start = settled_start(rig, warm_up_samples=1 if kube_backend == "embedded" else 0)
        r = rig.release(timeout=20.0)
        assert r.deleted is not None, rig.log_tail()
        if kube_backend == "real":
            time.sleep(1.0)  # the line would follow the DELETE at once
            assert samples(rig, start) == [], rig.log_tail(40)
            return
        got = samples(rig, start, want=1)
        assert len(got) == 1, rig.log_tail(40)
        assert got[0]["labels"] == {"namespace": "trig", "source": "audit"}
        # Measured from the report's write, not from the push GAP_S earlier.
        assert 0 < got[0]["value"] < SLACK_S


def _sweep(rig: TriggerRig) -> int:
    payload = base64.b64encode(json.dumps({"dryRun": False}).encode()).decode()
    body = {"message": {"data": payload, "messageId": f"sweep-{time.time_ns()}"}}
    response = requests.post(
        f"{rig.ingest_url}/pubsub",
        json=body,
        headers={"Authorization": f"Bearer {rig.sweep_token}"},
        timeout=60,
    )
    return response.status_code


def test_a_sweep_release_is_not_observed(rig_for: Callable[..., TriggerRig]) -> None:
    # No wait: the push is acknowledged before the report, the set stays Suspending,
    # and only the sweep (through ingest's /pubsub, as Cloud Scheduler delivers it)
    # frees the seat. It has no report time: no sample.
    with rig_for("push", gap=GAP_S, report_wait="off") as rig:
        assert rig.warm_up().deleted is not None
        r = rig.release(timeout=4.0)
        assert r.deleted is None
        assert rig.phase(r.name) == "Suspending"
        assert _sweep(rig) < 300
        assert rig.watch is not None
        assert rig.watch.wait(f"{r.name}-0", 20.0) is not None, rig.log_tail(40)
        time.sleep(1.0)  # the line would follow the DELETE at once
        assert samples(rig) == [], rig.log_tail(40)
