"""The sweep (docs/design.md#sweep) end to end: the embedded Kubernetes API, a real Distribution
registry and the project's own clients. The test plays the user (idle
annotations, activity stamps), vk-cocoon (reporting a VM hibernated, pushing
`<vm>:hibernate`) and the lost events (it simply never delivers them).

Idle time is measured against the sweep's clock, which the tests set ahead of
the API server's (creation timestamps are the server's real now).
"""

from __future__ import annotations

import json
import uuid
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from cloudevents.http import CloudEvent, to_binary

from functions.sweep import run_sweep
from shared import constants as k
from shared.durations import format_rfc3339
from shared.sweep.report import ActionKind, Result, SweepIncomplete, SweepSummary
from tests.data.events import cloudevent
from tests.fixtures.cocoon_objects import NS, SET, VM0, pod_manifest, set_manifest
from tests.fixtures.reconcile_world import World

pytestmark = pytest.mark.e2e

POD = f"{SET}-0"
SETS_PATH = f"/apis/{k.GROUP}/{k.VERSION}/namespaces/{NS}/{k.PLURAL}"


def later(hours: float = 3) -> datetime:
    return datetime.now(UTC) + timedelta(hours=hours)


def sweep(
    world: World, *, now: datetime | None = None, dry_run: bool = False, **settings: Any
) -> SweepSummary:
    return run_sweep(
        settings=replace(world.settings, **settings),
        dry_run=dry_run,
        kube=world.client,
        registry=world.snapshots,
        now=now,
    )


def pod(**kw: Any) -> dict[str, Any]:
    """`pod_manifest`, with container statuses complete enough for the official client."""
    manifest = pod_manifest(**kw)
    for status in manifest["status"].get("containerStatuses", []):
        status.setdefault("image", k.PLACEHOLDER_IMAGE)
        status.setdefault("imageID", "")
        status.setdefault("restartCount", 0)
    return manifest


def running_set(world: World, name: str = SET, **ann: str) -> dict[str, Any]:
    """A Running set with its main pod live (as the operator and vk-cocoon leave it)."""
    cs = world.create_set(set_manifest(name, suspend=None, phase="Running", annotations=dict(ann)))
    world.create_pod(
        pod(
            name=f"{name}-0",
            set_name=name,
            vm=f"vk-{NS}-{name}-0",
            state="ready",
            vm_id="vm-1",
            running=True,
            ready=True,
        ),
        owner=cs,
    )
    return cs


def idle_ann(timeout: str = "30m", **extra: str) -> dict[str, str]:
    return {k.ANN_IDLE_TIMEOUT: timeout, **extra}


def events(world: World, reason: str, name: str = SET) -> list[Any]:
    return [e for e in world.events(NS) if e.reason == reason and e.involved_object.name == name]


def suspended(world: World, name: str = SET) -> bool:
    return bool(world.get_set(NS, name)["spec"].get("suspend"))


def phase(world: World, name: str = SET) -> str | None:
    out: str | None = world.get_set(NS, name).get("status", {}).get("phase")
    return out


def gone_or_terminating(world: World, set_name: str = SET) -> bool:
    return all(p.metadata.deletion_timestamp is not None for p in world.pods(NS, set_name))


def vk_cocoon_hibernates(world: World, name: str = SET) -> None:
    """vk-cocoon saw `hibernate=true`: push the snapshot, then report it (one write)."""
    pod = next(p for p in world.pods(NS, name) if p.metadata.name == f"{name}-0")
    assert pod.metadata.annotations.get(k.ANN_HIBERNATE) == k.TRUE
    world.push_snapshot(f"vk-{NS}-{name}-0")
    generation = world.get_set(NS, name)["metadata"]["generation"]
    world.annotate_pod(
        NS,
        f"{name}-0",
        {k.ANN_LIFECYCLE_STATE: "hibernated", k.ANN_LIFECYCLE_GENERATION: str(generation)},
    )


# --- idle suspend -------------------------------------------------------------------


