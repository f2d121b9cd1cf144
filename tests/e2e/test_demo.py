"""`cocoon-hibernation demo`, headless, as CI and a newcomer run it: every step must happen.

Runs the real command in a subprocess without a TTY (plain narration), with a
short sweep tick and poll interval, and checks the JSON report and the
narration for every transition of the story and the final state.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from tests.e2e._procs import descendants, still_running

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.needs_registry,
    pytest.mark.needs_tool("docker-registry"),
]

CLI = str(Path(sys.executable).parent / "cocoon-hibernation")
FAST = ["--tick", "1", "--poll", "0.05", "--step-timeout", "30", "--plain"]


def _run_demo(tmp_path: Path) -> tuple[subprocess.CompletedProcess[str], dict[str, Any]]:
    report = tmp_path / "report.json"
    proc = subprocess.run(
        [CLI, "demo", *FAST, "--report", str(report)],
        check=False,
        capture_output=True,
        text=True,
        timeout=180,
        stdin=subprocess.DEVNULL,
        env={**os.environ, "TERM": "dumb"},
    )
    data = json.loads(report.read_text()) if report.exists() else {}
    return proc, data


def test_demo_runs_every_step_and_ends_clean(tmp_path: Path) -> None:
    proc, report = _run_demo(tmp_path)
    out = proc.stdout
    assert proc.returncode == 0, f"stdout:\n{out}\nstderr:\n{proc.stderr[-3000:]}"
    assert report["ok"] is True
    assert [s["ok"] for s in report["steps"]] == [True] * 9
    lines = [text for _at, text in report["transitions"]]

    def happened(fragment: str) -> bool:
        return any(fragment in line for line in lines)

    def matched(pattern: str) -> bool:
        # Pod states come from polls: a state shorter than a poll may be skipped, so the
        # pod lines are matched on where they end. Phases come from a watch: all of them.
        return any(re.search(pattern, line) for line in lines)

    # A runs on node-1, C fills node-2, B waits for a seat.
    assert matched(r"^a: pod .* -> running on node-1$")
    assert matched(r"^c: pod .* -> running on node-2$")
    assert matched(r"^b: pod .* -> unschedulable")
    assert happened("0/2 nodes are available: 2 Insufficient seats.")
    # A hibernates: snapshot pushed before the release, then its pod goes and the seat frees.
    assert happened("a: phase Running -> Suspending")
    assert happened("a: vk-cocoon pushed a-0's snapshot to the registry as :hibernate")
    assert happened("a: phase Suspending -> Suspended")
    assert happened("a: hibernated-on-node set to node-1")
    # B takes node-1.
    assert matched(r"^b: pod unschedulable -> (starting|running) on node-1$")
    # The wake queues: Waking, unschedulable, WakeNoCapacity with the scheduler's message.
    assert happened("a: phase Suspended -> Waking")
    assert happened("event Warning WakeNoCapacity")
    # B leaves, A restores on node-1 from the warm node-local snapshot, hint cleared.
    assert happened("b: phase Suspending -> Suspended")
    assert happened("a: phase Waking -> Running")
    assert happened("a: hibernated-on-node cleared")
    assert report["wake_node"] == "node-1"
    assert "warm" in report["wake_restore"]
    # The wake dropped the tag; the summary says so.
    assert report["tag_present_at_end"] is False
    assert "a's :hibernate tag is gone" in out
    # Order matters: release before B's seat, wake queued before B left.
    order = [
        next(i for i, line in enumerate(lines) if frag in line)
        for frag in (
            "a: phase Suspending -> Suspended",
            "a: phase Suspended -> Waking",
            "event Warning WakeNoCapacity",
            "b: phase Suspending -> Suspended",
            "a: phase Waking -> Running",
        )
    ]
    assert order == sorted(order)

    # The functions did it, as deployed. Which one takes a step is a race by design (events
    # are hints, every function may reconcile any set): ingest on the audit webhook or the
    # registry notification, the sweep tick as the safety net, wake on the wake request.
    def acted(step: str, who: str = r"\w+") -> bool:
        return matched(rf"^a: {who} function \(.*\) did .*\b{step}\b")

    assert acted("Unsuspend", who="wake")
    for step in (
        "RequestHibernation",
        "FlagAndDelete",
        "PersistWaking",
        "CreateMain",
        "ReportNoCapacity",
        "DropSnapshot",
        "CompleteWake",
    ):
        assert acted(step), step
    assert report["api_requests"]["functions"] > 0
    assert "summary" in out

    # The seat economy: B's wake into the full pool reclaimed idle A's seat, once.
    assert happened("event Normal SeatReclaimed")
    at = 0
    for frag in (
        "b: phase Suspended -> Waking",
        "a: phase Running -> Suspending",
        "a: phase Suspending -> Suspended",
        "b: phase Waking -> Running",
    ):
        # Each after the one before it (A suspended earlier in the story too).
        found = [i for i, line in enumerate(lines) if i >= at and frag in line]
        assert found, (frag, lines[at:])
        at = found[0]
    assert report["reclaim_node"] == "node-1"


def test_ctrl_c_leaves_no_process_behind(tmp_path: Path) -> None:
    proc = subprocess.Popen(
        [CLI, "demo", *FAST, "--keep"],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
        text=True,
    )
    assert proc.stdout is not None
    seen: list[str] = []
    deadline = time.monotonic() + 90
    try:
        # Wait until the scenario is under way: every part of the stack is running then.
        while time.monotonic() < deadline:
            line = proc.stdout.readline()
            if not line:
                break
            seen.append(line)
            if "step 2/9" in line:
                break
        assert any("step 2/9" in line for line in seen), "".join(seen)
        tree = descendants(proc.pid)
        # kube, release, wake, sweep, ingest (+ gunicorn workers) and the registry.
        assert len(tree) >= 6, tree
        proc.send_signal(signal.SIGINT)
        proc.wait(timeout=60)
        deadline = time.monotonic() + 15
        while still_running(tree) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert still_running(tree) == []
        assert proc.returncode == 130
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
