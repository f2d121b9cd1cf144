"""The slot-release counters carry cocoon-operator's names (issue 13, defect 7).

Existing dashboards and alerts query the operator's metric names; the log
line's `metric` field, the Terraform log-based metrics and `serve`'s
Prometheus endpoint must all use exactly these.
"""

from __future__ import annotations

import io

import prometheus_client

from functions.metrics import install
from shared import constants as k
from shared import log
from shared.config import LogFormat

OPERATOR_NAMES = {
    "cocoon_operator_slot_release_pods_deleted_total": ("namespace", "cocoonset"),
    "cocoon_operator_slot_release_wake_total": ("namespace", "cocoonset", "placement"),
    "cocoon_operator_slot_release_wake_unschedulable_total": ("namespace", "cocoonset"),
}


def test_counter_names_are_the_operators() -> None:
    assert {k.METRIC_PODS_DELETED, k.METRIC_WAKE, k.METRIC_WAKE_UNSCHEDULABLE} == set(
        OPERATOR_NAMES
    )


def test_a_count_is_one_log_line_and_one_prometheus_sample() -> None:
    registry = install()
    before = registry.get_sample_value(
        k.METRIC_WAKE, {"namespace": "ns-m", "cocoonset": "cs-m", "placement": "pool"}
    )
    out = io.StringIO()
    log.configure(LogFormat.JSON, out)
    try:
        log.count(k.METRIC_WAKE, namespace="ns-m", cocoonset="cs-m", placement="pool")
    finally:
        log.configure(LogFormat.JSON, None)
    assert f'"metric":"{k.METRIC_WAKE}"' in out.getvalue()
    after = registry.get_sample_value(
        k.METRIC_WAKE, {"namespace": "ns-m", "cocoonset": "cs-m", "placement": "pool"}
    )
    assert after == (before or 0) + 1
    text = prometheus_client.generate_latest(registry).decode()
    for name in OPERATOR_NAMES:
        assert f"# TYPE {name} counter" in text
    assert "_created" not in "\n".join(line for line in text.splitlines() if "slot_release" in line)
