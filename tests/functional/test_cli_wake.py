"""`wake` and `suspend` from a terminal, against a real API (embedded) and a real registry.

No functions and no simulated cluster run here: the command itself must make
the desired state durable and take the wake's first steps (SPEC §5), exactly
as the wake target does for a wake-request CloudEvent.
"""

from __future__ import annotations

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
    push_image(registry.url, f"{PREFIX}/vk-{NS}-agent-0", k.TAG_HIBERNATE)

    result = CliRunner().invoke(wake, [f"{NS}/agent"], env=env)

    assert result.exit_code == 0, result.output
    assert f"{NS}/agent: wake requested" in result.output
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
    # retain *while released* still carries the hint and is woken: SPEC §5.)
    _released(KubeHTTP(kube.url), "kept", policy="retain", hint=False)
    result = CliRunner().invoke(wake, [f"{NS}/kept"], env=env)
    assert result.exit_code == 1
    assert result.output.count("\n") == 1
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
