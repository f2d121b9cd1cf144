"""`wake` and `suspend` from a terminal, against a real API (embedded) and a real registry.

No functions and no simulated cluster run here: the command itself must make
the desired state durable and take the wake's first steps (docs/design.md#wake-request), exactly
as the wake target does for a wake-request CloudEvent.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from cocoon_hibernation.cmd_suspend import command as suspend
from cocoon_hibernation.cmd_wake import command as wake
from devstack.kubehttp import KubeHTTP, pod_path, set_path
from devstack.registry import DistributionServer, push_image
from shared import constants as k
from shared import log
from shared.clients.registry import reset_clients
from shared.config import LogFormat
from shared.names import vm_name

NS = "team"
PREFIX = "snapshots"


@pytest.fixture(autouse=True)
def _restore_logging() -> Iterator[None]:
    yield  # the commands point the process's log at stderr; later tests expect the default
    log.configure(LogFormat.JSON, None)


@pytest.fixture
def env(kube: Any, kubeconfig: Path, registry: DistributionServer) -> dict[str, str]:
    reset_clients()
    KubeHTTP(kube.url).post(
        "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}}
    )
    return {
        "KUBECONFIG": str(kubeconfig),
        "COCOON_REGISTRY_BASE": f"{registry.host}/{PREFIX}",
        "COCOON_REGISTRY_INSECURE": "true",
        "COCOON_OPERATOR": "absent",  # no operator here: the functions alone
    }


def _released(api: KubeHTTP, name: str, *, policy: str = "release", hint: bool = True) -> None:
    annotations = {k.ANN_HIBERNATED_ON_NODE: "node-2"} if hint else {}
    api.post(
        set_path(NS),
        {
            "apiVersion": k.API_VERSION,
            "kind": k.KIND,
            "metadata": {
                "name": name,
                "namespace": NS,
                "annotations": annotations,
            },
            "spec": {"hibernatePolicy": policy, "suspend": True, "agent": {"image": "img:1"}},
        },
    )
    api.merge_patch(set_path(NS, name) + "/status", {"status": {"phase": "Suspended"}})


def test_wake_unsuspends_then_recreates_the_main_pod_with_restore_intent(
    kube: Any, env: dict[str, str], registry: DistributionServer
) -> None:
    api = KubeHTTP(kube.url)
    _released(api, "agent")
    push_image(registry.url, f"{PREFIX}/{vm_name(NS, 'agent', 0)}", k.TAG_HIBERNATE)

    result = CliRunner().invoke(wake, [f"{NS}/agent"], env=env)

    assert result.exit_code == 0, result.output
    assert f"{NS}/agent: wake requested" in result.stdout
    # No log lines by default (the old main printed its INFO and DEBUG lines here).
    assert result.stderr == ""
    cs = api.get(set_path(NS, "agent"))
    assert cs["spec"]["suspend"] is False
    assert cs["status"]["phase"] == "Waking"
    pod = api.get(pod_path(NS, "agent-0"))
    assert pod["metadata"]["annotations"][k.ANN_RESTORE] == k.TRUE
    preferred = pod["spec"]["affinity"]["nodeAffinity"][
        "preferredDuringSchedulingIgnoredDuringExecution"
    ]
    assert preferred[0]["preference"]["matchExpressions"][0]["values"] == ["node-2"]


def test_wake_refuses_a_retain_set_in_one_line(kube: Any, env: dict[str, str]) -> None:
    # A retain set with no released seat (no hint): nothing to restore. (A set edited to
    # retain *while released* still carries the hint and is woken: docs/design.md#wake-engage.)
    _released(KubeHTTP(kube.url), "kept", policy="retain", hint=False)
    result = CliRunner().invoke(wake, [f"{NS}/kept"], env=env)
    assert result.exit_code == 1
    assert result.output.count("\n") == 1
    assert result.stderr.startswith(f"error: {NS}/kept: ")
    assert "release-policy" in result.output


def test_wake_without_a_registry_refuses(kube: Any, env: dict[str, str]) -> None:
    _released(KubeHTTP(kube.url), "agent")
    result = CliRunner().invoke(wake, [f"{NS}/agent"], env={**env, "COCOON_REGISTRY_BASE": ""})
    assert result.exit_code == 1
    assert "COCOON_REGISTRY_BASE" in result.output


def test_suspend_sets_the_desired_state(kube: Any, env: dict[str, str]) -> None:
    api = KubeHTTP(kube.url)
    api.post(
        set_path(NS),
        {
            "apiVersion": k.API_VERSION,
            "kind": k.KIND,
            "metadata": {"name": "s", "namespace": NS},
            "spec": {"hibernatePolicy": "release", "agent": {"image": "img:1"}},
        },
    )
    result = CliRunner().invoke(suspend, [f"{NS}/s"], env=env)
    assert result.exit_code == 0, result.output
    assert api.get(set_path(NS, "s"))["spec"]["suspend"] is True
    missing = CliRunner().invoke(suspend, [f"{NS}/nope"], env=env)
    assert missing.exit_code == 1
    assert missing.output.strip() == f"error: cocoonset {NS}/nope not found"


def _running(api: KubeHTTP, name: str) -> None:
    api.post(
        set_path(NS),
        {
            "apiVersion": k.API_VERSION,
            "kind": k.KIND,
            "metadata": {"name": name, "namespace": NS},
            "spec": {"hibernatePolicy": "release", "agent": {"image": "img:1"}},
        },
    )
    api.merge_patch(set_path(NS, name) + "/status", {"status": {"phase": "Running"}})


def test_wake_on_a_running_set_is_a_no_op_success(kube: Any, env: dict[str, str]) -> None:
    # The old main answered `error: ...: phase Running: the normal flow's` with exit 1.
    api = KubeHTTP(kube.url)
    _running(api, "up")
    before = api.get(set_path(NS, "up"))
    result = CliRunner().invoke(wake, ["up", "-n", NS], env=env)
    assert result.exit_code == 0, result.output
    assert result.stdout.strip() == f"{NS}/up: already Running: nothing to do"
    assert (
        api.get(set_path(NS, "up"))["metadata"]["resourceVersion"]
        == (before["metadata"]["resourceVersion"])
    )


def test_name_with_namespace_flag_and_bad_usage(kube: Any, env: dict[str, str]) -> None:
    _running(KubeHTTP(kube.url), "up")
    assert CliRunner().invoke(wake, ["up", "--namespace", NS], env=env).exit_code == 0
    bare = CliRunner().invoke(wake, ["up"], env=env)
    assert bare.exit_code == 2
    assert bare.output.strip() == "error: 'up': give NS/NAME, or NAME with -n NS"
    none = CliRunner().invoke(wake, [], env=env)
    assert none.exit_code == 2 and "-l SELECTOR or --all" in none.output


def test_wake_wait_in_a_full_pool_names_the_missing_seat(
    kube: Any, env: dict[str, str], registry: DistributionServer
) -> None:
    api = KubeHTTP(kube.url)
    _released(api, "agent")
    push_image(registry.url, f"{PREFIX}/{vm_name(NS, 'agent', 0)}", k.TAG_HIBERNATE)
    cs = api.get(set_path(NS, "agent"))
    # What the wake function records when the scheduler answers for the restore pod
    # (no scheduler runs here: the pod stays Pending, the set Waking).
    message = "main pod agent-0 unschedulable: 0/2 nodes are available: 2 Insufficient seats."
    api.post(
        f"/api/v1/namespaces/{NS}/events",
        {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {"name": "agent.nocapacity", "namespace": NS},
            "involvedObject": {
                "apiVersion": k.API_VERSION,
                "kind": k.KIND,
                "name": "agent",
                "namespace": NS,
                "uid": cs["metadata"]["uid"],
            },
            "reason": k.REASON_WAKE_NO_CAPACITY,
            "message": message,
            "type": "Warning",
            "firstTimestamp": "2026-01-01T00:00:00Z",
            "lastTimestamp": "2026-01-01T00:00:00Z",
            "count": 1,
        },
    )
    result = CliRunner().invoke(wake, [f"{NS}/agent", "--wait", "1s"], env=env)
    assert result.exit_code == 1, result.output
    assert result.stderr.strip() == (
        f"error: {NS}/agent: wake requested, but still Waking after 1s: "
        f"the pool has no free seat ({message})"
    )


def test_wake_wait_takes_kubectl_durations(kube: Any, env: dict[str, str]) -> None:
    _running(KubeHTTP(kube.url), "up")
    assert CliRunner().invoke(wake, [f"{NS}/up", "--wait", "5m"], env=env).exit_code == 0
    bad = CliRunner().invoke(wake, [f"{NS}/up", "--wait", "soon"], env=env)
    assert bad.exit_code == 2 and "not a duration like 30s or 5m" in bad.output


def test_wake_output_json_is_typed(kube: Any, env: dict[str, str]) -> None:
    import json

    _running(KubeHTTP(kube.url), "up")
    result = CliRunner().invoke(wake, [f"{NS}/up", "-o", "json"], env=env)
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout) == [
        {
            "set": f"{NS}/up",
            "ok": True,
            "phase": "Running",
            "message": "already Running: nothing to do",
            "steps": [],
        }
    ]


def test_suspend_by_selector_and_all(kube: Any, env: dict[str, str]) -> None:
    api = KubeHTTP(kube.url)
    for name, team in (("a", "x"), ("b", "x"), ("c", "y")):
        api.post(
            set_path(NS),
            {
                "apiVersion": k.API_VERSION,
                "kind": k.KIND,
                "metadata": {"name": name, "namespace": NS, "labels": {"team": team}},
                "spec": {"hibernatePolicy": "release", "agent": {"image": "img:1"}},
            },
        )
    result = CliRunner().invoke(suspend, ["-n", NS, "-l", "team=x"], env=env)
    assert result.exit_code == 0, result.output
    suspended = {n: api.get(set_path(NS, n))["spec"].get("suspend") for n in "abc"}
    assert suspended == {"a": True, "b": True, "c": None}
    assert CliRunner().invoke(suspend, ["-n", NS, "--all"], env=env).exit_code == 0
    assert api.get(set_path(NS, "c"))["spec"]["suspend"] is True


def test_wake_of_a_running_set_asked_to_suspend_just_unsuspends(
    kube: Any, env: dict[str, str]
) -> None:
    api = KubeHTTP(kube.url)
    _running(api, "up")
    api.merge_patch(set_path(NS, "up"), {"spec": {"suspend": True}})  # not acted on yet
    result = CliRunner().invoke(wake, [f"{NS}/up"], env=env)
    assert result.exit_code == 0, result.output
    assert result.stdout.strip() == f"{NS}/up: spec.suspend=false; still Running"
    assert api.get(set_path(NS, "up"))["spec"]["suspend"] is False


@pytest.mark.parametrize("output", ["table", "json"])
def test_suspend_wait_tells_each_phase_change_as_it_happens(
    kube: Any, env: dict[str, str], output: str
) -> None:
    # `--wait` printed one line at the end, after a silence as long as the wait.
    import threading
    import time

    api = KubeHTTP(kube.url)
    _running(api, "s")

    def operator() -> None:  # plays the functions: Suspending, then Suspended
        for phase in ("Suspending", "Suspended"):
            time.sleep(0.6)
            api.merge_patch(set_path(NS, "s") + "/status", {"status": {"phase": phase}})

    player = threading.Thread(target=operator)
    player.start()
    result = CliRunner().invoke(suspend, [f"{NS}/s", "--wait", "10s", "-o", output], env=env)
    player.join()
    assert result.exit_code == 0, result.output
    progress_stream = result.stdout if output == "table" else result.stderr
    told = [line.split(None, 1)[1] for line in progress_stream.splitlines() if "phase " in line]
    told = [t for t in told if t.startswith(f"{NS}/s: phase")]
    assert told == [f"{NS}/s: phase {p}" for p in ("Running", "Suspending", "Suspended")]
    if output == "json":
        assert json.loads(result.stdout)[0]["phase"] == "Suspended"  # stdout: the answer only
