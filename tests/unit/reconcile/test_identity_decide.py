"""VM identity beside today's cocoonstack (docs/compatibility.md) as decision tables.

Which name a release gates on, a wake probes, restores and drops; when a legacy name is
shared; the image record and its discard; a released set whose snapshot is gone.
Pure: observed state -> the next step.
"""

from __future__ import annotations

from typing import Any

import pytest

from shared import constants as k
from shared.names import legacy_vm_name
from shared.reconcile.decide import Observed, decide
from shared.reconcile.steps import (
    CheckSharedNames,
    CreateMain,
    DiscardSnapshot,
    DropSnapshot,
    LostSnapshot,
    NotOurs,
    PersistWaking,
    Probe,
    ProbeRegistry,
    SharedVMName,
    Stash,
    Step,
)
from tests.fixtures.cocoon_objects import NS, SET, VM0, make_pod, make_set

LEGACY0 = legacy_vm_name(NS, SET, 0)
HIBERNATED = {"hibernate": True, "state": "hibernated", "generation": 2}
IMAGE = "ghcr.io/acme/agent:1"
LIVE = {"restore": True, "node": "node-a", "vm_id": "vm-123", "running": True}


def release(pods: list[dict[str, Any]], **extra: Any) -> Observed:
    return Observed(cs=make_set(), pods=tuple(make_pod(**p) for p in pods), **extra)


def wake(
    set_kw: dict[str, Any], pods: list[dict[str, Any]] | None = None, **extra: Any
) -> Observed:
    kw = {"suspend": False, "phase": "Suspended", **set_kw}
    return Observed(cs=make_set(**kw), pods=tuple(make_pod(**p) for p in pods or []), **extra)


def stashed(*names: str, image: str | None = None) -> dict[str, str]:
    ann = {k.ANN_DELETE_VM_NAMES: ",".join(names)}
    if image is not None:
        ann[k.ANN_HIBERNATED_IMAGE] = image
    return ann


def test_a_hashed_name_is_the_pods_own_and_is_released_without_asking_anyone() -> None:
    step = decide(release([HIBERNATED], probes={VM0: Probe.PRESENT}))
    assert isinstance(step, Stash)


def test_a_legacy_name_is_checked_for_other_sets_before_the_release() -> None:
    step = decide(release([{**HIBERNATED, "vm": LEGACY0}], probes={LEGACY0: Probe.PRESENT}))
    assert step == CheckSharedNames((LEGACY0,))


def test_a_legacy_name_another_set_records_is_never_released() -> None:
    observed = release(
        [{**HIBERNATED, "vm": LEGACY0}],
        probes={LEGACY0: Probe.PRESENT},
        shared={LEGACY0: ("team/a-agent",)},
    )
    assert decide(observed) == SharedVMName(LEGACY0, ("team/a-agent",))


def test_a_legacy_name_nobody_else_records_is_released() -> None:
    observed = release(
        [{**HIBERNATED, "vm": LEGACY0}], probes={LEGACY0: Probe.PRESENT}, shared={LEGACY0: ()}
    )
    step = decide(observed)
    assert isinstance(step, Stash)
    assert step.delete_vm_names == LEGACY0


def test_the_release_records_the_main_vms_image_beside_the_hint() -> None:
    pod = {**HIBERNATED, "annotations": {k.ANN_IMAGE: IMAGE}}
    step = decide(release([pod], probes={VM0: Probe.PRESENT}))
    assert isinstance(step, Stash)
    assert (step.hint, step.image) == ("node-a", IMAGE)


