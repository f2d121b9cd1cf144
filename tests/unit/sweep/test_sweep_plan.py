"""The sweep's pure decisions (docs/design.md#sweep): tables of set state -> decision, with ids."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from shared import constants as k
from shared.models import CocoonSet, Pod
from shared.names import SetRef
from shared.sweep.decide import (
    ConfigAction,
    IdleCandidate,
    IdleQueue,
    IdleState,
    SafetyNeed,
    check_wake_deadline,
    decide_set,
    evaluate_idle,
    format_duration,
    name_selectors,
    pods_left,
    safety_need,
    unlabelable,
)

NOW = datetime(2026, 1, 10, 12, 0, 0, tzinfo=UTC)


def ts(delta: timedelta) -> str:
    """An RFC 3339 timestamp `delta` before NOW."""
    return (NOW - delta).strftime("%Y-%m-%dT%H:%M:%SZ")


def make_set(
    *,
    name: str = "agent",
    phase: str | None = "Running",
    policy: str = "release",
    suspend: bool | None = None,
    created: timedelta = timedelta(days=1),
    ann: dict[str, str] | None = None,
) -> CocoonSet:
    spec: dict[str, Any] = {"agent": {"image": "img"}, "hibernatePolicy": policy}
    if suspend is not None:
        spec["suspend"] = suspend
    return CocoonSet.model_validate(
        {
            "metadata": {
                "name": name,
                "namespace": "team",
                "resourceVersion": "41",
                "generation": 3,
                "creationTimestamp": ts(created),
                "annotations": ann or {},
            },
            "spec": spec,
            "status": {"phase": phase} if phase else {},
        }
    )


def make_pod(
    *,
    name: str = "agent-0",
    role: str = "main",
    uid: str = "uid-1",
    created: timedelta = timedelta(minutes=1),
    ann: dict[str, str] | None = None,
    phase: str = "Pending",
    deleting: bool = False,
    running: bool = False,
    unschedulable: str | None = None,
) -> Pod:
    meta: dict[str, Any] = {
        "name": name,
        "namespace": "team",
        "uid": uid,
        "creationTimestamp": ts(created),
        "labels": {k.LABEL_SET_NAME: "agent", k.LABEL_ROLE: role},
        "annotations": ann or {},
    }
    if deleting:
        meta["deletionTimestamp"] = ts(timedelta(seconds=1))
    status: dict[str, Any] = {"phase": phase}
    if running:
        status["containerStatuses"] = [{"name": "agent", "state": {"running": {}}}]
    if unschedulable is not None:
        status["conditions"] = [
            {
                "type": "PodScheduled",
                "status": "False",
                "reason": "Unschedulable",
                "message": unschedulable,
            }
        ]
    return Pod.model_validate({"metadata": meta, "status": status})


H = timedelta(hours=1)
M = timedelta(minutes=1)

# --- idle ------------------------------------------------------------------------------

IDLE_CASES = [
    pytest.param({}, {}, IdleState.NOT_OPTED_IN, id="no-timeout-annotation-not-opted-in"),
    pytest.param(
        {k.ANN_IDLE_TIMEOUT: "30m"}, {}, IdleState.IDLE, id="created-long-ago-no-activity-idle"
    ),
    pytest.param(
        {k.ANN_IDLE_TIMEOUT: "30m", k.ANN_LAST_ACTIVITY: ts(10 * M)},
        {},
        IdleState.ACTIVE,
        id="recent-activity-active",
    ),
    pytest.param(
        {k.ANN_IDLE_TIMEOUT: "30m", k.ANN_LAST_ACTIVITY: ts(2 * H)},
        {},
        IdleState.IDLE,
        id="old-activity-idle",
    ),
    pytest.param(
        {k.ANN_IDLE_TIMEOUT: "30m", k.ANN_LAST_ACTIVITY: ts(2 * H), k.ANN_LAST_WAKE: ts(5 * M)},
        {},
        IdleState.ACTIVE,
        id="recent-wake-completion-counts-as-activity",
    ),
    pytest.param(
        {k.ANN_IDLE_TIMEOUT: "30m"},
        {"created": 5 * M},
        IdleState.ACTIVE,
        id="freshly-created-set-active",
    ),
    pytest.param(
        {k.ANN_IDLE_TIMEOUT: "30m", k.ANN_LAST_ACTIVITY: ts(30 * M)},
        {},
        IdleState.IDLE,
        id="idle-exactly-the-timeout-idle",
    ),
    pytest.param(
        {k.ANN_IDLE_TIMEOUT: "30m", k.ANN_LAST_ACTIVITY: ts(-5 * M)},
        {},
        IdleState.ACTIVE,
        id="activity-in-the-future-clock-skew-active",
    ),
    pytest.param(
        {k.ANN_IDLE_TIMEOUT: "45s", k.ANN_LAST_ACTIVITY: "2026-01-10T11:59:00+00:00"},
        {},
        IdleState.IDLE,
        id="seconds-timeout-and-offset-timestamp",
    ),
    pytest.param(
        {k.ANN_IDLE_TIMEOUT: "30m", k.ANN_IDLE_EXEMPT_UNTIL: ts(-1 * H)},
        {},
        IdleState.EXEMPT,
        id="exempt-until-future-exempt",
    ),
    pytest.param(
        {k.ANN_IDLE_TIMEOUT: "30m", k.ANN_IDLE_EXEMPT_UNTIL: ts(1 * M)},
        {},
        IdleState.IDLE,
        id="exempt-until-past-idle",
    ),
    pytest.param(
        {k.ANN_IDLE_TIMEOUT: "30m"},
        {"phase": "Pending"},
        IdleState.NOT_ELIGIBLE,
        id="pending-not-eligible",
    ),
    pytest.param(
        {k.ANN_IDLE_TIMEOUT: "30m"},
        {"phase": "Suspended", "suspend": True},
        IdleState.NOT_ELIGIBLE,
        id="suspended-not-eligible",
    ),
    pytest.param(
        {k.ANN_IDLE_TIMEOUT: "30m"},
        {"suspend": True},
        IdleState.NOT_ELIGIBLE,
        id="running-but-suspend-already-requested-not-eligible",
    ),
    pytest.param(
        {k.ANN_IDLE_TIMEOUT: "30m", k.ANN_HIBERNATED_ON_NODE: "node-a"},
        {},
        IdleState.NOT_ELIGIBLE,
        id="wake-in-flight-hint-not-eligible",
    ),
    pytest.param(
        {k.ANN_IDLE_TIMEOUT: "30m"},
        {"policy": "retain"},
        IdleState.IDLE,
        id="retain-policy-idle-too",
    ),
    pytest.param(
        {k.ANN_IDLE_TIMEOUT: "soon"}, {}, IdleState.BAD_CONFIG, id="bad-duration-bad-config"
    ),
    pytest.param(
        {k.ANN_IDLE_TIMEOUT: "0s"}, {}, IdleState.BAD_CONFIG, id="zero-duration-bad-config"
    ),
    pytest.param(
        {k.ANN_IDLE_TIMEOUT: "30m", k.ANN_LAST_ACTIVITY: "yesterday"},
        {},
        IdleState.BAD_CONFIG,
        id="bad-last-activity-bad-config",
    ),
    pytest.param(
        {k.ANN_IDLE_TIMEOUT: "30m", k.ANN_IDLE_EXEMPT_UNTIL: "2026-01-10T12:00:00"},
        {},
        IdleState.BAD_CONFIG,
        id="exempt-until-without-zone-bad-config",
    ),
    pytest.param(
        {k.ANN_IDLE_TIMEOUT: "soon"},
        {"phase": "Suspended", "suspend": True},
        IdleState.BAD_CONFIG,
        id="bad-config-reported-whatever-the-phase",
    ),
    pytest.param(
        {k.ANN_LAST_ACTIVITY: "yesterday"},
        {},
        IdleState.NOT_OPTED_IN,
        id="bad-activity-without-timeout-ignored",
    ),
]


@pytest.mark.parametrize(("ann", "kw", "expected"), IDLE_CASES)
def test_idle_evaluation(ann: dict[str, str], kw: dict[str, Any], expected: IdleState) -> None:
    assert evaluate_idle(make_set(ann=ann, **kw), now=NOW).state is expected


def test_idle_for_is_measured_from_the_newest_activity() -> None:
    cs = make_set(
        ann={k.ANN_IDLE_TIMEOUT: "30m", k.ANN_LAST_ACTIVITY: ts(3 * H), k.ANN_LAST_WAKE: ts(2 * H)}
    )
    idle = evaluate_idle(cs, now=NOW)
    assert idle.idle_for == 2 * H
    assert idle.timeout == 30 * M


# --- bad config: warn once per value --------------------------------------------------------

CONFIG_CASES = [
    pytest.param({k.ANN_IDLE_TIMEOUT: "soon"}, ConfigAction.WARN, id="new-bad-value-warn"),
    pytest.param(
        {k.ANN_IDLE_TIMEOUT: "soon", k.ANN_IDLE_CONFIG_ERROR: "idle-timeout=soon"},
        None,
        id="same-bad-value-already-warned-silent",
    ),
    pytest.param(
        {k.ANN_IDLE_TIMEOUT: "later", k.ANN_IDLE_CONFIG_ERROR: "idle-timeout=soon"},
        ConfigAction.WARN,
        id="different-bad-value-warn-again",
    ),
    pytest.param(
        {k.ANN_IDLE_TIMEOUT: "30m", k.ANN_IDLE_CONFIG_ERROR: "idle-timeout=soon"},
        ConfigAction.CLEAR,
        id="fixed-value-clears-record",
    ),
    pytest.param({k.ANN_IDLE_TIMEOUT: "30m"}, None, id="good-config-nothing"),
]


@pytest.mark.parametrize(("ann", "expected"), CONFIG_CASES)
def test_config_warning_is_due_once_per_bad_value(
    ann: dict[str, str], expected: ConfigAction | None
) -> None:
    assert decide_set(make_set(ann=ann), now=NOW).config is expected


def test_fingerprint_names_every_bad_value() -> None:
    cs = make_set(ann={k.ANN_IDLE_TIMEOUT: "soon", k.ANN_LAST_ACTIVITY: "yesterday"})
    assert evaluate_idle(cs, now=NOW).fingerprint == "idle-timeout=soon;last-activity=yesterday"


def test_fingerprint_of_a_huge_value_stays_small() -> None:
    cs = make_set(ann={k.ANN_IDLE_TIMEOUT: "x" * 5000})
    assert len(evaluate_idle(cs, now=NOW).fingerprint) < 200


# --- safety net ---------------------------------------------------------------------------

SAFETY_CASES = [
    pytest.param({"phase": "Running"}, None, id="running-release-nothing"),
    pytest.param(
        {"phase": "Suspending", "suspend": True},
        SafetyNeed.RELEASE_PENDING,
        id="stuck-suspending-reconcile",
    ),
    pytest.param(
        {"phase": "Running", "suspend": True},
        SafetyNeed.RELEASE_PENDING,
        id="suspend-requested-never-reconciled",
    ),
    pytest.param(
        {"phase": "Suspended", "suspend": True},
        SafetyNeed.SUSPENDED_CHECK,
        id="suspended-needs-pod-check",
    ),
    pytest.param({"phase": "Failed", "suspend": True}, None, id="failed-left-to-operator"),
    pytest.param(
        {"phase": "Suspended", "suspend": False},
        SafetyNeed.WAKE_PENDING,
        id="unsuspended-while-suspended-wake-pending",
    ),
    pytest.param(
        {"phase": "Suspending", "suspend": False, "ann": {k.ANN_HIBERNATED_ON_NODE: "n1"}},
        SafetyNeed.WAKE_PENDING,
        id="fast-unsuspend-raced-deletes-wake-pending",
    ),
    pytest.param(
        {"phase": "Suspending", "suspend": False},
        None,
        id="in-place-unsuspend-not-ours",
    ),
    pytest.param({"phase": "Waking"}, SafetyNeed.WAKING, id="waking-reconcile"),
    pytest.param(
        {"phase": "Waking", "policy": "retain"},
        SafetyNeed.WAKING,
        id="waking-after-policy-edit-still-reconciled",
    ),
    pytest.param(
        {"phase": "Running", "ann": {k.ANN_HIBERNATED_ON_NODE: "n1"}},
        SafetyNeed.UNFINISHED_WAKE,
        id="running-with-hint-unfinished-wake",
    ),
    pytest.param(
        {"phase": "Suspending", "suspend": True, "policy": "retain"},
        None,
        id="retain-suspending-not-ours",
    ),
    pytest.param(
        {"phase": "Suspended", "suspend": True, "policy": "retain"},
        None,
        id="retain-suspended-not-ours",
    ),
    pytest.param({"phase": None, "suspend": True}, SafetyNeed.RELEASE_PENDING, id="no-status-yet"),
]


@pytest.mark.parametrize(("kw", "expected"), SAFETY_CASES)
def test_safety_net_selection(kw: dict[str, Any], expected: SafetyNeed | None) -> None:
    assert safety_need(make_set(**kw)) is expected


PODS_LEFT_CASES = [
    pytest.param([], False, id="no-pods"),
    pytest.param([make_pod()], True, id="a-live-pod"),
    pytest.param([make_pod(deleting=True)], False, id="only-terminating"),
    pytest.param([make_pod(phase="Failed")], False, id="only-failed-kept-for-triage"),
    # vk-cocoon's sticky `failed` is not kubelet-terminal: the pod still holds its seat.
    pytest.param(
        [make_pod(ann={k.ANN_LIFECYCLE_STATE: "failed"})], True, id="vm-failed-holds-seat"
    ),
    pytest.param([make_pod(deleting=True), make_pod(uid="u2")], True, id="mixed"),
]


@pytest.mark.parametrize(("pods", "expected"), PODS_LEFT_CASES)
def test_pods_left(pods: list[Pod], expected: bool) -> None:
    assert pods_left(pods) is expected


# --- wake deadline -----------------------------------------------------------------------

DEADLINE = 10 * M
RESTORE = {k.ANN_RESTORE: k.TRUE}


WAKE_CASES = [
    pytest.param({}, [make_pod(created=5 * M, ann=RESTORE)], None, id="young-wake-nothing"),
    pytest.param(
        {}, [make_pod(created=11 * M, ann=RESTORE)], "pod:uid-1", id="old-restore-pod-times-out"
    ),
    pytest.param(
        {},
        [make_pod(created=11 * M, ann={**RESTORE, k.ANN_VM_ID: "vm"}, running=True)],
        None,
        id="live-main-about-to-complete-nothing",
    ),
    pytest.param(
        {k.ANN_WAKE_TIMEOUT_REPORTED: "pod:uid-1"},
        [make_pod(created=11 * M, ann=RESTORE)],
        None,
        id="already-reported-once",
    ),
    pytest.param(
        {k.ANN_WAKE_TIMEOUT_REPORTED: "pod:uid-0"},
        [make_pod(created=11 * M, ann=RESTORE)],
        "pod:uid-1",
        id="earlier-wake-reported-new-wake-reports",
    ),
    pytest.param({}, [], None, id="no-pod-no-start-nothing-to-measure"),
    pytest.param(
        {k.ANN_WAKE_STARTED: ts(20 * M)},
        [],
        f"started:{ts(20 * M)}",
        id="no-pod-yet-measured-from-wake-started",
    ),
    pytest.param(
        {k.ANN_WAKE_STARTED: ts(20 * M)},
        [make_pod(created=2 * M, ann=RESTORE)],
        f"started:{ts(20 * M)}",
        id="wake-started-wins-so-identity-survives-pod-creation",
    ),
    pytest.param(
        {}, [make_pod(created=11 * M)], None, id="main-without-restore-marker-not-a-restore"
    ),
    pytest.param(
        {},
        [make_pod(created=11 * M, ann=RESTORE, deleting=True)],
        None,
        id="terminating-main-ignored",
    ),
]


@pytest.mark.parametrize(("ann", "pods", "key"), WAKE_CASES)
def test_wake_deadline(ann: dict[str, str], pods: list[Pod], key: str | None) -> None:
    cs = make_set(phase="Waking", ann=ann)
    got = check_wake_deadline(cs, pods, now=NOW, deadline=DEADLINE)
    assert (got.key if got else None) == key


def test_wake_timeout_message_carries_the_scheduler_message() -> None:
    cs = make_set(phase="Waking")
    pod = make_pod(created=11 * M, ann=RESTORE, unschedulable="0/3 nodes are available")
    got = check_wake_deadline(cs, [pod], now=NOW, deadline=DEADLINE)
    assert got is not None
    assert "0/3 nodes are available" in got.message
    assert "11m" in got.message and "still waiting" in got.message


def test_wake_deadline_only_for_waking_sets() -> None:
    cs = make_set(phase="Running")
    pod = make_pod(created=11 * M, ann=RESTORE)
    assert check_wake_deadline(cs, [pod], now=NOW, deadline=DEADLINE) is None


# --- the cap ------------------------------------------------------------------------------


def cand(name: str, idle: timedelta) -> IdleCandidate:
    return IdleCandidate(
        ref=SetRef("team", name),
        resource_version="1",
        release=True,
        idle_for=idle,
        timeout=M,
        last_activity=NOW - idle,
    )


QUEUE_CASES = [
    pytest.param(
        3, [("a", 1), ("b", 5), ("c", 3)], ["b", "c", "a"], 0, id="under-cap-all-longest-first"
    ),
    pytest.param(
        2, [("a", 1), ("b", 5), ("c", 3), ("d", 4)], ["b", "d"], 2, id="cap-keeps-longest"
    ),
    pytest.param(2, [("d", 2), ("c", 2), ("b", 2)], ["b", "c"], 1, id="ties-by-name"),
    pytest.param(0, [("a", 1)], [], 1, id="zero-cap-suspends-nothing"),
    pytest.param(1, [], [], 0, id="nothing-idle"),
]


@pytest.mark.parametrize(("cap", "items", "expected", "deferred"), QUEUE_CASES)
def test_idle_queue_keeps_the_longest_idle_up_to_the_cap(
    cap: int, items: list[tuple[str, int]], expected: list[str], deferred: int
) -> None:
    q = IdleQueue(cap)
    for name, hours in items:
        q.offer(cand(name, hours * H))
    assert [c.ref.name for c in q.drain()] == expected
    assert q.deferred == deferred


def test_idle_queue_memory_is_bounded_by_the_cap() -> None:
    q = IdleQueue(5)
    for i in range(10_000):
        q.offer(cand(f"s{i}", (i % 997) * M))
    assert len(q) == 5
    assert q.deferred == 9_995
    assert [c.idle_for for c in q.drain()] == [996 * M] * 5


def test_plan_carries_an_idle_candidate_only_when_idle() -> None:
    idle = decide_set(make_set(ann={k.ANN_IDLE_TIMEOUT: "30m"}), now=NOW)
    active = decide_set(make_set(ann={k.ANN_IDLE_TIMEOUT: "30m"}, created=M), now=NOW)
    c = idle.candidate
    assert c is not None and c.idle_for == timedelta(days=1) and c.resource_version == "41"
    assert active.candidate is None


# --- selectors ------------------------------------------------------------------------------


def test_name_selectors_cover_every_name_once_within_the_bound() -> None:
    names = [f"set-{i:04d}" for i in range(500)]
    sels = name_selectors(names + names[:10], max_chars=1000)
    assert all(len(s) <= 1000 for s in sels)
    seen: list[str] = []
    for s in sels:
        assert s.startswith(f"{k.LABEL_SET_NAME} in (") and s.endswith(")")
        seen += s[s.index("(") + 1 : -1].split(",")
    assert sorted(seen) == sorted(names)


def test_name_selectors_of_nothing_is_no_request() -> None:
    assert name_selectors([]) == []


LONG = "agent-" + "x" * 94  # a valid set name (DNS-1123 subdomain), 100 characters


@pytest.mark.parametrize(
    ("name", "selectable"),
    [
        pytest.param("a" * 63, True, id="63-chars"),
        pytest.param("team.agent-1", True, id="dotted"),
        pytest.param("a" * 64, False, id="64-chars"),
        pytest.param(LONG, False, id="100-chars"),
        pytest.param("a" * 253, False, id="253-chars"),
    ],
)
def test_a_name_that_is_no_label_value_is_left_out_of_the_selector(
    name: str, selectable: bool
) -> None:
    sels = name_selectors(["waking-one", name, "released-two"])
    listed = [n for s in sels for n in s[s.index("(") + 1 : -1].split(",")]
    # One such name would make the API answer 400 for the whole page's pod list.
    assert ("waking-one" in listed) and ("released-two" in listed)
    assert (name in listed) is selectable
    assert unlabelable(["waking-one", name]) == ([] if selectable else [name])


def test_only_unlabelable_names_is_no_request() -> None:
    assert name_selectors([LONG, "b" * 64]) == []


@pytest.mark.parametrize(
    ("value", "text"),
    [
        pytest.param(timedelta(seconds=45), "45s", id="seconds"),
        pytest.param(timedelta(hours=2, minutes=3), "2h3m", id="hours-minutes"),
        pytest.param(timedelta(0), "0s", id="zero"),
    ],
)
def test_format_duration(value: timedelta, text: str) -> None:
    assert format_duration(value) == text
