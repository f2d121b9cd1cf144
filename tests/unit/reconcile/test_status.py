"""The status written beside a phase is the operator's buildStatus for it (issue 13, defect 6).

The operator rebuilds the whole status from the pods it controls on every
pass; a phase written alone would leave `Ready=True` on a `Suspended` set and
an `observedGeneration` from before the suspend.
"""

from __future__ import annotations

from datetime import UTC, datetime

from shared.enums import CocoonSetPhase as Phase
from shared.models import CocoonSet
from shared.reconcile.status import build_status
from tests.fixtures.cocoon_objects import VM0, make_pod, set_manifest

NOW = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)
EARLIER = "2026-11-01T00:00:00Z"

READY_TRUE = {
    "type": "Ready",
    "status": "True",
    "reason": "AllAgentsReady",
    "message": "1/1 agents ready, 0/0 toolboxes ready",
    "observedGeneration": 1,
    "lastTransitionTime": EARLIER,
}


def running_set(generation: int = 3) -> CocoonSet:
    body = set_manifest(phase="Running", generation=generation)
    body["status"].update({"observedGeneration": 1, "conditions": [READY_TRUE]})
    return CocoonSet.model_validate(body)


def cond(status: dict[str, object], kind: str) -> dict[str, object]:
    conditions = status["conditions"]
    assert isinstance(conditions, list)
    return next(c for c in conditions if c["type"] == kind)


def test_suspended_after_the_deletes_is_not_ready() -> None:
    status = build_status(running_set(), (), Phase.SUSPENDED, now=NOW)
    assert status["phase"] == "Suspended"
    assert status["observedGeneration"] == 3
    assert (status["readyAgents"], status["desiredAgents"]) == (0, 1)
    assert status["agents"] is None  # omitempty: the list goes
    ready = cond(status, "Ready")
    assert ready["status"] == "False" and ready["reason"] == "AgentsNotReady"
    assert ready["message"] == "0/1 agents ready, 0/0 toolboxes ready"
    assert ready["observedGeneration"] == 3
    assert ready["lastTransitionTime"] != EARLIER  # it flipped
    progressing = cond(status, "Progressing")
    assert progressing == {
        "type": "Progressing",
        "status": "False",
        "reason": "Stable",
        "message": "Suspended",
        "observedGeneration": 3,
        "lastTransitionTime": progressing["lastTransitionTime"],
    }


def test_a_ready_main_keeps_ready_true_and_its_transition_time() -> None:
    main = make_pod(vm_id="vm-1", running=True, ready=True, annotations={})
    status = build_status(running_set(), (main,), Phase.RUNNING, now=NOW)
    ready = cond(status, "Ready")
    assert ready["status"] == "True" and ready["lastTransitionTime"] == EARLIER
    assert status["agents"] == [
        {
            "slot": 0,
            "role": "main",
            "podName": "agent-0",
            "vmName": VM0,
            "vmID": "vm-1",
            "phase": "Running",
        }
    ]
    assert status["readyAgents"] == 1


def test_pending_is_progressing_and_a_terminating_pod_is_not_counted() -> None:
    leaving = make_pod(vm_id="vm-1", running=True, ready=True, terminating=True)
    status = build_status(running_set(), (leaving,), Phase.WAKING, now=NOW)
    assert status["readyAgents"] == 0 and status["agents"] is None
    status = build_status(running_set(), (), Phase.PENDING, now=NOW)
    assert cond(status, "Progressing")["status"] == "True"
