"""`cocoon-hibernation status` against a real API (embedded) and a real registry.

The cluster is staged by hand (no functions, no simulator), so each state the
command must report is exactly the one set up: a running set, a released set
with its snapshot, a Suspended set whose main pod came back without the
restore marker (SPEC §12, what an operator predating hibernatePolicy does),
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
from devstack.simulator import main_pod_body
from shared import constants as k
from shared import log
from shared.clients.registry import reset_clients
from shared.config import LogFormat
from shared.seats.keys import ANN_RECLAIMABLE_AFTER, ANN_SEAT_WAIT

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
    push_image(registry.url, f"{PREFIX}/vk-{NS}-released-0", k.TAG_HIBERNATE)
    stale = _set(api, "stale", suspend=True, phase="Suspended", hint="node-1")
    _pod(api, stale, node="node-1")  # no restore marker: the old operator's pod
    waking = _set(api, "waking", phase="Waking", hint="node-1")
    _pod(api, waking, node="node-2", restore=True)
    push_image(registry.url, f"{PREFIX}/vk-{NS}-waking-0", k.TAG_HIBERNATE)
    _set(api, "kept", policy="retain", phase="Running")
    return {
        "KUBECONFIG": str(kubeconfig),
        "COCOON_REGISTRY_BASE": f"{registry.host}/{PREFIX}",
        "COCOON_REGISTRY_INSECURE": "true",
    }


def _rows(env: dict[str, str], *args: str) -> dict[str, dict[str, Any]]:
    result = CliRunner().invoke(command, ["-o", "json", *args], env=env)
    assert result.exit_code == 0, result.output
    return {row["name"]: row for row in json.loads(result.output)}


def test_status_reports_phase_hint_snapshot_and_the_stale_operator_flag(
    world: dict[str, str],
) -> None:
    rows = _rows(world)
    assert set(rows) == {"running", "released", "stale", "waking"}  # retain is not ours
    assert rows["running"] | {"main_pod": ""} == {
        "namespace": NS,
        "name": "running",
        "phase": "Running",
        "suspend": False,
        "hint": "",
        "snapshot": "no",
        "main_pod": "",
        "flag": "",
    }
    assert rows["running"]["main_pod"] == "running-0 on node-1"
    assert (rows["released"]["phase"], rows["released"]["hint"], rows["released"]["snapshot"]) == (
        "Suspended",
        "node-2",
        "yes",
    )
    assert rows["released"]["flag"] == ""
    assert rows["stale"]["flag"] == FLAG_STALE_OPERATOR
    # A restore-marked main while Waking is the wake in flight, not a stale operator.
    assert rows["waking"]["flag"] == ""
    assert rows["waking"]["snapshot"] == "yes"


def test_status_table_for_people(world: dict[str, str]) -> None:
    result = CliRunner().invoke(command, ["--namespace", NS], env=world)
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert lines[0].split()[:6] == ["SET", "PHASE", "SUSPEND", "HINT", "SNAPSHOT", "MAIN"]
    released = next(line for line in lines if line.startswith(f"{NS}/released "))
    assert released.split()[:5] == [f"{NS}/released", "Suspended", "yes", "node-2", "yes"]
    stale = next(line for line in lines if line.startswith(f"{NS}/stale "))
    assert FLAG_STALE_OPERATOR in stale


def test_without_a_registry_the_snapshot_column_is_unknown(world: dict[str, str]) -> None:
    env = {**world, "COCOON_REGISTRY_BASE": ""}
    rows = _rows(env)
    assert {r["snapshot"] for r in rows.values()} == {"?"}


def test_a_registry_error_is_shown_never_read_as_absent(
    world: dict[str, str], fresh_registry: DistributionServer
) -> None:
    host = fresh_registry.host
    fresh_registry.stop()  # nothing listens there any more
    rows = _rows({**world, "COCOON_REGISTRY_BASE": f"{host}/{PREFIX}"})
    assert all(r["snapshot"].startswith("error:") for r in rows.values())


def test_a_bad_kubeconfig_is_one_line(tmp_path: Path) -> None:
    missing = tmp_path / "nope"
    result = CliRunner().invoke(command, ["--kubeconfig", str(missing)])
    assert result.exit_code == 1
    assert result.output.strip().startswith("error:")
    assert result.output.strip().count("\n") == 0


def test_the_seat_view_per_pool(world: dict[str, str], kube: Any) -> None:
    api = KubeHTTP(kube.url)
    since = (datetime.now(UTC) - timedelta(minutes=3)).strftime("%Y-%m-%dT%H:%M:%SZ")
    wait = json.dumps({"pod": "uid-1", "since": since, "victim": f"{NS}/running"})
    api.merge_patch(set_path(NS, "waking"), {"metadata": {"annotations": {ANN_SEAT_WAIT: wait}}})
    api.merge_patch(
        set_path(NS, "running"), {"metadata": {"annotations": {ANN_RECLAIMABLE_AFTER: "1h"}}}
    )

    result = CliRunner().invoke(command, ["--seats", "-o", "json"], env=world)
    assert result.exit_code == 0, result.output
    [pool] = json.loads(result.output)
    # running-0 and stale-0 on node-1, waking-0 on node-2.
    assert (pool["pool"], pool["used"]) == ("default", 3)
    [waiting] = pool["waiting"]
    assert waiting["set"] == f"{NS}/waking" and 175 <= waiting["age_seconds"] <= 240
    assert waiting["victim"] == f"{NS}/running"
    [rec] = pool["reclaimable"]
    assert rec["set"] == f"{NS}/running" and rec["eligible"] is False
    assert rec["reclaimable_after_seconds"] == 3600

    table = CliRunner().invoke(command, ["--namespace", NS], env=world)
    assert "pool default: 3 seat(s) used" in table.output
    assert f"{NS}/waking  waiting 3m" in table.output
    assert f"{NS}/running  idle " in table.output and "reclaimable after 1h" in table.output
