"""`wake --wait` into a full pool, on the local stack: the command says the pool has no free seat.

One node with one seat. `a` is released (suspended, its seat freed), `b` takes the seat,
then `a` is woken with `--wait`: its restore pod cannot be scheduled, the functions record
WakeNoCapacity, and the command gives up naming the missing seat, with the scheduler's
words, instead of "still Waking". `status` then shows the pool's one seat used of one.
The CLI runs as a subprocess with the stack's environment, as a user would.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from devstack.kubehttp import KubeHTTP, set_path
from devstack.simulator import NodeSpec
from devstack.stack import Stack, StackConfig

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.needs_registry,
    pytest.mark.needs_tool("docker-registry"),
]

CLI = str(Path(sys.executable).parent / "cocoon-hibernation")
NS = "pool"


@pytest.fixture(scope="module")
def stack() -> Iterator[Stack]:
    config = StackConfig(nodes=[NodeSpec("node-1", seats=1)], tick_seconds=1.0, sim_interval=0.05)
    with Stack(config) as s:
        KubeHTTP(s.kube_url).post(
            "/api/v1/namespaces",
            {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}},
        )
        yield s


def cli(stack: Stack, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, **stack.function_env()}
    return subprocess.run(
        [CLI, *args], check=False, capture_output=True, text=True, timeout=120, env=env
    )


def wait_until(what: str, check: Callable[[], bool], timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")


def phase(stack: Stack, name: str) -> str:
    got: dict[str, Any] = KubeHTTP(stack.kube_url).get(set_path(NS, name))
    return str((got.get("status") or {}).get("phase") or "")


def create_set(stack: Stack, name: str) -> None:
    KubeHTTP(stack.kube_url).post(
        set_path(NS),
        {
            "apiVersion": "cocoonset.cocoonstack.io/v1",
            "kind": "CocoonSet",
            "metadata": {"name": name, "namespace": NS},
            "spec": {"hibernatePolicy": "release", "agent": {"image": "img:1"}},
        },
    )


def test_wake_wait_in_a_full_pool_names_the_missing_seat(stack: Stack) -> None:
    create_set(stack, "a")
    wait_until("a Running", lambda: phase(stack, "a") == "Running")
    out = cli(stack, "suspend", "a", "-n", NS, "--wait", "60s")
    assert out.returncode == 0, out.stderr
    create_set(stack, "b")
    wait_until("b Running", lambda: phase(stack, "b") == "Running")

    out = cli(stack, "wake", "a", "-n", NS, "--wait", "10s")
    assert out.returncode == 1, out.stdout + out.stderr
    line = out.stderr.strip()
    assert line.count("\n") == 0, line
    assert line.startswith(f"error: {NS}/a: wake requested, but still Waking after 10s: ")
    assert "the pool has no free seat (" in line and "0/1 nodes are available" in line

    status = cli(stack, "status", "-n", NS, "-o", "json")
    assert status.returncode == 0, status.stderr
    [pool] = json.loads(status.stdout)["pools"]
    assert (pool["used"], pool["capacity"]) == (1, 1)
    assert [w["set"] for w in pool["waiting"]] == [f"{NS}/a"]
