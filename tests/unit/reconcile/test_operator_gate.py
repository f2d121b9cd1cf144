"""The rule beside cocoon-operator (docs/operator.md) as a table. Pure, no I/O.

With `COCOON_OPERATOR=present` the functions never delete a pod, create a
restore pod, request hibernation, stamp a generation or write a phase for a set
generation the operator has not observed (`status.observedGeneration`, which
only the operator writes then). Without an operator they act as before.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from shared import constants as k
from shared.config import OperatorMode, Settings
from shared.enums import CocoonSetPhase as Phase
from shared.errors import ConfigError
from shared.models import CocoonSet
from shared.reconcile.decide import Observed, decide
from shared.reconcile.status import build_status
from shared.reconcile.steps import (
    CreateMain,
    DiscardSnapshot,
    FlagAndDelete,
    PersistWaking,
    Probe,
    ProbeRegistry,
    ReportWoken,
    RequestHibernation,
    StampGeneration,
    Step,
    Wait,
)
from tests.fixtures.cocoon_objects import VM0, make_pod, make_set

STASHED = {
    k.ANN_DELETE_VM_NAMES: VM0,
    k.ANN_RELEASE_ROUND: "2",
    k.ANN_RELEASE_ROUND_PODS: "agent-0",
}
HIBERNATED = {"hibernate": True, "state": "hibernated", "generation": 2}


def seen(cs: CocoonSet, observed: int | None) -> CocoonSet:
    status = cs.status.model_copy(update={"observed_generation": observed})
    return cs.model_copy(update={"status": status})


def obs(
    set_kw: dict[str, Any],
    pods: list[dict[str, Any]],
    *,
    observed: int | None,
    present: bool = True,
    **extra: Any,
) -> Observed:
    return Observed(
        cs=seen(make_set(**set_kw), observed),
        pods=tuple(make_pod(**p) for p in pods),
        operator_present=present,
        **extra,
    )


BEHIND_1 = "waiting for cocoon-operator to observe generation 2 (status.observedGeneration=1)"
BEHIND_0 = "waiting for cocoon-operator to observe generation 2 (status.observedGeneration=0)"
RELEASE_READY = {"annotations": STASHED, "hint": "node-a"}
WAKE = {"suspend": False, "phase": "Suspended", "hint": "node-a"}

CASES: list[tuple[str, Observed, type[Step] | Step]] = [
    # --- behind: nothing at all for this generation
    (
        "suspend-not-seen-requests-no-hibernation",
        obs({}, [{}], observed=1),
        Wait(BEHIND_1),
    ),
    (
        "verified-snapshot-not-seen-deletes-nothing",
        obs(RELEASE_READY, [HIBERNATED], observed=1, probes={VM0: Probe.PRESENT}),
        Wait(BEHIND_1),
    ),
    (
        "unsuspend-not-seen-creates-no-restore-pod",
        obs(WAKE, [], observed=1, probes={VM0: Probe.PRESENT}),
        Wait(BEHIND_1),
    ),
    (
        "waking-not-seen-writes-no-phase",
        obs({**WAKE, "phase": "Waking"}, [], observed=1, probes={VM0: Probe.PRESENT}),
        Wait(BEHIND_1),
    ),
    (
        "lagging-stamp-not-seen-is-not-stamped",
        obs(
            {"suspend": False, "phase": "Waking", "hint": "node-a"},
            [{"restore": True, "node": "node-a", "stamp": 1}],
            observed=1,
        ),
        Wait(BEHIND_1),
    ),
    (
        "no-observed-generation-at-all-is-behind",
        obs({}, [{}], observed=None),
        Wait(BEHIND_0),
    ),
    # --- behind, but the image changed since the release: today's operator tries the
    # discard before any status write, so a registry refusing its DELETE by tag would
    # keep it behind for ever; the probe and the discard go ahead, nothing else does
    (
        "image-changed-not-seen-probes",
        obs({**WAKE, "annotations": {k.ANN_HIBERNATED_IMAGE: "old:1"}}, [], observed=1),
        ProbeRegistry,
    ),
    (
        "image-changed-not-seen-discards",
        obs(
            {**WAKE, "annotations": {k.ANN_HIBERNATED_IMAGE: "old:1"}},
            [],
            observed=1,
            probes={VM0: Probe.PRESENT},
        ),
        DiscardSnapshot,
    ),
    (
        "image-changed-not-seen-a-discard-cut-short-is-finished",
        obs(
            {**WAKE, "annotations": {k.ANN_HIBERNATED_IMAGE: "old:1"}},
            [],
            observed=1,
            probes={VM0: Probe.ABSENT},
            dropped=frozenset({VM0}),
        ),
        DiscardSnapshot,
    ),
    (
        "image-unchanged-not-seen-waits",
        obs(
            {**WAKE, "annotations": {k.ANN_HIBERNATED_IMAGE: "ghcr.io/acme/agent:1"}},
            [],
            observed=1,
            probes={VM0: Probe.PRESENT},
        ),
        Wait(BEHIND_1),
    ),
    (
        "image-changed-still-suspended-not-seen-waits",
        obs(
            {"hint": "node-a", "annotations": {k.ANN_HIBERNATED_IMAGE: "old:1"}},
            [],
            observed=1,
            probes={VM0: Probe.PRESENT},
        ),
        Wait(BEHIND_1),
    ),
    # --- seen: exactly what the functions do alone
    ("suspend-seen-requests-hibernation", obs({}, [{}], observed=2), RequestHibernation),
    (
        "verified-snapshot-seen-deletes",
        obs(RELEASE_READY, [HIBERNATED], observed=2, probes={VM0: Probe.PRESENT}),
        FlagAndDelete,
    ),
    (
        "unsuspend-seen-persists-waking",
        obs(WAKE, [], observed=2, probes={VM0: Probe.PRESENT}),
        PersistWaking,
    ),
    (
        "waking-seen-creates-the-restore-pod",
        obs({**WAKE, "phase": "Waking"}, [], observed=2, probes={VM0: Probe.PRESENT}),
        CreateMain,
    ),
    (
        "an-operator-ahead-is-fine",
        obs({}, [{}], observed=3),
        RequestHibernation,
    ),
    # --- alone (COCOON_OPERATOR=absent): the field is not consulted
    ("alone-acts-on-any-generation", obs({}, [{}], observed=1, present=False), RequestHibernation),
    (
        "alone-deletes-without-an-observation",
        obs(RELEASE_READY, [HIBERNATED], observed=None, present=False, probes={VM0: Probe.PRESENT}),
        FlagAndDelete,
    ),
    (
        "alone-stamps",
        obs(
            {"suspend": False, "phase": "Waking", "hint": "node-a"},
            [{"restore": True, "node": "node-a", "stamp": 1}],
            observed=1,
            present=False,
        ),
        StampGeneration,
    ),
    # --- a report owed from an earlier occurrence is not an act on this generation
    (
        "owed-wake-report-goes-out-while-behind",
        obs(
            {"suspend": True, "annotations": {k.ANN_WAKE_REPORT_OWED: "pool:pod-uid-9:node-a"}},
            [{}],
            observed=1,
        ),
        ReportWoken(placement="pool", pod_uid="pod-uid-9", hint="node-a"),
    ),
    (
        "failed-main-phase-is-the-operators-while-behind",
        obs({}, [{"phase": "Failed"}], observed=1),
        Wait(BEHIND_1),
    ),
    (
        # Suspend first (today's operator): the failed pod is asked to hibernate too.
        "failed-main-seen",
        obs({"hint": "node-a"}, [{"phase": "Failed"}], observed=2),
        RequestHibernation,
    ),
]


@pytest.mark.parametrize(("case", "observed", "expected"), CASES, ids=[c[0] for c in CASES])
def test_operator_gate(case: str, observed: Observed, expected: type[Step] | Step) -> None:
    step = decide(observed)
    if isinstance(expected, type):
        assert isinstance(step, expected), f"{case}: {step!r}"
    else:
        assert step == expected, case


def test_beside_an_operator_the_status_patch_leaves_observed_generation_alone() -> None:
    cs = seen(make_set(), 1)
    now = datetime(2026, 1, 1, tzinfo=UTC)
    beside = build_status(cs, (), Phase.SUSPENDED, now=now, observed_generation=False)
    alone = build_status(cs, (), Phase.SUSPENDED, now=now)
    assert "observedGeneration" not in beside
    assert alone["observedGeneration"] == 2
    assert beside["phase"] == alone["phase"] == "Suspended"


@pytest.mark.parametrize(
    ("raw", "mode"),
    [
        (None, OperatorMode.PRESENT),
        ("present", OperatorMode.PRESENT),
        ("ABSENT", OperatorMode.ABSENT),
    ],
)
def test_cocoon_operator_setting(raw: str | None, mode: OperatorMode) -> None:
    env = {} if raw is None else {"COCOON_OPERATOR": raw}
    settings = Settings.from_env(env)
    assert settings.operator is mode
    assert settings.operator_present is (mode is OperatorMode.PRESENT)


def test_a_bad_cocoon_operator_value_names_the_variable() -> None:
    with pytest.raises(ConfigError, match="COCOON_OPERATOR='maybe' is not one of: present, absent"):
        Settings.from_env({"COCOON_OPERATOR": "maybe"})
