"""Writes sent at once (docs/reads.md#writes-sent-at-once): the release's stash and
keep-snapshot flag, its `Suspended` and the round's SeatReleased, the wake's start stamp
and the main pod's create. Each pair really is in flight together, and every partial
outcome of a pair still ends in one delete, one Event, one count.

The embedded Kubernetes API (its request log is the order the server answered in, and its
fault hooks delay or refuse one request) and a real Distribution registry.
"""

from __future__ import annotations

from typing import Any

import pytest

from shared import constants as k
from shared.reconcile import reconcile_set
from shared.reconcile.steps import SetPhase, Stash, Step
from tests.e2e.test_release_e2e import (
    POD_PATH,
    SET_PATH,
    hibernated_main,
    metric_lines,
    post,
    pushed_event,
    successful,
    suspended_set,
)
from tests.e2e.test_wake_e2e import PODS_PATH, released_set
from tests.fixtures.cocoon_objects import NS, SET, VM0
from tests.fixtures.reconcile_world import World, ref_of

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.embedded_only("delays and refuses single requests through the emulator's hooks"),
]

STATUS_PATH = f"{SET_PATH}/status"
EVENTS_PATH = f"/api/v1/namespaces/{NS}/events"
DELAY_MS = 300


def answered(world: World) -> list[tuple[str, str, int]]:
    """(method, path, status) in the order the server answered."""
    return [(r["method"], r["path"], r["status"]) for r in world.api_requests()]


def released(world: World) -> list[Any]:
    return [e for e in world.events(NS) if e.reason == k.REASON_SEAT_RELEASED]


def ready_to_release(world: World) -> dict[str, Any]:
    cs = suspended_set(world)
    hibernated_main(world, cs)
    world.push_snapshot(VM0)
    world.reset_log()
    return cs


def release_with_one_late_answer(
    world: World, function_app: Any, path: str
) -> list[tuple[str, str, int]]:
    """A release through the `release` target whose first PATCH of `path` answers late;
    the server's answers in order."""
    ready_to_release(world)
    world.kube.add_fault(method="PATCH", path=f"{path}$", latency_ms=DELAY_MS, times=1)
    assert post(function_app("release"), pushed_event(world)).status_code == 200
    return answered(world)


def test_the_flag_is_in_flight_beside_the_stash_and_both_land_before_the_delete(
    world: World, function_app: Any
) -> None:
    # The stash answers late: sent one after the other, the flag would follow it.
    log = release_with_one_late_answer(world, function_app, SET_PATH)
    flag = log.index(("PATCH", POD_PATH, 200))
    stash = log.index(("PATCH", SET_PATH, 200))
    delete = log.index(("DELETE", POD_PATH, 200))
    assert flag < stash < delete, log


def test_the_round_event_is_in_flight_beside_suspended(world: World, function_app: Any) -> None:
    log = release_with_one_late_answer(world, function_app, STATUS_PATH)
    event = log.index(("POST", EVENTS_PATH, 201))
    phase = log.index(("PATCH", STATUS_PATH, 200))
    reported = max(i for i, r in enumerate(log) if r == ("PATCH", SET_PATH, 200))
    # The durable "reported" mark waits for both.
    assert event < phase < reported, log
    ann = world.get_set(NS, SET)["metadata"]["annotations"]
    assert ann[k.ANN_RELEASE_REPORTED] == ann[k.ANN_RELEASE_ROUND]


