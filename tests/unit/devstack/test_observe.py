"""The demo's narration: one line per change a user cares about, each said once."""

from __future__ import annotations

from typing import Any

from devstack.observe import build_view, transitions
from devstack.sim_pods import main_pod_body
from shared import constants as k

NODES = {"node-1": 1, "node-2": 1}


def _set(phase: str, *, suspend: bool = False, hint: str = "") -> dict[str, Any]:
    return {
        "metadata": {
            "name": "a",
            "namespace": "demo",
            "annotations": {k.ANN_HIBERNATED_ON_NODE: hint} if hint else {},
        },
        "spec": {"hibernatePolicy": "release", "suspend": suspend, "agent": {"image": "i"}},
        "status": {"phase": phase},
    }


def _pod(*, node: str = "", restore: bool = False, unschedulable: str = "") -> dict[str, Any]:
    body = main_pod_body(_set("Running"))
    if restore:
        body["metadata"]["annotations"][k.ANN_RESTORE] = k.TRUE
    if node:
        body["spec"]["nodeName"] = node
        body["metadata"]["annotations"][k.ANN_VM_ID] = "vm-1"
    conds = []
    if unschedulable:
        conds.append(
            {
                "type": "PodScheduled",
                "status": "False",
                "reason": "Unschedulable",
                "message": unschedulable,
            }
        )
    body["status"] = {"conditions": conds}
    return body


def _event(reason: str, uid: str) -> dict[str, Any]:
    return {
        "metadata": {"namespace": "demo", "uid": uid},
        "involvedObject": {"name": "a"},
        "reason": reason,
        "type": "Warning",
        "message": "0/2 nodes are available: 2 Insufficient seats.",
    }


def test_a_wake_into_a_full_pool_reads_as_a_story() -> None:
    before = build_view([_set("Suspended", suspend=True, hint="node-1")], [], [], NODES)
    after = build_view(
        [_set("Waking", hint="node-1")],
        [_pod(restore=True, unschedulable="0/2 nodes are available: 2 Insufficient seats.")],
        [_event(k.REASON_WAKE_NO_CAPACITY, "e1")],
        NODES,
    )
    assert transitions(before, after) == [
        "a: spec.suspend=false",
        "a: phase Suspended -> Waking",
        "a: pod - -> unschedulable [restore-from-hibernate] "
        "(0/2 nodes are available: 2 Insufficient seats.)",
        "a: event Warning WakeNoCapacity: 0/2 nodes are available: 2 Insufficient seats.",
    ]
    # Nothing changed: nothing said (the event is not repeated).
    assert transitions(after, after) == []


def test_seats_and_hint_changes_are_reported() -> None:
    before = build_view([_set("Running")], [_pod(node="node-1")], [], NODES)
    after = build_view([_set("Suspended", suspend=True, hint="node-1")], [], [], NODES)
    lines = transitions(before, after)
    assert "a: pod running on node-1 -> -" in lines
    assert "a: hibernated-on-node set to node-1" in lines
    assert "node-1: seats 0/1 taken" in lines


def test_function_log_lines_narrate_only_what_changed_something() -> None:
    from devstack.functionlog import describe

    handled = {
        "message": "trigger handled",
        "target": "ingest",
        "trigger": "SnapshotPushed",
        "source": "distribution",
        "outcome": [
            {
                "cocoonset": "demo/a",
                "result": "done",
                "steps": ["ProbeRegistry", "Stash", "FlagAndDelete", "SetPhase"],
            },
            {"cocoonset": "demo-a/x", "result": "not-found", "steps": []},
        ],
    }
    assert describe(handled, "demo") == [
        "a: ingest function (registry notification) did Stash, FlagAndDelete, SetPhase"
    ]
    idle = {**handled, "outcome": {"cocoonset": "demo/a", "steps": ["Wait"]}}
    assert describe(idle, "demo") == []
    failed = {
        "message": "trigger failed; redelivery expected",
        "target": "wake",
        "trigger": "WakeRequested",
        "source": "canonical",
        "cocoonset": "demo/a",
        "reason": "registry unavailable",
    }
    assert describe(failed, "demo") == [
        "a: wake (wake request) will be retried: registry unavailable"
    ]
    swept = {
        "message": "sweep: done reconcile demo/a",
        "action": "reconcile",
        "result": "done",
        "namespace": "demo",
        "cocoonset": "a",
        "detail": "stuck Waking: Outcome(ref=SetRef(namespace='demo', name='a'), "
        "result='waiting', reason='x', steps=('ReportNoCapacity', 'Wait'))",
    }
    assert describe(swept, "demo") == ["a: sweep function (sweep tick) did ReportNoCapacity"]
