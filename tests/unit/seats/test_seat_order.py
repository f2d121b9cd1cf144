"""The fair order among waiting wakes as tables (pure: no clock, no API).

Restore pods are built with the wake's own builder (`build_main_pod`) and the
line's own `join_line`, then read back as the line reads them, so a change to
what the wake creates is judged here too.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from shared.config import Settings
from shared.constants import ANN_QUEUED_AT, ANN_UNGATED_AT, LABEL_SEAT_LINE
from shared.constants import GATE_SEAT_ORDER as GATE
from shared.errors import ConfigError
from shared.models import Pod
from shared.reconcile.decide import Observed, decide
from shared.reconcile.mainpod import build_main_pod
from shared.reconcile.steps import ReportNoCapacity, Wait, WaitInLine
from shared.seats.line.decide import (
    STALE_PENDING,
    KeepGated,
    State,
    Ungate,
    Waiter,
    advance,
    blocker,
    covers,
    gate_at_create,
    gate_removal,
    join_line,
    position,
    queued_at,
    waiter_of,
)
from tests.fixtures.cocoon_objects import NS, make_set

NOW = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)


def restore_pod(
    name: str,
    *,
    secs_ago: float,
    state: State = State.BLOCKED,
    pool: str | None = None,
    cpu_class: str | None = None,
    pin: str | None = None,
    cpu: str | None = None,
    gates: tuple[str, ...] | None = None,
    node: str | None = None,
    ungated_secs_ago: float | None = None,
    terminating: bool = False,
) -> Pod:
    """The restore pod the wake of set `name` creates, in the state the line sees."""
    spec: dict[str, Any] = {}
    if pool:
        spec["nodePool"] = pool
    if cpu_class:
        spec["snapshotCompatibilityClass"] = cpu_class
    if pin:
        spec["nodeName"] = pin
    agent = {"resources": {"requests": {"cpu": cpu}}} if cpu else None
    cs = make_set(name=name, suspend=False, phase="Waking", spec=spec, agent=agent)
    body = join_line(
        build_main_pod(cs, hint=""),
        pool=pool or "default",
        queued_at=NOW - timedelta(seconds=secs_ago),
        gate=state is State.GATED,
    )
    body["metadata"]["uid"] = f"uid-{name}"
    body["metadata"]["creationTimestamp"] = "2026-11-30T11:00:00Z"
    if gates is not None:
        body["spec"]["schedulingGates"] = [{"name": g} for g in gates]
    if node:
        body["spec"]["nodeName"] = node
    if terminating:
        body["metadata"]["deletionTimestamp"] = "2026-11-30T11:59:00Z"
    if ungated_secs_ago is not None:
        stamp = NOW - timedelta(seconds=ungated_secs_ago)
        body["metadata"]["annotations"][ANN_UNGATED_AT] = stamp.strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    if state is State.BLOCKED:
        body["status"] = {
            "conditions": [
                {
                    "type": "PodScheduled",
                    "status": "False",
                    "reason": "Unschedulable",
                    "message": "0/2 nodes are available: 2 Too many pods.",
                }
            ]
        }
    return Pod.model_validate(body)


def w(name: str, **kw: Any) -> Waiter:
    out = waiter_of(restore_pod(name, **kw))
    assert out is not None
    return out


# --- reading the line ---------------------------------------------------------------


def test_a_restore_pod_reads_back_with_its_pool_class_pin_requests_and_place() -> None:
    got = w("a", secs_ago=5, pool="gpu", cpu_class="skylake", pin="node-7", cpu="1500m")
    assert (got.pool, got.cpu_class, got.pin) == ("gpu", "skylake", "node-7")
    assert got.requests["cpu"] == pytest.approx(1.5)
    assert got.since == NOW - timedelta(seconds=5)
    assert got.state is State.BLOCKED


@pytest.mark.parametrize(
    ("kw", "state"),
    [
        ({"state": State.GATED}, State.GATED),
        ({"state": State.BLOCKED}, State.BLOCKED),
        ({"state": State.PENDING}, State.PENDING),
        # Another controller's gate alone: the scheduler will not try it, but it is
        # not ours to order (it counts as a waiter the scheduler has not judged).
        ({"state": State.PENDING, "gates": ("example.com/quota",)}, State.PENDING),
    ],
)
def test_the_state_of_a_waiter(kw: dict[str, Any], state: State) -> None:
    assert w("a", secs_ago=1, **kw).state is state


@pytest.mark.parametrize(
    "kw",
    [{"node": "node-1"}, {"terminating": True}],
    ids=["bound: it has its seat", "leaving"],
)
def test_bound_or_leaving_pods_are_not_in_line(kw: dict[str, Any]) -> None:
    assert waiter_of(restore_pod("a", secs_ago=1, **kw)) is None


def test_a_pod_without_the_line_label_is_not_in_line() -> None:
    pod = restore_pod("a", secs_ago=1)
    del pod.metadata.labels[LABEL_SEAT_LINE]
    assert waiter_of(pod) is None


def test_without_a_readable_place_the_creation_time_is_the_place() -> None:
    pod = restore_pod("a", secs_ago=1)
    pod.metadata.annotations[ANN_QUEUED_AT] = "yesterday"
    got = waiter_of(pod)
    assert got is not None and got.since == datetime(2026, 11, 30, 11, 0, tzinfo=UTC)


# --- who is ahead of whom -------------------------------------------------------------


@pytest.mark.parametrize(
    ("older", "younger", "expected"),
    [
        ({}, {}, True),
        ({"pool": "gpu"}, {}, False),  # another pool: never the same seat
        ({"cpu_class": "skylake"}, {"cpu_class": "skylake"}, True),
        ({}, {"cpu_class": "skylake"}, True),  # the older can use any class
        ({"cpu_class": "skylake"}, {}, False),  # narrower: a seat of another class
        ({"cpu_class": "skylake"}, {"cpu_class": "zen4"}, False),
        ({"pin": "node-1"}, {}, False),  # pinned: a seat on node-2 is not for it
        ({"pin": "node-1"}, {"pin": "node-1"}, True),
        ({}, {"pin": "node-1"}, True),
        ({"cpu": "2"}, {"cpu": "1"}, False),  # bigger: a seat the younger fits, it may not
        ({"cpu": "1"}, {"cpu": "2"}, True),
        ({"cpu": "1000m"}, {"cpu": "1"}, True),  # the same amount, spelled otherwise
    ],
)
def test_covers_only_when_every_seat_the_younger_could_take_fits_the_older(
    older: dict[str, Any], younger: dict[str, Any], expected: bool
) -> None:
    assert covers(w("old", secs_ago=9, **older), w("new", secs_ago=1, **younger)) is expected


def test_gate_at_create_behind_a_stuck_older_waiter_only() -> None:
    me = w("me", secs_ago=0, state=State.PENDING)
    blocked = w("blocked", secs_ago=5, state=State.BLOCKED)
    gated = w("gated", secs_ago=3, state=State.GATED)
    pending = w("pending", secs_ago=4, state=State.PENDING)
    assert gate_at_create(me, []) is None
    # A pool with room: the older one is merely not judged yet; no gate, no write.
    assert gate_at_create(me, [pending]) is None
    assert gate_at_create(me, [pending, gated]) == gated
    # The oldest stuck one is named (the log says whom it waits behind).
    assert gate_at_create(me, [gated, blocked]) == blocked


def test_gate_at_create_ignores_stuck_waiters_that_could_not_take_its_seat() -> None:
    me = w("me", secs_ago=0, state=State.PENDING, pin="node-2")
    assert gate_at_create(me, [w("pinned", secs_ago=5, pin="node-1")]) is None
    assert gate_at_create(me, [w("other-pool", secs_ago=5, pool="gpu")]) is None
    assert gate_at_create(me, [w("bigger", secs_ago=5, cpu="4")]) is None
    assert gate_at_create(me, [w("younger", secs_ago=-1)]) is None


def test_a_gated_pod_waits_for_any_older_waiter_ahead_until_it_is_judged() -> None:
    me = w("me", secs_ago=1, state=State.GATED)
    # Just ungated, not judged yet: the pool may still be full.
    fresh = w("fresh", secs_ago=5, state=State.PENDING, ungated_secs_ago=1)
    assert blocker(me, [fresh], now=NOW) == fresh
    # Never judged for longer than STALE_PENDING: no scheduler looks at it.
    stale = w("stale", secs_ago=5, state=State.PENDING, ungated_secs_ago=61)
    assert timedelta(seconds=60) == STALE_PENDING
    assert blocker(me, [stale], now=NOW) is None
    assert blocker(me, [w("b", secs_ago=5, state=State.BLOCKED)], now=NOW) is not None
    assert blocker(me, [], now=NOW) is None


def test_equal_places_are_ordered_by_namespace_and_name() -> None:
    a = w("a", secs_ago=3, state=State.GATED)
    b = w("b", secs_ago=3, state=State.GATED)
    assert blocker(b, [a, b], now=NOW) == a
    assert blocker(a, [a, b], now=NOW) is None


# --- advancing a line -----------------------------------------------------------------


def test_advance_ungates_one_at_a_time_for_the_same_seats() -> None:
    line = [
        w("w3", secs_ago=1, state=State.GATED),
        w("w2", secs_ago=2, state=State.GATED),
    ]
    steps = advance(line, now=NOW)
    assert [type(s).__name__ for s in steps] == ["Ungate", "KeepGated"]
    assert steps[0].waiter.name == "w2-0"
    kept = steps[1]
    assert isinstance(kept, KeepGated) and kept.behind.name == "w2-0"


def test_advance_holds_everyone_behind_a_blocked_head() -> None:
    line = [
        w("w1", secs_ago=3, state=State.BLOCKED),
        w("w2", secs_ago=2, state=State.GATED),
        w("w3", secs_ago=1, state=State.GATED),
    ]
    steps = advance(line, now=NOW)
    assert all(isinstance(s, KeepGated) and s.behind.name == "w1-0" for s in steps)


def test_advance_releases_waiters_the_head_cannot_hold_up() -> None:
    # Head of line blocking avoided: the blocked head is pinned to node-1, a seat
    # on any other node is for the unpinned waiter; the smaller one is not held
    # behind a bigger one; another pool's line is its own.
    line = [
        w("pinned", secs_ago=9, state=State.BLOCKED, pin="node-1"),
        w("big", secs_ago=8, state=State.BLOCKED, cpu="8"),
        w("gpu", secs_ago=7, state=State.BLOCKED, pool="gpu"),
        w("small", secs_ago=1, state=State.GATED, cpu="1"),
    ]
    [step] = advance(line, now=NOW)
    assert isinstance(step, Ungate) and step.waiter.name == "small-0"


def test_advance_in_a_line_with_two_cpu_classes() -> None:
    line = [
        w("sky-old", secs_ago=9, state=State.BLOCKED, cpu_class="skylake"),
        w("zen", secs_ago=5, state=State.GATED, cpu_class="zen4"),
        w("sky-new", secs_ago=1, state=State.GATED, cpu_class="skylake"),
    ]
    steps = {s.waiter.name: s for s in advance(line, now=NOW)}
    assert isinstance(steps["zen-0"], Ungate)
    assert isinstance(steps["sky-new-0"], KeepGated)


def test_position_counts_who_is_ahead() -> None:
    line = [
        w("w1", secs_ago=3, state=State.BLOCKED),
        w("w2", secs_ago=2, state=State.GATED),
        w("w3", secs_ago=1, state=State.GATED, pin="node-1"),
    ]
    assert [position(x, line) for x in line] == [1, 2, 3]


# --- the writes -----------------------------------------------------------------------


def test_ungate_patch_removes_only_our_gate_under_a_uid_precondition() -> None:
    mine_only = w("a", secs_ago=1, state=State.GATED)
    patch = gate_removal(mine_only.uid, mine_only.gates, now=NOW)
    assert patch["metadata"]["uid"] == "uid-a"
    assert patch["spec"] == {"schedulingGates": None}
    both = w("b", secs_ago=1, state=State.GATED, gates=("example.com/quota", GATE))
    assert gate_removal(both.uid, both.gates, now=NOW)["spec"] == {
        "schedulingGates": [{"name": "example.com/quota"}]
    }


def test_queued_at_keeps_the_wake_request_time_of_a_recreated_pod() -> None:
    assert queued_at(None, now=NOW) == NOW
    assert queued_at("garbage", now=NOW) == NOW
    # The pod of a wake requested this second: now, to the microsecond.
    assert queued_at("2026-11-30T12:00:00Z", now=NOW + timedelta(milliseconds=300)) == (
        NOW + timedelta(milliseconds=300)
    )
    assert queued_at("2026-11-30T11:50:00Z", now=NOW) == NOW - timedelta(minutes=10)


def test_join_line_gates_only_when_asked() -> None:
    cs = make_set(name="a", suspend=False, phase="Waking")
    plain = join_line(build_main_pod(cs, hint=""), pool="default", queued_at=NOW, gate=False)
    gated = join_line(build_main_pod(cs, hint=""), pool="default", queued_at=NOW, gate=True)
    assert "schedulingGates" not in plain["spec"]
    assert gated["spec"]["schedulingGates"] == [{"name": GATE}]
    assert plain["metadata"]["labels"][LABEL_SEAT_LINE] == "default"
    assert plain["metadata"]["annotations"][ANN_QUEUED_AT] == "2026-11-30T12:00:00.000000Z"


# --- the reconciler's decision ----------------------------------------------------------


def _observe(pod: Pod) -> Observed:
    cs = make_set(name="a", suspend=False, phase="Waking", hint="node-1", uid="set-a")
    raw = pod.model_dump(by_alias=True)
    raw["metadata"]["ownerReferences"][0]["uid"] = "set-a"
    raw["metadata"]["annotations"]["cocoonset.cocoonstack.io/generation"] = "2"
    return Observed(cs=cs, pods=(Pod.model_validate(raw),), registry_configured=True)


def test_decide_waits_in_line_for_a_gated_restore_pod() -> None:
    step = decide(_observe(restore_pod("a", secs_ago=1, state=State.GATED)))
    assert step == WaitInLine(pod_uid="uid-a", pod_name="a-0")


def test_another_controllers_gate_is_not_a_place_in_our_line() -> None:
    pod = restore_pod("a", secs_ago=1, state=State.PENDING, gates=("example.com/quota",))
    assert isinstance(decide(_observe(pod)), Wait)


def test_an_ungated_unschedulable_restore_pod_still_reports_no_capacity() -> None:
    assert isinstance(decide(_observe(restore_pod("a", secs_ago=1))), ReportNoCapacity)


# --- the setting --------------------------------------------------------------------------


def test_the_order_is_on_by_default_and_can_be_turned_off() -> None:
    assert Settings.from_env({}).seat_order is True
    assert Settings.from_env({"COCOON_SEAT_ORDER": "off"}).seat_order is False
    with pytest.raises(ConfigError, match="COCOON_SEAT_ORDER"):
        Settings.from_env({"COCOON_SEAT_ORDER": "fifo"})


def test_namespace_is_part_of_the_key() -> None:
    assert w("a", secs_ago=1).key == f"{NS}/a-0"


# --- the status view ----------------------------------------------------------------------


def test_the_seat_view_shows_each_waiting_wake_with_its_place_in_line() -> None:
    from shared.seats.report import seat_view

    pods = [
        restore_pod("w1", secs_ago=30, state=State.BLOCKED),
        restore_pod("w2", secs_ago=20, state=State.GATED),
        restore_pod("w3", secs_ago=10, state=State.GATED),
    ]
    sets = [
        make_set(
            name=n,
            suspend=False,
            phase="Waking",
            annotations={"cocoonset.cocoonstack.io/wake-started": "2026-11-30T11:59:00Z"},
        )
        for n in ("w1", "w2", "w3")
    ]
    [pool] = seat_view(sets, pods, now=NOW)
    got = {x.set: (x.line, x.position) for x in pool.waiting}
    assert got == {
        f"{NS}/w1": ("unschedulable", 1),
        f"{NS}/w2": ("gated", 2),
        f"{NS}/w3": ("gated", 3),
    }