def test_an_idle_release_set_is_suspended_and_its_seat_freed_by_the_next_sweep(
    world: World,
) -> None:
    running_set(world, **idle_ann())
    busy_now = later()
    running_set(
        world,
        "busy",
        **idle_ann(**{k.ANN_LAST_ACTIVITY: format_rfc3339(busy_now - timedelta(minutes=5))}),
    )
    busy_rv = world.get_set(NS, "busy")["metadata"]["resourceVersion"]

    first = sweep(world, now=busy_now)

    assert [str(a.ref) for a in first.of(ActionKind.SUSPEND)] == [f"{NS}/{SET}"]
    assert suspended(world)
    [ev] = events(world, k.REASON_IDLE_SUSPENDED)
    assert ev.type == "Normal" and "idle for" in ev.message and "30m" in ev.message
    # The release started at once (no event needed): hibernation requested.
    assert phase(world) == "Suspending"
    vk_cocoon_hibernates(world)

    sweep(world, now=busy_now)

    assert phase(world) == "Suspended"
    assert gone_or_terminating(world)
    # The active set was never written to.
    assert world.get_set(NS, "busy")["metadata"]["resourceVersion"] == busy_rv
    assert not suspended(world, "busy")


@pytest.mark.embedded_only("asserts on the emulator's request log")
def test_a_retain_set_is_suspended_but_not_released(world: World) -> None:
    cs = world.create_set(
        set_manifest(suspend=None, policy="retain", phase="Running", annotations=idle_ann())
    )
    world.create_pod(pod(state="ready", vm_id="vm-1", running=True), owner=cs)
    world.reset_log()

    summary = sweep(world, now=later())

    assert suspended(world)
    assert summary.of(ActionKind.RECONCILE) == []
    # Suspend-only: no pod was touched (the operator hibernates a retain set in place).
    assert not [r for r in world.api_requests() if "/pods/" in r["path"]]


def test_exempt_until_and_the_per_run_cap_are_honoured(world: World) -> None:
    now = later(hours=10)
    for name, hours in (("idle-1h", 1), ("idle-5h", 5), ("idle-3h", 3), ("exempt", 9)):
        extra = {k.ANN_LAST_ACTIVITY: format_rfc3339(now - timedelta(hours=hours))}
        if name == "exempt":
            extra[k.ANN_IDLE_EXEMPT_UNTIL] = format_rfc3339(now + timedelta(hours=1))
        world.create_set(
            set_manifest(
                name, suspend=None, policy="retain", phase="Running", annotations=idle_ann(**extra)
            )
        )

    summary = sweep(world, now=now, sweep_max_suspends=2)

    assert [a.ref.name for a in summary.of(ActionKind.SUSPEND)] == ["idle-5h", "idle-3h"]
    assert summary.deferred == 1
    assert [suspended(world, n) for n in ("idle-5h", "idle-3h", "idle-1h", "exempt")] == [
        True,
        True,
        False,
        False,
    ]


class UserStampsActivityFirst:
    """The real client, except that the first set patch races a user's activity stamp.

    Not a mock: every call reaches the embedded API; this only orders two real
    writers deterministically (the race a sweep meets when a user comes back
    between the list and the suspend).
    """

    def __init__(self, world: World, at: datetime) -> None:
        self._world, self._at, self._raced = world, at, False

    def __getattr__(self, name: str) -> Any:
        return getattr(self._world.client, name)

    def patch_set(self, ref: Any, patch: dict[str, Any], **kw: Any) -> Any:
        if not self._raced:
            self._raced = True
            stamp = {k.ANN_LAST_ACTIVITY: format_rfc3339(self._at)}
            self._world.patch_set(ref.namespace, ref.name, {"metadata": {"annotations": stamp}})
        return self._world.client.patch_set(ref, patch, **kw)


def test_a_set_active_again_after_the_list_is_not_suspended(world: World) -> None:
    """The suspend is a compare-and-swap on the listed version: the 409 skips it."""
    world.create_set(set_manifest(suspend=None, phase="Running", annotations=idle_ann()))
    now = later()

    summary = run_sweep(
        settings=world.settings,
        dry_run=False,
        kube=UserStampsActivityFirst(world, now),
        registry=world.snapshots,
        now=now,
    )

    assert [a.result for a in summary.actions if a.kind is ActionKind.SUSPEND] == [Result.CONFLICT]
    assert not suspended(world)
    assert events(world, k.REASON_IDLE_SUSPENDED) == []
    # The next run sees the fresh activity and leaves the set alone.
    assert sweep(world, now=now).actions == []


# --- bad annotations ------------------------------------------------------------------