WAKE_CASES: list[tuple[str, Observed, Step]] = [
    (
        "no-record-probes-todays-name",
        wake({"hint": "node-a"}),
        ProbeRegistry((VM0,)),
    ),
    (
        "a-legacy-release-is-probed-under-its-recorded-name",
        wake({"hint": "node-a", "annotations": stashed(LEGACY0)}),
        ProbeRegistry((LEGACY0,)),
    ),
    (
        "both-generations-recorded-both-probed-todays-first",
        wake({"hint": "node-a", "annotations": stashed(LEGACY0, VM0)}),
        ProbeRegistry((VM0, LEGACY0)),
    ),
    (
        "a-legacy-snapshot-is-checked-for-sharers-before-the-wake",
        wake(
            {"hint": "node-a", "annotations": stashed(LEGACY0)},
            probes={LEGACY0: Probe.PRESENT},
        ),
        CheckSharedNames((LEGACY0,)),
    ),
    (
        "a-shared-legacy-snapshot-is-never-restored",
        wake(
            {"hint": "node-a", "annotations": stashed(LEGACY0)},
            probes={LEGACY0: Probe.PRESENT},
            shared={LEGACY0: ("team/a-agent",)},
        ),
        SharedVMName(LEGACY0, ("team/a-agent",)),
    ),
    (
        "an-image-change-discards-the-snapshot-instead-of-restoring",
        wake(
            {"hint": "node-a", "annotations": stashed(VM0, image="ghcr.io/acme/agent:0")},
            probes={VM0: Probe.PRESENT},
        ),
        DiscardSnapshot(VM0, "ghcr.io/acme/agent:0", IMAGE),
    ),
    (
        "a-discard-cut-short-is-finished-not-called-lost",
        wake(
            {"hint": "node-a", "annotations": stashed(VM0, image="ghcr.io/acme/agent:0")},
            probes={VM0: Probe.ABSENT},
        ),
        DiscardSnapshot(VM0, "ghcr.io/acme/agent:0", IMAGE),
    ),
    (
        "the-same-image-restores",
        wake(
            {"hint": "node-a", "annotations": stashed(VM0, image=IMAGE)},
            probes={VM0: Probe.PRESENT},
        ),
        PersistWaking(stamp_started=True),
    ),
    (
        "a-released-set-whose-snapshot-is-gone-is-loud",
        wake({"hint": "node-a"}, probes={VM0: Probe.ABSENT}),
        LostSnapshot(VM0),
    ),
    (
        "an-image-record-alone-is-a-release-too",
        wake({"annotations": stashed(VM0, image=IMAGE)}, probes={VM0: Probe.ABSENT}),
        LostSnapshot(VM0),
    ),
    (
        "never-released-and-no-snapshot-is-the-normal-flows",
        wake({}, probes={VM0: Probe.ABSENT}),
        NotOurs("no snapshot: suspended before first boot (a fresh boot is the normal flow's)"),
    ),
    (
        "the-restored-vm-drops-its-own-legacy-tag-once-nobody-shares-it",
        wake(
            {"phase": "Waking", "hint": "node-a", "annotations": stashed(LEGACY0)},
            [{**LIVE, "vm": LEGACY0}],
            shared={LEGACY0: ()},
        ),
        DropSnapshot(LEGACY0),
    ),
    (
        "a-pod-annotated-with-another-sets-name-never-steers-the-drop",
        wake({"phase": "Waking", "hint": "node-a"}, [{**LIVE, "vm": "vk-team-b-victim-0"}]),
        DropSnapshot(VM0),
    ),
]


@pytest.mark.parametrize(
    ("case", "observed", "expected"), WAKE_CASES, ids=[c[0] for c in WAKE_CASES]
)
def test_wake_identity(case: str, observed: Observed, expected: Step) -> None:
    assert decide(observed) == expected, case


def test_the_restore_pod_runs_the_vm_the_snapshot_was_recorded_under() -> None:
    observed = wake(
        {"phase": "Waking", "hint": "node-a", "annotations": stashed(LEGACY0)},
        probes={LEGACY0: Probe.PRESENT},
        shared={LEGACY0: ()},
    )
    step = decide(observed)
    assert isinstance(step, CreateMain)
    assert step.body["metadata"]["annotations"][k.ANN_VM_NAME] == LEGACY0
    assert step.body["metadata"]["annotations"][k.ANN_RESTORE] == k.TRUE
