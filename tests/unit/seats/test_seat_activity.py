"""CPU-based activity as tables: threshold, missing metrics, bounded writes, quantities."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from shared import constants as k
from shared.durations import format_rfc3339
from shared.models import CocoonSet
from shared.seats.activity import (
    Activity,
    cpu_nanocores,
    evaluate_activity,
    main_pod_usage,
    refresh_every,
)
from tests.fixtures.cocoon_objects import make_set

NOW = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)
M = 10**6  # nanocores per millicore


def opted(last_activity_ago: timedelta | None = None, **kw: Any) -> CocoonSet:
    ann = {k.ANN_IDLE_CPU_BELOW: "50m", k.ANN_IDLE_TIMEOUT: "30m", **kw.pop("annotations", {})}
    if last_activity_ago is not None:
        ann[k.ANN_LAST_ACTIVITY] = format_rfc3339(NOW - last_activity_ago)
    return make_set(
        suspend=kw.pop("suspend", None), phase=kw.pop("phase", "Running"), annotations=ann, **kw
    )


@pytest.mark.parametrize(
    ("usage", "state"),
    [
        (49 * M, Activity.QUIET),  # below: no evidence of activity, the idle clock runs
        (50 * M, Activity.REFRESH),  # at the threshold counts as active
        (900 * M, Activity.REFRESH),
        (None, Activity.UNKNOWN),  # no PodMetrics for the main pod: never suspend on it
    ],
)
def test_threshold(usage: int | None, state: Activity) -> None:
    assert evaluate_activity(opted(), usage, now=NOW).state is state


@pytest.mark.parametrize(
    ("ago", "state"),
    [
        (timedelta(minutes=1), Activity.ACTIVE),  # fresh enough: no write
        (timedelta(minutes=2, seconds=59), Activity.ACTIVE),
        (timedelta(minutes=3), Activity.REFRESH),  # a tenth of the 30m timeout
        (timedelta(hours=5), Activity.REFRESH),
    ],
)
def test_writes_are_bounded_to_one_per_tenth_of_the_timeout(
    ago: timedelta, state: Activity
) -> None:
    assert evaluate_activity(opted(ago), 200 * M, now=NOW).state is state


def test_the_shortest_timeout_bounds_the_refresh() -> None:
    cs = opted(annotations={k.ANN_RECLAIMABLE_AFTER: "10m"})
    assert refresh_every(cs) == timedelta(minutes=1)
    assert refresh_every(make_set(annotations={k.ANN_IDLE_CPU_BELOW: "5m"})) == timedelta(minutes=1)


@pytest.mark.parametrize(
    "kw",
    [
        {"phase": "Suspended", "suspend": True},
        {"phase": "Waking"},
        {"hint": "node-1"},
    ],
)
def test_only_a_running_set_is_measured(kw: dict[str, Any]) -> None:
    assert evaluate_activity(opted(**kw), 900 * M, now=NOW).state is Activity.NOT_RUNNING


def test_not_opted_in_and_bad_config() -> None:
    assert evaluate_activity(make_set(), 900 * M, now=NOW).state is Activity.NOT_OPTED_IN
    bad = opted(annotations={k.ANN_IDLE_CPU_BELOW: "fifty"})
    assert evaluate_activity(bad, 900 * M, now=NOW).state is Activity.BAD_CONFIG


@pytest.mark.parametrize(
    ("q", "nano"),
    [("50m", 50 * M), ("0.5", 500 * M), ("1", 10**9), ("12345n", 12345), ("250u", 250_000)],
)
def test_quantities(q: str, nano: int) -> None:
    assert cpu_nanocores(q) == nano


@pytest.mark.parametrize("q", ["", "fifty", "-5m", "1Ki", "5 m"])
def test_bad_quantities(q: str) -> None:
    with pytest.raises(ValueError, match="CPU quantity"):
        cpu_nanocores(q)


def test_a_pod_metrics_item_sums_its_containers() -> None:
    containers: list[dict[str, object]] = [
        {"name": "agent", "usage": {"cpu": "40m", "memory": "1Gi"}},
        {"name": "sidecar", "usage": {"cpu": "15000000n"}},
    ]
    assert main_pod_usage(containers) == 55 * M
    assert main_pod_usage([{"name": "agent", "usage": {}}]) is None
