"""CPU-based activity and sleep windows through the real sweep: the embedded Kubernetes API
(serving PodMetrics), the cluster simulator (its vk-cocoon feeds PodMetrics) and a real
Distribution registry.

The sweep's clock runs hours ahead of the API server's, so sets created now
have been idle for hours as far as the sweep is concerned.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from devstack.simulator import NodeSpec, Simulator
from functions.sweep import run_sweep
from shared import constants as k
from shared.durations import format_rfc3339
from shared.names import vm_name
from shared.seats.schedule import Tick, encode_applied
from shared.sweep.report import ActionKind, SweepSummary
from tests.fixtures.cocoon_objects import NS, set_manifest
from tests.fixtures.reconcile_world import World

pytestmark = pytest.mark.e2e

CPU = {k.ANN_IDLE_CPU_BELOW: "50m", k.ANN_IDLE_TIMEOUT: "30m"}


@pytest.fixture
def sim(world: World) -> Iterator[Simulator]:
    s = Simulator(
        api=world.http(),
        registry_url=world.registry.url,
        registry_prefix=world.prefix,
        nodes=[NodeSpec("node-1", seats=4)],
        metrics_interval=0.001,
    )
    s.register_nodes()
    yield s
    s.api.close()


def until(sim: Simulator, cond: Callable[[], bool], seconds: float = 15.0) -> None:
    """Step the simulator until `cond`, bounded by time, not by steps: its vk-cocoon
    reports `hibernated` on its own thread, a push-to-report gap after the push
    (devstack/vkorder.py), which a fixed number of fast steps can outrun."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        sim.step()
        if cond():
            return
        time.sleep(0.01)
    raise AssertionError(f"the simulator did not converge in {seconds:.0f}s")


def phase(world: World, name: str) -> str | None:
    out: str | None = world.get_set(NS, name).get("status", {}).get("phase")
    return out


def running(world: World, sim: Simulator, *names: str, **ann: str) -> None:
    for name in names:
        world.create_set(set_manifest(name, suspend=None, phase=None, annotations=dict(ann)))
    until(sim, lambda: all(phase(world, n) == "Running" for n in names))
    sim.step()  # one more tick: the booted VMs' PodMetrics


def sweep(world: World, now: datetime, **kw: Any) -> SweepSummary:
    return run_sweep(
        settings=replace(world.settings, **kw),
        dry_run=False,
        kube=world.client,
        registry=world.snapshots,
        now=now,
        publisher=None,
    )


def names(summary: SweepSummary, kind: ActionKind) -> list[str]:
    return sorted(a.ref.name for a in summary.of(kind))


@pytest.mark.embedded_only(
    "PodMetrics come from metrics-server, which does not run beside the real server here"
)
def test_a_busy_vm_is_not_suspended_and_an_idle_one_is(world: World, sim: Simulator) -> None:
    running(world, sim, "busy", "quiet", **CPU)
    sim.cpu_load[vm_name(NS, "busy", 0)] = "300m"
    sim.step()
    now = datetime.now(UTC) + timedelta(hours=3)

    first = sweep(world, now)

    assert names(first, ActionKind.SUSPEND) == ["quiet"]
    assert names(first, ActionKind.ACTIVITY) == ["busy"]
    busy = world.get_set(NS, "busy")
    assert busy["metadata"]["annotations"][k.ANN_LAST_ACTIVITY] == format_rfc3339(now)
    assert not busy["spec"].get("suspend")

    # A minute later the VM is still busy: the stamp is fresh (< 3m), so no write.
    rv = world.get_set(NS, "busy")["metadata"]["resourceVersion"]
    second = sweep(world, now + timedelta(minutes=1))
    assert names(second, ActionKind.ACTIVITY) == [] and names(second, ActionKind.SUSPEND) == []
    assert world.get_set(NS, "busy")["metadata"]["resourceVersion"] == rv

    # The VM goes quiet; 30 minutes after its last activity it is suspended.
    sim.cpu_load.clear()
    sim.step()
    third = sweep(world, now + timedelta(minutes=31))
    assert names(third, ActionKind.SUSPEND) == ["busy"]


@pytest.mark.embedded_only("injects the missing metrics API through the emulator's faults")
def test_without_pod_metrics_nothing_is_suspended_and_one_warning_per_run(
    world: World, sim: Simulator, capsys: pytest.CaptureFixture[str]
) -> None:
    running(world, sim, "a", "b", **CPU)
    running(world, sim, "plain", **{k.ANN_IDLE_TIMEOUT: "30m"})
    # No metrics-server: the aggregated API is not served.
    world.kube.add_fault(method="GET", path=".*/apis/metrics.k8s.io/.*", status=404, times=None)
    capsys.readouterr()

    summary = sweep(world, datetime.now(UTC) + timedelta(hours=3))

    # Never suspend on missing data; a set that did not opt in is unaffected.
    assert names(summary, ActionKind.SUSPEND) == ["plain"]
    warnings = [line for line in capsys.readouterr().out.splitlines() if "PodMetrics" in line]
    assert len(warnings) == 1


