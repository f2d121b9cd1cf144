"""Every shipped example runs unchanged on the local stack: to Running, then suspended.

The examples once targeted pool `gpu` and a CPU class no simulated node had: the pod
stayed Pending and a suspend stuck in Suspending. Here each file of
examples/valid/ is applied as it ships (with kubectl when it is there, as a user
would; else object by object over the API), each CocoonSet must reach Running,
and `suspend --wait` must bring it to Suspended (a release set's pods gone: its
seat freed).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from cocoon_hibernation.manifests import objects, parse_documents
from devstack.kubehttp import KubeHTTP, pod_path, set_path
from devstack.stack import Stack, StackConfig
from shared import constants as k
from tests.conftest import REPO_ROOT
from tests.fixtures.tools import in_ci

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.needs_registry,
    pytest.mark.needs_tool("docker-registry"),
]

CLI = str(Path(sys.executable).parent / "cocoon-hibernation")
EXAMPLES = sorted((REPO_ROOT / "examples" / "valid").glob("*.yaml"))


@pytest.fixture(scope="module")
def stack() -> Iterator[Stack]:
    # The default nodes: what `devstack up` and `demo` start, unchanged.
    with Stack(StackConfig(tick_seconds=1.0, sim_interval=0.05, log_format="text")) as s:
        yield s


def _sets(path: Path) -> list[dict[str, Any]]:
    docs = objects(parse_documents(path.read_text(encoding="utf-8")))
    return [d for d in docs if isinstance(d, dict) and d.get("kind") == k.KIND]


def _apply(stack: Stack, path: Path) -> None:
    if shutil.which("kubectl") or in_ci():
        out = subprocess.run(
            ["kubectl", "--kubeconfig", str(stack.kubeconfig), "apply", "-f", str(path)],
            check=False,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert out.returncode == 0, out.stderr
        return
    api = KubeHTTP(stack.kube_url)
    for doc in objects(parse_documents(path.read_text(encoding="utf-8"))):
        if doc.get("kind") == "Namespace":
            api.post("/api/v1/namespaces", doc)
        elif doc.get("kind") == k.KIND:
            api.post(set_path(doc["metadata"]["namespace"]), doc)


def _phase(api: KubeHTTP, ns: str, name: str) -> str:
    return str((api.get(set_path(ns, name)).get("status") or {}).get("phase") or "")


def _wait(what: str, check: Any, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what}")


@pytest.mark.parametrize("path", EXAMPLES, ids=[p.stem for p in EXAMPLES])
def test_a_shipped_example_runs_and_suspends_unchanged(stack: Stack, path: Path) -> None:
    api = KubeHTTP(stack.kube_url)
    _apply(stack, path)
    sets = _sets(path)
    assert sets, f"{path.name} holds no CocoonSet"
    for cs in sets:
        ns, name = cs["metadata"]["namespace"], cs["metadata"]["name"]
        _wait(f"{ns}/{name} Running", lambda ns=ns, name=name: _phase(api, ns, name) == "Running")
        env = {**os.environ, **stack.function_env()}
        done = subprocess.run(
            [CLI, "suspend", f"{ns}/{name}", "--wait", "60s", "-o", "json"],
            check=False,
            capture_output=True,
            text=True,
            timeout=120,
            env=env,
            stdin=subprocess.DEVNULL,
        )
        assert done.returncode == 0, done.stdout + done.stderr
        assert _phase(api, ns, name) == "Suspended"
        if cs["spec"].get("hibernatePolicy") == "release":
            pods = api.get(pod_path(ns), {"labelSelector": f"{k.LABEL_SET_NAME}={name}"})
            assert [p["metadata"]["name"] for p in pods.get("items") or []] == []
