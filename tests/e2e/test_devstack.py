"""The local stack as the e2e tests and a user drive it: `Stack`, `status`, `suspend`, `wake`.

One stack for the module (starting it costs a few seconds): the embedded API
in its own process, a real Distribution registry, the four targets as
functions-framework processes, the simulated cluster and a fast sweep tick.
The CLI runs as a subprocess with the stack's environment, as a user would
after `source env.sh`.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import requests

from devstack.kubehttp import KubeHTTP, set_path
from devstack.simulator import NodeSpec
from devstack.stack import Stack, StackConfig
from tests.e2e._procs import still_running, tree_of
from tests.fixtures.tools import in_ci

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.needs_registry,
    pytest.mark.needs_tool("docker-registry"),
]

CLI = str(Path(sys.executable).parent / "cocoon-hibernation")
NS = "e2e"


@pytest.fixture(scope="module")
def stack() -> Iterator[Stack]:
    config = StackConfig(
        nodes=[NodeSpec("node-1", seats=3), NodeSpec("node-2", seats=3)],
        tick_seconds=1.0,
        sim_interval=0.05,
        log_format="text",
    )
    with Stack(config) as s:
        api = KubeHTTP(s.kube_url)
        api.post(
            "/api/v1/namespaces",
            {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}},
        )
        yield s


def cli(stack: Stack, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, **stack.function_env()}
    return subprocess.run(
        [CLI, *args],
        check=False,
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
        stdin=subprocess.DEVNULL,
    )


def wait_until(what: str, check: Callable[[], bool], timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")


def get_set(stack: Stack, name: str) -> dict[str, Any]:
    return KubeHTTP(stack.kube_url).get(set_path(NS, name))


def phase(stack: Stack, name: str) -> str:
    return str((get_set(stack, name).get("status") or {}).get("phase") or "")


def create_set(stack: Stack, name: str, policy: str = "release") -> None:
    KubeHTTP(stack.kube_url).post(
        set_path(NS),
        {
            "apiVersion": "cocoonset.cocoonstack.io/v1",
            "kind": "CocoonSet",
            "metadata": {"name": name, "namespace": NS},
            "spec": {"hibernatePolicy": policy, "agent": {"image": "img:1"}},
        },
    )


def status_json(stack: Stack) -> dict[str, dict[str, Any]]:
    proc = cli(stack, "status", "-n", NS, "-o", "json")
    assert proc.returncode == 0, proc.stderr
    return {row["name"]: row for row in json.loads(proc.stdout)["sets"]}


def test_status_follows_a_set_through_suspend_and_wake(stack: Stack) -> None:
    create_set(stack, "s1")
    create_set(stack, "r1", policy="retain")
    wait_until("s1 Running", lambda: phase(stack, "s1") == "Running")

    rows = status_json(stack)
    assert rows["r1"]["policy"] == "retain"  # listed: a retain set holds a seat too
    assert rows["r1"]["snapshot"] is None
    assert rows["s1"]["phase"] == "Running"
    assert rows["s1"]["snapshot"] is False
    assert rows["s1"]["hint"] is None
    assert rows["s1"]["flag"] is None

    out = cli(stack, "suspend", f"{NS}/s1", "--wait", "30s")
    assert out.returncode == 0, out.stderr
    assert "spec.suspend=true" in out.stdout

    rows = status_json(stack)
    assert rows["s1"]["phase"] == "Suspended"
    assert rows["s1"]["snapshot"] is True
    assert rows["s1"]["hint"] in ("node-1", "node-2")
    assert rows["s1"]["main_pod"] is None

    # The table form a user reads shows the same facts.
    table = cli(stack, "status", "-n", NS)
    assert table.returncode == 0
    line = next(x for x in table.stdout.splitlines() if x.startswith(f"{NS}/s1"))
    assert "Suspended" in line and "yes" in line and rows["s1"]["hint"] in line

    out = cli(stack, "wake", f"{NS}/s1", "--wait", "30s")
    assert out.returncode == 0, out.stderr
    # The wake completes asynchronously (hint cleared, tag dropped): watch the API, then ask.
    wait_until(
        "the wake to complete",
        lambda: (
            phase(stack, "s1") == "Running"
            and not (get_set(stack, "s1")["metadata"].get("annotations") or {}).get(
                "cocoonset.cocoonstack.io/hibernated-on-node"
            )
        ),
    )
    rows = status_json(stack)
    assert (rows["s1"]["phase"], rows["s1"]["hint"]) == ("Running", None)
    assert rows["s1"]["snapshot"] is False  # the tag goes before the hint is cleared


def test_a_woken_vm_keeps_its_state_beside_the_operators_drift_check(stack: Stack) -> None:
    """Issue 13, defect 3, against the simulated operator (which deletes a main pod whose
    VM-spec strings differ from its own): `storage: 1024Mi` is written as `1Gi`, so the
    restored pod stays and its VM is never booted fresh after the tag is gone."""
    api = KubeHTTP(stack.kube_url)
    api.post(
        set_path(NS),
        {
            "apiVersion": "cocoonset.cocoonstack.io/v1",
            "kind": "CocoonSet",
            "metadata": {"name": "st", "namespace": NS},
            "spec": {
                "hibernatePolicy": "release",
                "agent": {"image": "img:1", "storage": "1024Mi"},
            },
        },
    )
    wait_until("st Running", lambda: phase(stack, "st") == "Running")
    assert cli(stack, "suspend", f"{NS}/st", "--wait", "30").returncode == 0
    assert cli(stack, "wake", f"{NS}/st", "--wait", "30").returncode == 0
    wait_until(
        "the wake to complete",
        lambda: (
            phase(stack, "st") == "Running"
            and not (get_set(stack, "st")["metadata"].get("annotations") or {}).get(
                "cocoonset.cocoonstack.io/hibernated-on-node"
            )
        ),
    )

    def main_pod() -> dict[str, Any]:
        return api.get(f"/api/v1/namespaces/{NS}/pods/st-0")

    restored = main_pod()
    assert restored["metadata"]["annotations"]["cocoonset.cocoonstack.io/storage"] == "1Gi"
    time.sleep(2)  # many simulator passes: a drifted pod would be gone by now
    assert main_pod()["metadata"]["uid"] == restored["metadata"]["uid"]
    assert stack.simulator is not None
    assert [r.how for r in stack.simulator.restores if r.pod == "st-0"] in (
        ["warm"],
        ["peer"],
        ["cold"],
    )


def test_cli_errors_are_one_line(stack: Stack) -> None:
    out = cli(stack, "wake", f"{NS}/does-not-exist")
    assert out.returncode == 1
    assert out.stderr.strip().count("\n") == 0
    assert "not found" in out.stderr
    out = cli(stack, "suspend", "not-a-ref")
    assert out.returncode != 0
    assert "Traceback" not in out.stderr


def test_stack_stop_leaves_no_process(tmp_path: Path) -> None:
    config = StackConfig(tick_seconds=0.5, sim_interval=0.1, workdir=tmp_path / "stack")
    s = Stack(config)
    s.start()
    try:
        assert len(s.pids()) == 6  # kube, four targets, the registry
        mine = tree_of(s.pids())  # with the gunicorn workers under each target
        assert len(mine) > 6
        assert requests.get(f"{s.kube_url}/version", timeout=5).status_code == 200
    finally:
        s.stop()
    deadline = time.monotonic() + 15
    while still_running(mine) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert still_running(mine) == []


def test_devstack_up_stops_everything_on_sigterm(tmp_path: Path) -> None:
    proc = subprocess.Popen(
        [CLI, "devstack", "up", "--tick", "0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
        text=True,
    )
    assert proc.stdout is not None
    seen: list[str] = []
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            line = proc.stdout.readline()
            if not line:
                break
            seen.append(line)
            if "Ctrl-C stops everything" in line:
                break
        assert any("Ctrl-C stops everything" in line for line in seen), "".join(seen)
        kubeconfig = next(
            line.split("kubeconfig ")[1].rstrip(")\n") for line in seen if "(kubeconfig " in line
        )
        # What the printed instructions promise: kubectl works against it.
        if shutil.which("kubectl") or in_ci():  # CI has kubectl: never skip this part there
            out = subprocess.run(
                ["kubectl", "--kubeconfig", kubeconfig, "get", "nodes", "-o", "name"],
                check=False,
                capture_output=True,
                text=True,
                timeout=30,
            )
            assert out.stdout.split() == ["node/node-1", "node/node-2"], out.stderr
        # The printed next step runs as printed (it said `cocoon-hibernation status`,
        # which is not on PATH in a clone: there it must say `uv run …`).
        status = next(line.strip() for line in seen if " status --kubeconfig " in line)
        ran = subprocess.run(
            ["sh", "-c", status], check=False, capture_output=True, text=True, timeout=120
        )
        assert ran.returncode == 0, (status, ran.stderr)
        assert ran.stdout.startswith("no CocoonSets"), ran.stdout
        tree = tree_of([proc.pid])
        assert len(tree) >= 7  # devstack itself, kube, four targets, the registry (+ workers)
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=60)
        deadline = time.monotonic() + 15
        while still_running(tree) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert still_running(tree) == []
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_a_step_that_never_happens_fails_the_demo_naming_it(tmp_path: Path) -> None:
    # The functions are told to ignore the demo's namespace, so A never releases.
    from devstack.narrate import PlainNarration, summary_lines
    from devstack.scenario import Scenario

    config = StackConfig(
        tick_seconds=0, sim_interval=0.05, extra_env={"COCOON_NAMESPACES": "elsewhere"}
    )
    out = (tmp_path / "narration.txt").open("w")
    with Stack(config) as s:
        scenario = Scenario(s, PlainNarration(out), step_timeout=3, poll=0.05)
        result = scenario.run()
    out.close()
    assert result.ok is False
    assert result.failed_step == "A suspends: snapshot pushed, pod deleted, seat released"
    assert [st.ok for st in result.steps] == [True, True, True, False]
    assert result.last_state["sets"]["a"]["suspend"] is True
    assert result.last_state["sets"]["a"]["phase"] == "Running"
    text = "\n".join(summary_lines(result))
    assert "FAILED at: A suspends" in text
    assert "a: phase Running, suspend=true, pod running on node-1" in text