def test_a_pod_without_metrics_yet_is_not_suspended(world: World, sim: Simulator) -> None:
    sim.metrics_interval = 0  # vk-cocoon has not reported yet
    running(world, sim, "fresh", **CPU)
    summary = sweep(world, datetime.now(UTC) + timedelta(hours=3))
    assert names(summary, ActionKind.SUSPEND) == []


# --- sleep windows -------------------------------------------------------------------


def test_a_sleep_window_suspends_and_releases_then_wakes_and_restores(
    world: World, sim: Simulator
) -> None:
    # Every day 20:00-08:00 UTC; the sweep already saw the schedule at this morning's wake.
    now = datetime(2026, 11, 30, 7, 55, tzinfo=UTC)
    applied = encode_applied(Tick.WAKE, datetime(2026, 11, 29, 8, 0, tzinfo=UTC))
    running(
        world,
        sim,
        "nightly",
        **{
            k.ANN_SLEEP_SCHEDULE: "0 20 * * * UTC",
            k.ANN_WAKE_SCHEDULE: "0 8 * * * UTC",
            k.ANN_SCHEDULE_APPLIED: applied,
        },
    )
    # The sweep missed 20:00 (it was down); its 20:07 run catches the tick up.
    evening = sweep(world, datetime(2026, 11, 29, 20, 7, tzinfo=UTC))
    assert names(evening, ActionKind.SCHEDULE_SUSPEND) == ["nightly"]
    # Overlapping runs at 20:08 do nothing more: the tick is recorded on the set.
    assert (
        names(sweep(world, datetime(2026, 11, 29, 20, 8, tzinfo=UTC)), ActionKind.SCHEDULE_SUSPEND)
        == []
    )
    until(
        sim,
        lambda: any(
            p.metadata.annotations.get(k.ANN_LIFECYCLE_STATE) == "hibernated"
            for p in world.pods(NS, "nightly")
        ),
    )
    sweep(world, datetime(2026, 11, 29, 21, 0, tzinfo=UTC))  # the safety net finishes the release
    assert phase(world, "nightly") == "Suspended"
    [ev] = [e for e in world.events(NS) if e.reason == k.REASON_SCHEDULE_SUSPENDED]
    assert "sleep schedule" in ev.message

    until(sim, lambda: not world.pods(NS, "nightly"))  # vk-cocoon finalizes the delete
    morning = sweep(world, now + timedelta(minutes=6))
    assert names(morning, ActionKind.SCHEDULE_WAKE) == ["nightly"]

    def woken() -> bool:
        sweep(world, now + timedelta(minutes=7))
        return phase(world, "nightly") == "Running"

    until(sim, woken)


def test_a_bad_schedule_gets_one_invalid_annotation_warning(world: World, sim: Simulator) -> None:
    running(world, sim, "typo", **{k.ANN_SLEEP_SCHEDULE: "0 25 * * * Europe/Paris"})
    now = datetime.now(UTC)
    first = sweep(world, now)
    second = sweep(world, now + timedelta(minutes=5))
    assert names(first, ActionKind.CONFIG_WARNING) == ["typo"]
    assert names(second, ActionKind.CONFIG_WARNING) == []
    [ev] = [e for e in world.events(NS) if e.reason == k.REASON_BAD_ANNOTATION]
    assert ev.type == "Warning" and "sleep-schedule=0 25 * * * Europe/Paris" in ev.message
    assert not world.get_set(NS, "typo")["spec"].get("suspend")
    # Fixed: the record is cleared, and a new typo would be warned about again.
    world.patch_set(
        NS, "typo", {"metadata": {"annotations": {k.ANN_SLEEP_SCHEDULE: "0 20 * * * UTC"}}}
    )
    third = sweep(world, now + timedelta(minutes=10))
    assert names(third, ActionKind.CONFIG_CLEARED) == ["typo"]


def test_a_bad_cpu_threshold_blocks_idle_suspend_and_is_warned_once(
    world: World, sim: Simulator
) -> None:
    running(world, sim, "typo", **{**CPU, k.ANN_IDLE_CPU_BELOW: "50 m"})
    now = datetime.now(UTC) + timedelta(hours=3)
    first = sweep(world, now)
    second = sweep(world, now + timedelta(minutes=1))
    assert names(first, ActionKind.SUSPEND) == [] and names(second, ActionKind.SUSPEND) == []
    assert names(first, ActionKind.CONFIG_WARNING) == ["typo"]
    assert names(second, ActionKind.CONFIG_WARNING) == []