def test_a_bad_idle_annotation_warns_once_and_never_stops_the_sweep(world: World) -> None:
    world.create_set(
        set_manifest("typo", suspend=None, phase="Running", annotations=idle_ann("soon"))
    )
    world.create_set(set_manifest(suspend=None, phase="Running", annotations=idle_ann()))
    now = later()

    sweep(world, now=now)
    sweep(world, now=now)

    [warning] = events(world, k.REASON_BAD_ANNOTATION, "typo")
    assert warning.type == "Warning" and "idle-timeout=soon" in warning.message
    assert not suspended(world, "typo")
    assert suspended(world)  # the good set was not held up by the bad one

    # A different bad value is a new mistake: one more warning.
    world.patch_set(NS, "typo", {"metadata": {"annotations": {k.ANN_IDLE_TIMEOUT: "ever"}}})
    sweep(world, now=now)
    assert len(events(world, k.REASON_BAD_ANNOTATION, "typo")) == 2


# --- the safety net ------------------------------------------------------------------


def test_a_release_whose_registry_notification_was_lost_completes_on_the_next_sweep(
    world: World,
) -> None:
    cs = world.create_set(set_manifest(phase="Suspending"))
    generation = cs["metadata"]["generation"]
    world.create_pod(pod(state="hibernated", generation=generation, hibernate=True), owner=cs)
    world.push_snapshot(VM0)  # ...and its notification never arrives

    summary = sweep(world)

    assert [a.ref.name for a in summary.of(ActionKind.RECONCILE)] == [SET]
    assert phase(world) == "Suspended"
    assert gone_or_terminating(world)
    assert world.get_set(NS, SET)["metadata"]["annotations"][k.ANN_HIBERNATED_ON_NODE] == "node-a"


def test_a_wake_whose_completion_event_was_lost_completes_on_the_next_sweep(
    world: World,
) -> None:
    cs = world.create_set(
        set_manifest(
            suspend=False,
            phase="Waking",
            hint="node-a",
            annotations={k.ANN_WAKE_STARTED: format_rfc3339(datetime.now(UTC))},
        )
    )
    world.push_snapshot(VM0)
    # The restored VM is live (vk-cocoon reported it); the event saying so was lost.
    world.create_pod(
        pod(restore=True, vm_id="vm-9", running=True, ready=True, state="ready"),
        owner=cs,
    )

    sweep(world)

    after = world.get_set(NS, SET)
    assert after["status"]["phase"] == "Running"
    assert k.ANN_HIBERNATED_ON_NODE not in after["metadata"].get("annotations", {})
    assert not world.snapshot_present(VM0)


def test_a_set_name_too_long_for_a_label_does_not_cost_the_page_its_pod_checks(
    world: World,
) -> None:
    """Set names go to 253 characters, label values to 63: asking for the pods of a
    100-character set in the page's `name in (...)` is a 400 for the whole list."""
    long_name = "agent-" + "x" * 94
    assert len(long_name) == 100
    world.create_set(set_manifest(long_name, phase="Suspended"))
    cs = world.create_set(
        set_manifest(
            suspend=False,
            phase="Waking",
            hint="node-a",
            annotations={k.ANN_WAKE_STARTED: format_rfc3339(datetime.now(UTC))},
        )
    )
    world.push_snapshot(VM0)
    world.create_pod(
        pod(restore=True, vm_id="vm-9", running=True, ready=True, state="ready"),
        owner=cs,
    )

    summary = sweep(world)

    assert summary.errors == 0
    assert summary.complete
    # The Waking set on the same page is still reconciled (its wake completes); the
    # long-named Suspended set cannot have labelled pods, so it needs nothing.
    assert [a.ref.name for a in summary.of(ActionKind.RECONCILE)] == [SET]
    assert phase(world) == "Running"
    assert phase(world, long_name) == "Suspended"


def test_a_suspended_release_set_with_a_pod_left_is_reconciled(world: World) -> None:
    """E.g. an operator that predates hibernatePolicy recreated the pod."""
    cs = world.create_set(set_manifest(phase="Suspended"))
    world.create_pod(pod(state="ready", vm_id="vm-1", running=True), owner=cs)

    summary = sweep(world)

    assert [a.detail.split(":")[0] for a in summary.of(ActionKind.RECONCILE)] == [
        "suspended-with-pods"
    ]
    [left] = world.pods(NS, SET)
    assert left.metadata.annotations.get(k.ANN_HIBERNATE) == k.TRUE


def test_a_labelled_pod_the_set_does_not_control_is_not_a_pod_left(world: World) -> None:
    """Issue 13: only pods the set controls are its pods; a stranger costs no reconcile."""
    world.create_set(set_manifest(phase="Suspended"))
    world.create_pod(pod(state="ready", vm_id="vm-1", running=True, owner_uid=None))

    summary = sweep(world)

    assert summary.of(ActionKind.RECONCILE) == []
    [left] = world.pods(NS, SET)
    assert left.metadata.annotations.get(k.ANN_HIBERNATE) is None  # never flagged


