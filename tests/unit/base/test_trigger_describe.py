"""`shared.triggers.describe`: the one description of a trigger both the ingest
and the runtime log lines use (so a set or snapshot is greppable the same way)."""

from __future__ import annotations

import pytest

from shared.names import SetRef
from shared.triggers import (
    SetChanged,
    SnapshotPushed,
    Source,
    SweepTick,
    Trigger,
    WakeRequested,
    describe,
)

REF = SetRef("team-a", "agent")

CASES: list[tuple[str, Trigger, dict[str, object]]] = [
    (
        "snapshot-pushed-names-the-vm-and-tag",
        SnapshotPushed("r/vk-team-a-agent-0", "hibernate", None, Source.DISTRIBUTION, "vk-a-0"),
        {"repository": "r/vk-team-a-agent-0", "tag": "hibernate", "vm": "vk-a-0"},
    ),
    (
        "set-changed-names-the-set-and-why",
        SetChanged(REF, "pod deleted", Source.K8S_AUDIT),
        {"cocoonset": "team-a/agent", "why": "pod deleted"},
    ),
    (
        "wake-request-names-the-set",
        WakeRequested(REF, Source.CANONICAL),
        {"cocoonset": "team-a/agent"},
    ),
    ("sweep-tick-says-dry-run", SweepTick(True, Source.SCHEDULER), {"dry_run": True}),
]


@pytest.mark.parametrize(("trigger", "expected"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_describe(trigger: Trigger, expected: dict[str, object]) -> None:
    assert describe(trigger) == expected