def test_a_flag_refused_beside_the_stash_is_not_sent_again(
    world: World, function_app: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    ready_to_release(world)
    world.kube.add_fault(method="PATCH", path=f"{POD_PATH}$", status=500, times=None)

    assert post(function_app("release"), pushed_event(world)).status_code == 200

    # One attempt (best-effort), then the delete: the seat is freed all the same.
    assert [r[2] for r in answered(world) if r[:2] == ("PATCH", POD_PATH)] == [500]
    assert len(successful(world, "DELETE", POD_PATH)) == 1
    assert "keep-snapshot flag failed; deleting anyway" in capsys.readouterr().out


def test_a_flag_that_lands_while_the_stash_is_refused_releases_once(world: World) -> None:
    cs = ready_to_release(world)
    raced: list[bool] = []

    def other_writer(step: Step) -> None:
        # Between the read and the stash, someone else writes the set: the stash's
        # compare-and-swap answers 409, the flag beside it lands.
        if isinstance(step, Stash) and not raced:
            raced.append(True)
            world.patch_set(NS, SET, {"metadata": {"labels": {"team": "a"}}})
            world.reset_log()  # the log holds the run's own requests from here on

    out = reconcile_set(ref_of(cs), kube=world.client, registry=world.snapshots, hook=other_writer)

    assert out.result == "done" and out.deleted_pods == 1, out
    log = answered(world)
    assert [s for m, p, s in log if (m, p) == ("PATCH", SET_PATH)][:1] == [409]
    # Flagged once: the re-decision saw the flag and did not send it again.
    assert [s for m, p, s in log if (m, p) == ("PATCH", POD_PATH)] == [200]
    assert len(successful(world, "DELETE", POD_PATH)) == 1
    assert len(released(world)) == 1


def test_an_event_created_while_suspended_is_refused_counts_once(
    world: World, capsys: pytest.CaptureFixture[str]
) -> None:
    cs = ready_to_release(world)
    raced: list[bool] = []

    def other_writer(step: Step) -> None:
        # Suspended's compare-and-swap answers 409; the round's Event beside it is
        # created, and that create is what decides the count.
        if isinstance(step, SetPhase) and step.report is not None and not raced:
            raced.append(True)
            world.patch_set(NS, SET, {"metadata": {"labels": {"team": "a"}}})

    out = reconcile_set(ref_of(cs), kube=world.client, registry=world.snapshots, hook=other_writer)

    assert out.result == "done", out
    assert raced, "the phase was settled with the report beside it"
    log = answered(world)
    assert [s for m, p, s in log if (m, p) == ("PATCH", STATUS_PATH)] == [409, 200]
    # The second try found the Event: AlreadyExists, no second count.
    assert [s for m, p, s in log if (m, p) == ("POST", EVENTS_PATH)] == [201, 409]
    assert len(released(world)) == 1
    counted = metric_lines(capsys.readouterr().out, k.METRIC_PODS_DELETED)
    assert [c["value"] for c in counted] == [1]
    assert world.get_set(NS, SET)["status"]["phase"] == "Suspended"


def _unsuspended_released(world: World) -> dict[str, Any]:
    """A released set the user unsuspended with kubectl: the reconcile starts the wake."""
    cs = released_set(world, suspend=False)
    world.reset_log()
    return cs


def test_the_wake_start_stamp_is_in_flight_beside_the_create(world: World) -> None:
    cs = _unsuspended_released(world)
    world.kube.add_fault(method="PATCH", path=f"{SET_PATH}$", latency_ms=DELAY_MS, times=1)

    out = reconcile_set(ref_of(cs), kube=world.client, registry=world.snapshots)

    assert out.created_main, out
    log = answered(world)
    waking = log.index(("PATCH", STATUS_PATH, 200))
    create = log.index(("POST", PODS_PATH, 201))
    stamp = log.index(("PATCH", SET_PATH, 200))
    assert waking < create < stamp, log
    # The run waited for it: the stamp is on the set when the run answers.
    assert k.ANN_WAKE_STARTED in world.get_set(NS, SET)["metadata"]["annotations"]


def test_a_failed_start_stamp_neither_blocks_nor_fails_the_wake(
    world: World, capsys: pytest.CaptureFixture[str]
) -> None:
    cs = _unsuspended_released(world)
    world.kube.add_fault(method="PATCH", path=f"{SET_PATH}$", status=500, times=None)

    out = reconcile_set(ref_of(cs), kube=world.client, registry=world.snapshots)

    # The sweep's deadline clock falls back to the pod's creation.
    assert out.created_main and out.result == "waiting", out
    assert world.get_set(NS, SET)["status"]["phase"] == "Waking"
    assert k.ANN_WAKE_STARTED not in world.get_set(NS, SET)["metadata"]["annotations"]
    assert "could not stamp the wake start" in capsys.readouterr().out
