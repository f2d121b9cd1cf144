"""`cocoon-hibernation status` against a real API (embedded) and a real registry.

The cluster is staged by hand (no functions, no simulator), so each state the
command must report is exactly the one set up: a running set, a released set
with its snapshot, a Suspended set whose main pod came back without the
restore marker (an operator predating hibernatePolicy, docs/design.md#operator),
a wake in flight, and a retain set that is not ours.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from cocoon_hibernation.cmd_status import FLAG_STALE_OPERATOR, command
from devstack.kubehttp import KubeHTTP, pod_path, set_path
from devstack.registry import DistributionServer, push_image
from devstack.sim_pods import main_pod_body
from shared import constants as k
from shared import log
from shared.clients.registry import reset_clients
from shared.config import LogFormat
from shared.constants import ANN_RECLAIMABLE_AFTER, ANN_SEAT_WAIT
from shared.names import vm_name

NS = "team"
PREFIX = "snapshots"


def _set(
    api: KubeHTTP,
    name: str,
    *,
    policy: str = "release",
    suspend: bool = False,
    phase: str | None = None,
    hint: str = "",
) -> dict[str, Any]:
    body: dict[str, Any] = {
        "apiVersion": k.API_VERSION,
        "kind": k.KIND,
        "metadata": {"name": name, "namespace": NS},
        "spec": {"hibernatePolicy": policy, "suspend": suspend, "agent": {"image": "img:1"}},
    }
    if hint:
        body["metadata"]["annotations"] = {k.ANN_HIBERNATED_ON_NODE: hint}
    created = api.post(set_path(NS), body)
    if phase:
        created = api.merge_patch(set_path(NS, name) + "/status", {"status": {"phase": phase}})
    return created


def _pod(api: KubeHTTP, cs: dict[str, Any], *, node: str, restore: bool = False) -> None:
    body = main_pod_body(cs)
    if restore:
        body["metadata"]["annotations"][k.ANN_RESTORE] = k.TRUE
    body["spec"]["nodeName"] = node
    api.post(pod_path(NS), body)


@pytest.fixture(autouse=True)
def _restore_logging() -> Iterator[None]:
    # The command points the process's log at stderr as text (right for a CLI); the
    # in-process runner shares that state with later tests, so put it back.
    yield
    log.configure(LogFormat.JSON, None)


@pytest.fixture
def world(kube: Any, kubeconfig: Path, registry: DistributionServer) -> dict[str, str]:
    reset_clients()
    api = KubeHTTP(kube.url)
    api.post(
        "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}}
    )
    running = _set(api, "running", phase="Running")
    _pod(api, running, node="node-1")
    _set(api, "released", suspend=True, phase="Suspended", hint="node-2")
    push_image(registry.url, f"{PREFIX}/{vm_name(NS, 'released', 0)}", k.TAG_HIBERNATE)
    stale = _set(api, "stale", suspend=True, phase="Suspended", hint="node-1")
    _pod(api, stale, node="node-1")  # no restore marker: the old operator's pod
    waking = _set(api, "waking", phase="Waking", hint="node-1")
    _pod(api, waking, node="node-2", restore=True)
    push_image(registry.url, f"{PREFIX}/{vm_name(NS, 'waking', 0)}", k.TAG_HIBERNATE)
    _set(api, "kept", policy="retain", phase="Running")
    return {
        "KUBECONFIG": str(kubeconfig),
        "COCOON_REGISTRY_BASE": f"{registry.host}/{PREFIX}",
        "COCOON_REGISTRY_INSECURE": "true",
    }


def _status(env: dict[str, str], *args: str) -> Any:
    return CliRunner().invoke(command, ["-o", "json", *args], env=env)


def _rows(env: dict[str, str], *args: str, code: int = 1) -> dict[str, dict[str, Any]]:
    # The world holds a flagged set (stale): a finding, so exit 1 with every row shown.
    result = _status(env, *args)
    assert result.exit_code == code, result.output
    return {row["name"]: row for row in json.loads(result.stdout)["sets"]}


def test_status_reports_phase_hint_snapshot_and_the_stale_operator_flag(
    world: dict[str, str],
) -> None:
    result = _status(world)
    assert result.exit_code == 1, result.output
    assert result.stderr.strip() == f"error: 1 set(s) flagged: {FLAG_STALE_OPERATOR}"
    rows = {row["name"]: row for row in json.loads(result.stdout)["sets"]}
    # Retain sets hold seats too: listed (the old main left them out).
    assert set(rows) == {"running", "released", "stale", "waking", "kept"}
    assert rows["running"] == {
        "namespace": NS,
        "name": "running",
        "policy": "release",
        "phase": "Running",
        "suspend": False,
        "hint": None,
        "snapshot": False,
        "snapshot_unknown": None,
        "main_pod": "running-0",
        "node": "node-1",
        "flag": None,
        "why": None,
    }
    assert (rows["released"]["phase"], rows["released"]["hint"], rows["released"]["snapshot"]) == (
        "Suspended",
        "node-2",
        True,
    )
    assert rows["released"]["flag"] is None
    assert rows["stale"]["flag"] == FLAG_STALE_OPERATOR
    # A restore-marked main while Waking is the wake in flight, not a stale operator.
    assert rows["waking"]["flag"] is None
    assert rows["waking"]["snapshot"] is True
    # A retain set keeps its VM: no snapshot to look for, and not "unchecked".
    assert rows["kept"] | {"phase": "Running"} == {
        "namespace": NS,
        "name": "kept",
        "policy": "retain",
        "phase": "Running",
        "suspend": False,
        "hint": None,
        "snapshot": None,
        "snapshot_unknown": None,
        "main_pod": None,
        "node": None,
        "flag": None,
        "why": None,
    }


def test_status_is_zero_when_all_is_checked_and_fine(world: dict[str, str], kube: Any) -> None:
    KubeHTTP(kube.url).delete(set_path(NS, "stale"))
    result = _status(world)
    assert result.exit_code == 0, result.output
    assert result.stderr == ""


def test_status_yaml_carries_the_same_typed_fields(world: dict[str, str]) -> None:
    import yaml

    as_json = json.loads(_status(world).stdout)
    as_yaml = yaml.safe_load(_status(world, "-o", "yaml").stdout)
    assert as_yaml["sets"] == as_json["sets"]


def test_status_table_for_people(world: dict[str, str]) -> None:
    result = CliRunner().invoke(command, ["--namespace", NS], env=world)
    assert result.exit_code == 1, result.output  # the stale set is flagged
    lines = result.stdout.splitlines()
    assert lines[0].split() == [
        "SET",
        "POLICY",
        "PHASE",
        "SUSPEND",
        "HINT",
        "SNAPSHOT",
        "POD",
        "NODE",
        "FLAG",
        "WHY",
    ]
    released = next(line for line in lines if line.startswith(f"{NS}/released "))
    assert released.split()[:6] == [
        f"{NS}/released",
        "release",
        "Suspended",
        "yes",
        "node-2",
        "yes",
    ]
    kept = next(line for line in lines if line.startswith(f"{NS}/kept "))
    assert kept.split()[:2] == [f"{NS}/kept", "retain"]
    stale = next(line for line in lines if line.startswith(f"{NS}/stale "))
    assert FLAG_STALE_OPERATOR in stale


def test_without_a_registry_the_snapshot_is_unchecked(world: dict[str, str], kube: Any) -> None:
    KubeHTTP(kube.url).delete(set_path(NS, "stale"))
    env = {**world, "COCOON_REGISTRY_BASE": ""}
    result = _status(env)
    assert result.exit_code == 1, result.output
    rows = {row["name"]: row for row in json.loads(result.stdout)["sets"]}
    release = [r for r in rows.values() if r["policy"] == "release"]
    assert {(r["snapshot"], r["snapshot_unknown"]) for r in release} == {
        (None, "COCOON_REGISTRY_BASE not set")
    }
    assert "--allow-unchecked" in result.stderr
    assert _status(env, "--allow-unchecked").exit_code == 0


def test_an_unreachable_registry_is_a_failure_with_a_short_reason(
    world: dict[str, str], kube: Any, fresh_registry: DistributionServer
) -> None:
    # The old main exited 0 with a urllib3 traceback text in every row's SNAPSHOT cell.
    KubeHTTP(kube.url).delete(set_path(NS, "stale"))
    host = fresh_registry.host
    fresh_registry.stop()  # nothing listens there any more
    env = {**world, "COCOON_REGISTRY_BASE": f"{host}/{PREFIX}"}
    result = _status(env)
    assert result.exit_code == 1, result.output
    rows = {row["name"]: row for row in json.loads(result.stdout)["sets"]}
    release = [r for r in rows.values() if r["policy"] == "release"]
    assert {(r["snapshot"], r["snapshot_unknown"]) for r in release} == {
        (None, "registry unreachable")
    }
    table = CliRunner().invoke(command, ["-n", NS], env=env)
    assert table.exit_code == 1
    assert "unknown (registry unreachable)" in table.stdout
    assert "Traceback" not in table.output and "HTTPConnectionPool" not in table.output
    assert max(len(line) for line in table.stdout.splitlines()) < 160
    assert table.stderr.startswith("error: snapshot not checked for 3 set(s): registry unreachable")
    assert "snapshot probe failed" not in table.stderr  # info lines only with -v
    verbose = CliRunner().invoke(command, ["-n", NS, "-v"], env=env)
    assert "INFO    snapshot probe failed" in verbose.stderr and "cannot reach" in verbose.stderr


def test_a_bad_kubeconfig_is_one_line(tmp_path: Path) -> None:
    missing = tmp_path / "nope"
    result = CliRunner().invoke(command, ["--kubeconfig", str(missing)])
    assert result.exit_code == 1
    assert result.output.strip() == f"error: --kubeconfig {missing}: no such file"


def _node(api: KubeHTTP, name: str, pool: str, seats: int, *, ready: bool = True) -> None:
    api.post(
        "/api/v1/nodes",
        {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {"name": name, "labels": {k.LABEL_POOL: pool}},
            "status": {
                "allocatable": {"pods": str(seats)},
                "conditions": [{"type": "Ready", "status": "True" if ready else "False"}],
            },
        },
    )


def test_the_seat_view_per_pool(world: dict[str, str], kube: Any) -> None:
    api = KubeHTTP(kube.url)
    _node(api, "node-1", "default", 2)
    _node(api, "node-2", "default", 2)
    _node(api, "node-3", "default", 5, ready=False)  # offers no seat
    since = (datetime.now(UTC) - timedelta(minutes=3)).strftime("%Y-%m-%dT%H:%M:%SZ")
    wait = json.dumps({"pod": "uid-1", "since": since, "victim": f"{NS}/running"})
    api.merge_patch(set_path(NS, "waking"), {"metadata": {"annotations": {ANN_SEAT_WAIT: wait}}})
    api.merge_patch(
        set_path(NS, "running"), {"metadata": {"annotations": {ANN_RECLAIMABLE_AFTER: "1h"}}}
    )

    result = CliRunner().invoke(command, ["--seats", "-o", "json"], env=world)
    assert result.exit_code == 0, result.output
    [pool] = json.loads(result.stdout)
    # running-0 and stale-0 on node-1, waking-0 on node-2; two Ready nodes of 2 seats.
    assert (pool["pool"], pool["used"], pool["capacity"], pool["nodes"]) == ("default", 3, 4, 2)
    assert pool["capacity_unknown"] is None
    [waiting] = pool["waiting"]
    assert waiting["set"] == f"{NS}/waking" and 175 <= waiting["age_seconds"] <= 240
    assert waiting["since"].endswith("Z") and waiting["since"][:16] == since[:16]
    assert waiting["victim"] == f"{NS}/running"
    [rec] = pool["reclaimable"]
    assert rec["set"] == f"{NS}/running" and rec["eligible"] is False
    assert rec["reclaimable_after_seconds"] == 3600

    table = CliRunner().invoke(command, ["--namespace", NS], env=world)
    assert "pool default: 3 seat(s) used of 4 (2 node(s))" in table.stdout
    assert f"{NS}/waking  waiting 3m" in table.stdout
    assert f"{NS}/running  idle " in table.stdout and "reclaimable after 1h" in table.stdout


def _event(api: KubeHTTP, set_name: str, reason: str, message: str, when: str) -> None:
    api.post(
        f"/api/v1/namespaces/{NS}/events",
        {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {"name": f"{set_name}.{reason.lower()}.{when[-3:-1]}", "namespace": NS},
            "involvedObject": {
                "kind": k.KIND,
                "apiVersion": k.API_VERSION,
                "namespace": NS,
                "name": set_name,
            },
            "reason": reason,
            "message": message,
            "type": "Warning",
            "lastTimestamp": when,
        },
    )


def test_status_says_why_a_pod_waits_and_why_a_set_is_stuck(
    world: dict[str, str], kube: Any
) -> None:
    # Pending with no reason, when only `kubectl get pod -o yaml` said why (issue: the
    # example set on the local stack).
    api = KubeHTTP(kube.url)
    pending = _set(api, "pending", phase="Pending")
    body = main_pod_body(pending)
    api.post(pod_path(NS), body)
    unschedulable = "0/2 nodes are available: 2 node(s) didn't match Pod's node affinity/selector."
    api.merge_patch(
        pod_path(NS, body["metadata"]["name"]) + "/status",
        {
            "status": {
                "phase": "Pending",
                "conditions": [
                    {
                        "type": "PodScheduled",
                        "status": "False",
                        "reason": "Unschedulable",
                        "message": unschedulable,
                    }
                ],
            }
        },
    )
    # A set stuck in Suspending: its newest Warning Event (an admission refusal) is why.
    _set(api, "stuck", suspend=True, phase="Suspending")
    _event(api, "stuck", "WriteRefused", "older refusal", "2026-01-01T00:00:01Z")
    _event(
        api,
        "stuck",
        "WriteRefused",
        'admission webhook "cocoonsets.validate.cocoonstack.io" denied the request',
        "2026-01-01T00:00:09Z",
    )
    # A settled set's old warning is history, not a reason.
    _event(api, "running", "WakeNoCapacity", "long ago", "2026-01-01T00:00:05Z")
    # Running but asked to suspend: the refused write is why it does not move.
    _set(api, "refused", suspend=True, phase="Running")
    _event(
        api, "refused", "WriteRefused", "denied: spec.agent derives VM name", "2026-01-01T00:00:07Z"
    )

    rows = _rows(world)
    assert rows["pending"]["why"] == f"pod pending-0 unschedulable: {unschedulable}"
    assert rows["stuck"]["why"] == (
        'WriteRefused: admission webhook "cocoonsets.validate.cocoonstack.io" denied the request'
    )
    assert rows["running"]["why"] is None
    assert rows["refused"]["why"] == "WriteRefused: denied: spec.agent derives VM name"
    table = CliRunner().invoke(command, [], env=world).stdout
    line = next(x for x in table.splitlines() if x.startswith(f"{NS}/pending "))
    assert line.endswith(f"pod pending-0 unschedulable: {unschedulable}")


def test_watch_follows_each_change_as_the_api_server_reports_it(
    world: dict[str, str], kube: Any
) -> None:
    # A real process and a real Ctrl-C: the table, then a line per change (every phase
    # of the set, however briefly held: they come from a watch, not a poll).
    import os
    import signal
    import subprocess
    import sys
    import threading
    import time

    api = KubeHTTP(kube.url)
    api.delete(set_path(NS, "stale"))
    env = {k_: v for k_, v in os.environ.items() if not k_.startswith("COCOON_")}
    proc = subprocess.Popen(
        [sys.executable, "-m", "cocoon_hibernation", "status", "-w"],
        env={**env, **world},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    lines: list[str] = []
    reader = threading.Thread(target=lambda: lines.extend(iter(proc.stdout.readline, "")))
    reader.start()
    deadline = time.monotonic() + 60
    while len(lines) < 5 and time.monotonic() < deadline:  # header + 4 sets
        time.sleep(0.05)
    for phase in ("Suspending", "Suspended", "Waking", "Running"):  # no pause between them
        api.merge_patch(set_path(NS, "running") + "/status", {"status": {"phase": phase}})
    api.delete(set_path(NS, "kept"))
    while len(lines) < 10 and time.monotonic() < deadline:
        time.sleep(0.05)
    proc.send_signal(signal.SIGINT)
    proc.wait(timeout=30)
    reader.join(timeout=10)
    assert proc.returncode == 0, proc.stderr.read() if proc.stderr else ""
    assert lines[0].split()[:3] == ["SET", "POLICY", "PHASE"]
    changes = [line.split()[:3] for line in lines[5:9]]
    assert changes == [
        [f"{NS}/running", "release", phase]
        for phase in ("Suspending", "Suspended", "Waking", "Running")
    ]
    assert lines[9:] == [f"{NS}/kept  deleted\n"]


def test_watch_without_a_watching_client_polls_until_ctrl_c(
    world: dict[str, str], kube: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    from cocoon_hibernation import _kube, cmd_status

    # The official client (a kubeconfig the light reader does not cover) cannot watch:
    # the same output, from a read every second.
    monkeypatch.setattr(cmd_status, "read_client", _kube.kube_client)

    api = KubeHTTP(kube.url)
    KubeHTTP(kube.url).delete(set_path(NS, "stale"))
    changes = [
        lambda: api.merge_patch(
            set_path(NS, "running") + "/status", {"status": {"phase": "Suspending"}}
        ),
        lambda: None,  # a poll where nothing changed prints nothing
        lambda: api.delete(set_path(NS, "kept")),
    ]

    def tick(_seconds: float) -> None:
        if not changes:
            raise KeyboardInterrupt  # the user's Ctrl-C
        changes.pop(0)()

    monkeypatch.setattr(cmd_status.time, "sleep", tick)
    result = CliRunner().invoke(command, ["-w"], env=world)
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert lines[0].split()[:3] == ["SET", "POLICY", "PHASE"]
    first = [line.split()[0] for line in lines[1:5]]
    assert first == [f"{NS}/kept", f"{NS}/released", f"{NS}/running", f"{NS}/waking"]
    assert [line.split()[:3] for line in lines[5:6]] == [[f"{NS}/running", "release", "Suspending"]]
    assert lines[6:] == [f"{NS}/kept  deleted"]

    # -o json: one object per line, the first read and then each change.
    changes[:] = [
        lambda: api.merge_patch(
            set_path(NS, "running") + "/status", {"status": {"phase": "Suspended"}}
        )
    ]
    streamed = CliRunner().invoke(command, ["-w", "-o", "json"], env=world)
    assert streamed.exit_code == 0, streamed.output
    objects = [json.loads(line) for line in streamed.stdout.splitlines()]
    assert [o["name"] for o in objects] == ["released", "running", "waking", "running"]
    assert objects[-1]["phase"] == "Suspended"