@pytest.mark.embedded_only("asserts on the emulator's request log")
def test_released_sets_cost_one_pod_list_per_page_not_one_per_set(world: World) -> None:
    for i in range(30):
        world.create_set(set_manifest(f"released-{i}", phase="Suspended"))
    world.reset_log()

    summary = sweep(world)

    assert summary.actions == []
    reqs = world.api_requests()
    assert [(r["method"], r["path"]) for r in reqs] == [
        ("GET", f"/apis/{k.GROUP}/{k.VERSION}/{k.PLURAL}"),
        ("GET", f"/api/v1/namespaces/{NS}/pods"),
    ]


def test_wake_timed_out_is_emitted_once_across_two_sweeps_and_the_wake_kept(
    world: World,
) -> None:
    started = datetime.now(UTC) - timedelta(minutes=30)
    cs = world.create_set(
        set_manifest(
            suspend=False,
            phase="Waking",
            hint="node-a",
            annotations={k.ANN_WAKE_STARTED: format_rfc3339(started)},
        )
    )
    world.push_snapshot(VM0)
    world.create_pod(
        pod(restore=True, node=None, phase="Pending", unschedulable="0/3 nodes are available"),
        owner=cs,
    )

    sweep(world)
    sweep(world)

    [warning] = events(world, k.REASON_WAKE_TIMED_OUT)
    assert warning.type == "Warning"
    assert "0/3 nodes are available" in warning.message
    assert phase(world) == "Waking"
    assert [p.metadata.name for p in world.pods(NS, SET)] == [POD]
    assert world.snapshot_present(VM0)


# --- dry run, robustness ----------------------------------------------------------------


@pytest.mark.embedded_only("asserts on the emulator's request log")
def test_a_dry_run_reports_every_action_and_only_reads(world: World) -> None:
    running_set(world, "idle", **idle_ann())
    world.create_set(set_manifest("stuck", phase="Suspending"))
    world.create_set(
        set_manifest(
            "waking",
            suspend=False,
            phase="Waking",
            annotations={k.ANN_WAKE_STARTED: format_rfc3339(datetime.now(UTC))},
        )
    )
    world.create_set(
        set_manifest("typo", suspend=None, phase="Running", annotations=idle_ann("soon"))
    )
    world.reset_log()

    summary = sweep(world, now=later(), dry_run=True)

    assert {(a.kind, a.ref.name) for a in summary.actions} == {
        (ActionKind.SUSPEND, "idle"),
        (ActionKind.RECONCILE, "idle"),
        (ActionKind.RECONCILE, "stuck"),
        (ActionKind.RECONCILE, "waking"),
        (ActionKind.WAKE_TIMED_OUT, "waking"),
        (ActionKind.CONFIG_WARNING, "typo"),
    }
    assert all(a.result is Result.WOULD for a in summary.actions)
    assert {r["method"] for r in world.api_requests()} == {"GET"}
    assert phase(world, "stuck") == "Suspending"
    assert not suspended(world, "idle")


@pytest.mark.embedded_only("injects faults through the emulator's test hooks")
def test_a_transient_error_on_one_set_fails_the_run_after_the_others_are_done(
    world: World,
) -> None:
    for name in ("a-broken", "b-fine"):
        world.create_set(
            set_manifest(
                name, suspend=None, policy="retain", phase="Running", annotations=idle_ann()
            )
        )
    world.kube.add_fault(method="PATCH", path=f"{SETS_PATH}/a-broken$", status=503, times=None)

    with pytest.raises(SweepIncomplete) as err:
        sweep(world, now=later())

    assert err.value.summary.transient_errors == 1
    assert suspended(world, "b-fine")
    assert not suspended(world, "a-broken")


# --- through the deployed target -----------------------------------------------------


def sweep_event(dry_run: bool) -> CloudEvent:
    return CloudEvent(
        {"type": k.CE_SWEEP_REQUESTED, "source": "//tests/scheduler", "id": uuid.uuid4().hex},
        {"dryRun": dry_run},
    )


@pytest.mark.embedded_only("asserts on the emulator's request log")
def test_the_sweep_target_runs_a_sweep_from_a_cloudevent(world: World, function_app: Any) -> None:
    world.create_set(set_manifest(phase="Suspending"))
    client = function_app("sweep")
    world.reset_log()

    headers, body = to_binary(sweep_event(dry_run=True))
    assert client.post("/", headers=headers, data=body).status_code == 200
    assert {r["method"] for r in world.api_requests()} == {"GET"}
    assert phase(world) == "Suspending"

    headers, body = to_binary(sweep_event(dry_run=False))
    assert client.post("/", headers=headers, data=body).status_code == 200
    assert phase(world) == "Suspended"  # no pods: the release settles at once


