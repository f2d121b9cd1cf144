"""The work bound of one request (shared.adapters.budget): what is kept, what is deferred."""

from __future__ import annotations

from shared.adapters.budget import MAX_SETS_PER_REQUEST, cost, within_budget
from shared.names import SetRef, parse_vm_name
from shared.triggers import SnapshotPushed, Source, SweepTick, WakeRequested


def _push(vm: str) -> SnapshotPushed:
    sets = tuple(c.ref for c in parse_vm_name(vm))
    return SnapshotPushed(f"snapshots/{vm}", "hibernate", None, Source.DISTRIBUTION, vm, sets=sets)


def test_a_legacy_name_costs_one_read_per_split() -> None:
    assert cost(_push("vk-a-b-c-d-e-f-0")) == 5  # a | a-b | ... | a-b-c-d-e as the namespace
    assert cost(WakeRequested(SetRef("team-a", "agent"), Source.CANONICAL)) == 1
    assert cost(SweepTick(False, Source.SCHEDULER)) == 1


def test_the_longest_prefix_that_fits_is_kept_in_order_and_the_rest_deferred() -> None:
    pushes = [_push(f"vk-a{i}-b-c-d-e-f-0") for i in range(1000)]
    kept, deferred = within_budget(pushes)
    assert kept == pushes[: MAX_SETS_PER_REQUEST // 5]
    assert deferred == pushes[MAX_SETS_PER_REQUEST // 5 :]


def test_one_trigger_always_makes_progress_whatever_it_costs() -> None:
    push = _push("vk-a-b-c-d-e-f-0")
    assert within_budget([push, push], limit=2) == ([push], [push])
    assert within_budget([], limit=2) == ([], [])
