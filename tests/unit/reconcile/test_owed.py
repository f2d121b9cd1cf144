"""Owed reports (docs/how-it-works.md#failure-semantics): when decide() emits one, what names it.

Pure: the decision half of the crash-safe once effects. The crash-point suite
(tests/e2e/test_crash_points.py) checks the same promises end to end.
"""

from __future__ import annotations

from typing import Any

import pytest

from shared import constants as k
from shared import lifecycle
from shared.errors import TransientError
from shared.reconcile import owed
from shared.reconcile.decide import Observed, decide
from shared.reconcile.steps import (
    DropSnapshot,
    ReportReleased,
    ReportWoken,
    Wait,
)
from shared.sweep.decide import SafetyNeed, safety_need
from tests.fixtures.cocoon_objects import VM0, make_pod, make_set

ROUND = {k.ANN_RELEASE_ROUND: "2", k.ANN_RELEASE_ROUND_PODS: "agent-0"}
RESTORING = {"restore": True, "node": "node-a", "vm_id": None}
LIVE = {"restore": True, "node": "node-a", "vm_id": "vm-123", "running": True}


def obs(set_kw: dict[str, Any], pods: list[dict[str, Any]], **extra: Any) -> Observed:
    return Observed(cs=make_set(**set_kw), pods=tuple(make_pod(**p) for p in pods), **extra)


def test_a_wake_report_owed_goes_first_whatever_the_phase() -> None:
    marker = owed.wake_owed_value(k.PLACEMENT_POOL, "pod-uid-9", "node-a")
    for phase in ("Running", "Waking", "Pending"):
        o = obs(
            {"suspend": False, "phase": phase, "annotations": {k.ANN_WAKE_REPORT_OWED: marker}},
            [LIVE],
        )
        assert decide(o) == ReportWoken(k.PLACEMENT_POOL, "pod-uid-9", "node-a")


def test_a_released_round_is_reported_by_the_wake_after_its_create() -> None:
    # The seat was freed but the SeatReleased never went out; the user woke it.
    o = obs(
        {"suspend": False, "phase": "Waking", "hint": "node-a", "annotations": ROUND},
        [RESTORING],
    )
    assert decide(o) == ReportReleased("2", ("agent-0",))
    reported = {**ROUND, k.ANN_RELEASE_REPORTED: "2"}
    o = obs(
        {"suspend": False, "phase": "Waking", "hint": "node-a", "annotations": reported},
        [RESTORING],
    )
    assert decide(o) == Wait("restoring agent-0: VM not live yet")


def test_a_live_restore_with_the_round_reported_drops_the_tag() -> None:
    reported = {**ROUND, k.ANN_RELEASE_REPORTED: "2"}
    o = obs(
        {"suspend": False, "phase": "Waking", "hint": "node-a", "annotations": reported}, [LIVE]
    )
    assert decide(o) == DropSnapshot(VM0)


@pytest.mark.parametrize(
    ("annotations", "deleting", "want"),
    [
        ({}, ["agent-0"], ("2", "agent-0")),
        (ROUND, ["agent-0"], None),
        ({**ROUND, k.ANN_RELEASE_ROUND: "1"}, ["agent-0"], ("2", "agent-0")),
        (ROUND, ["agent-1"], ("2", "agent-0,agent-1")),
    ],
    ids=["first-stamp", "stamped", "new-round-replaces", "union-within-a-round"],
)
def test_the_round_stamp(
    annotations: dict[str, str], deleting: list[str], want: tuple[str, str] | None
) -> None:
    assert owed.round_to_stamp(make_set(annotations=annotations), deleting) == want


def test_identities_are_durable_and_distinct_per_occurrence() -> None:
    cs = make_set(annotations=ROUND)
    assert owed.release_identity(cs, "2") == "set-uid-1:g2"
    assert owed.release_identity(cs, "4") != owed.release_identity(cs, "2")
    assert owed.wake_identity(cs, "pod-a") != owed.wake_identity(cs, "pod-b")
    event = lifecycle.released(cs, deleted_pods=["agent-0"], hint="", now=_now(), occurrence="g2")
    assert event.id == "released:set-uid-1:g2"


def test_the_sweep_reconciles_a_set_with_an_owed_report() -> None:
    suspended = make_set(phase="Suspended", annotations=ROUND)
    assert safety_need(suspended) is SafetyNeed.REPORT_OWED
    done = make_set(phase="Suspended", annotations={**ROUND, k.ANN_RELEASE_REPORTED: "2"})
    assert safety_need(done) is SafetyNeed.SUSPENDED_CHECK
    marker = owed.wake_owed_value(k.PLACEMENT_HINT_NODE, "p", "node-a")
    running = make_set(suspend=False, phase="Running", annotations={k.ANN_WAKE_REPORT_OWED: marker})
    assert safety_need(running) is SafetyNeed.REPORT_OWED


class _Down:
    def publish(self, data: bytes, *, ordering_key: str, attributes: Any) -> str:
        raise TransientError("pubsub down")


def test_an_owed_lifecycle_event_that_fails_to_publish_raises() -> None:
    event = lifecycle.woken(
        make_set(), placement="pool", node=None, hint="n", now=_now(), occurrence="pod-a"
    )
    with pytest.raises(TransientError, match="woken:set-uid-1:pod-a"):
        lifecycle.publish(_Down(), event)
    lifecycle.publish(None, event)  # no topic configured: nothing owed


def _now() -> Any:
    from datetime import UTC, datetime

    return datetime(2026, 1, 1, tzinfo=UTC)