@pytest.mark.parametrize(
    ("fixture", "writes"),
    [
        pytest.param("scheduler_pubsub", True, id="cloud-scheduler-pubsub-tick"),
        pytest.param("knative_ping", False, id="knative-ping-dry-run"),
    ],
)
def test_scheduler_ticks_run_the_sweep(
    world: World, function_app: Any, fixture: str, writes: bool
) -> None:
    world.create_set(set_manifest(phase="Suspending"))
    client = function_app("sweep")

    headers, body = to_binary(cloudevent(fixture))
    assert client.post("/", headers=headers, data=body).status_code == 200

    assert phase(world) == ("Suspended" if writes else "Suspending")


@pytest.mark.embedded_only("injects faults through the emulator's test hooks")
def test_the_sweep_target_answers_500_when_work_was_left_undone(
    world: World, function_app: Any
) -> None:
    world.create_set(set_manifest(phase="Suspending"))
    world.kube.add_fault(method="GET", path="/pods$", status=503, times=None)
    client = function_app("sweep")

    headers, body = to_binary(sweep_event(dry_run=False))
    assert client.post("/", headers=headers, data=body).status_code == 500


# --- the command line ------------------------------------------------------------------


@pytest.mark.embedded_only("asserts on the emulator's request log")
def test_the_cli_dry_run_prints_a_table_of_would_be_actions_and_writes_nothing(
    world: World,
) -> None:
    from click.testing import CliRunner

    from cocoon_hibernation.main import main

    world.create_set(set_manifest("stuck", phase="Suspending"))
    world.reset_log()

    result = CliRunner().invoke(main, ["sweep", "--dry-run"], env=world.env)

    assert result.exit_code == 0, result.output
    assert "dry run" in result.stdout
    row = next(line for line in result.stdout.splitlines() if f"{NS}/stuck" in line)
    assert "reconcile" in row and "would" in row
    assert {r["method"] for r in world.api_requests()} == {"GET"}


@pytest.mark.embedded_only("injects faults through the emulator's test hooks")
def test_the_cli_exits_1_with_the_table_when_work_was_left_undone(world: World) -> None:
    from click.testing import CliRunner

    from cocoon_hibernation.main import main

    world.create_set(set_manifest("stuck", phase="Suspending"))
    world.create_set(set_manifest("fine", phase="Suspending"))
    world.kube.add_fault(method="GET", path=f"{SETS_PATH}/stuck$", status=503, times=None)

    result = CliRunner().invoke(main, ["sweep"], env=world.env)

    assert result.exit_code == 1
    assert f"{NS}/stuck" in result.stdout and "error" in result.stdout
    assert phase(world, "fine") == "Suspended"


def test_the_cli_json_and_pipe_output_carry_the_outcome_word_not_a_repr(world: World) -> None:
    # `sweep -o json` said `done` with `"detail": "waking: Outcome(ref=SetRef(..." for a
    # wake that was still waiting; into a pipe it drew rich box tables.
    from click.testing import CliRunner

    from cocoon_hibernation.main import main

    cs = world.create_set(set_manifest(phase="Suspending"))
    world.create_pod(pod(state="hibernating", generation=cs["metadata"]["generation"]), owner=cs)

    result = CliRunner().invoke(main, ["sweep", "-o", "json"], env=world.env)

    assert result.exit_code == 0, result.output
    (action,) = [a for a in json.loads(result.stdout)["actions"] if a["action"] == "reconcile"]
    assert action["set"] == f"{NS}/{SET}"
    assert action["result"] == "waiting"
    assert action["detail"] == (
        f"release-pending: pod {SET}-0 is hibernating, not hibernated (RequestHibernation, Wait)"
    )
    assert "Outcome(" not in action["detail"] and "<" not in action["detail"]

    piped = CliRunner().invoke(main, ["sweep"], env=world.env)
    assert piped.exit_code == 0, piped.output
    lines = piped.stdout.splitlines()
    assert lines[0].split() == ["ACTION", "COCOONSET", "RESULT", "DETAIL"]
    assert lines[1].split()[:3] == ["reconcile", f"{NS}/{SET}", "waiting"]
    assert not any(ch in piped.stdout for ch in "┏━│└")
