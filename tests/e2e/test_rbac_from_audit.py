"""RBAC from evidence: what the functions really asked the API server for, from its audit log.

This module's kube-apiserver logs every request of the function identities
(Metadata level). The release, wake, watch and sweep flows of test_real_cluster.py
and the in-cluster caller's TokenReview (test_cluster_callers_real.py) run here
again, unchanged, plus a sweep that reads PodMetrics; the last test holds
the rules of `infra/k8s/rbac.yaml` equal to the (group, resource, verb) triples those
requests used: nothing unused, nothing missing. Run the module whole: the last test
reads what the others left in the log.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import yaml

from devstack.realkube import FUNCTION_USERS, REPO_ROOT
from shared import constants as k
from shared.durations import format_rfc3339
from tests.e2e import test_cluster_callers_real as callers
from tests.e2e import test_real_cluster as flows
from tests.fixtures.cocoon_objects import NS, SET, pod_manifest, set_manifest
from tests.fixtures.reconcile_world import World

pytestmark = pytest.mark.e2e

# The fixtures and flows of test_real_cluster.py, run again here against this module's server.
real = flows.real
rworld = flows.rworld
as_target = flows.as_target
test_flow_release_then_wake = flows.test_release_then_wake_with_exactly_the_manifests_rights
test_flow_push_watches_the_pod = (
    flows.test_a_push_that_beats_the_report_watches_the_pod_with_exactly_the_manifests_rights
)
test_flow_sweep_idle = flows.test_sweep_idle_suspends_with_exactly_the_manifests_rights
test_flow_cluster_caller = (
    callers.test_a_listed_service_account_with_the_sinks_audience_wakes_and_nothing_else_opens
)
serve_as_function = callers.serve_as_function

Rule = tuple[str, str, str]  # (API group, resource[/subresource], verb)

# Rights no request carries, so no audit event shows: the API server checks them itself.
NOT_REQUESTED: dict[Rule, str] = {
    ("cocoonset.cocoonstack.io", "cocoonsets/finalizers", "update"): (
        "OwnerReferencesPermissionEnforcement asks the authorizer for it when the restored "
        "pod's ownerReference sets blockOwnerDeletion (the flow's pod create proves it)"
    ),
}


@pytest.fixture(scope="module")
def real_kube_session() -> Iterator[Any]:
    """This module's own control plane: the session's one keeps no audit log."""
    from devstack.realkube import ControlPlaneUnavailable, RealKube

    try:
        kube = RealKube(audit_log=True)
    except ControlPlaneUnavailable as e:
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(f"CI=true and the real control plane is unavailable: {e}", pytrace=False)
        pytest.skip(f"real kube-apiserver unavailable: {e}")
    kube.start()
    yield kube
    kube.stop()


def test_flow_sweep_reads_pod_metrics(real: Any, rworld: World, tmp_path: Path) -> None:
    """A set idle by CPU: the sweep asks metrics.k8s.io (absent here, answered 404)."""
    from functions.sweep import run_sweep
    from shared.clients.kube import KubeClient

    now = format_rfc3339(datetime.now(UTC))
    rworld.create_set(
        set_manifest(
            suspend=None,
            phase="Running",
            annotations={
                k.ANN_IDLE_TIMEOUT: "30m",
                k.ANN_LAST_ACTIVITY: now,
                k.ANN_IDLE_CPU_BELOW: "50m",
            },
        )
    )
    sweeper = KubeClient.from_kubeconfig(
        str(real.write_kubeconfig(tmp_path / "sweep.kubeconfig", identity="sweep"))
    )
    run_sweep(
        settings=rworld.settings,
        dry_run=False,
        kube=sweeper,
        registry=rworld.snapshots,
        now=datetime.now(UTC) + timedelta(minutes=1),
    )
    assert rworld.get_set(NS, SET)["spec"].get("suspend") is None


def test_flow_a_hint_beside_a_live_main_pod_rereads_it(
    rworld: World, as_target: Callable[[str], Any]
) -> None:
    """The stash wrote the hint, the delete was lost, the user woke it: GET the pod itself."""
    cs = rworld.create_set(set_manifest(suspend=False, phase="Running"))
    rworld.create_pod(pod_manifest(generation=cs["metadata"]["generation"]), owner=cs)
    rworld.patch_set(NS, SET, {"metadata": {"annotations": {k.ANN_HIBERNATED_ON_NODE: "node-a"}}})
    rworld.set_status(NS, SET, {"phase": "Suspended"})
    assert flows._post(as_target("wake"), flows._changed()).status_code == 200
    annotations = rworld.get_set(NS, SET)["metadata"].get("annotations", {})
    assert k.ANN_HIBERNATED_ON_NODE not in annotations


def _used(events: list[dict[str, Any]]) -> dict[Rule, set[str]]:
    """(group, resource, verb) -> the namespaces it was used in ("" = cluster scope)."""
    users = set(FUNCTION_USERS.values())
    used: dict[Rule, set[str]] = {}
    for event in events:
        ref = event.get("objectRef")
        if event.get("user", {}).get("username") not in users or not ref:
            continue
        resource = ref["resource"] + (f"/{ref['subresource']}" if ref.get("subresource") else "")
        rule = (ref.get("apiGroup", ""), resource, event["verb"])
        used.setdefault(rule, set()).add(ref.get("namespace", ""))
    return used


def _granted() -> set[Rule]:
    docs = yaml.safe_load_all((REPO_ROOT / "infra/k8s/rbac.yaml").read_text(encoding="utf-8"))
    roles = [d for d in docs if d["metadata"]["name"].startswith("cocoon-hibernation")]
    return {
        (group, resource, verb)
        for role in roles
        for rule in role["rules"]
        for group in rule["apiGroups"]
        for resource in rule["resources"]
        for verb in rule["verbs"]
    }


def test_the_shipped_rbac_grants_exactly_what_the_flows_used(real_kube_session: Any) -> None:
    # The log backend writes as requests complete; let the last ones land.
    events: list[dict[str, Any]] = []
    for _ in range(20):
        fresh = real_kube_session.audit_log_events()
        if fresh and len(fresh) == len(events):
            break
        events = fresh
        time.sleep(0.2)
    used = _used(events)
    assert used, "no request of a function identity was logged: run the module whole"
    granted = _granted()
    missing = sorted(set(used) - granted)
    unused = sorted(granted - set(used) - set(NOT_REQUESTED))
    assert not missing and not unused, (
        f"used but not granted: {missing}\ngranted but never used: {unused}\nused: {sorted(used)}"
    )
    assert set(NOT_REQUESTED) <= granted
    # Without COCOON_NAMESPACES the sweep lists cluster-wide (test_rbac_namespaced_real.py
    # shows an allowlist needs no such request).
    scopes = {rule: sorted(spaces) for rule, spaces in sorted(used.items())}
    print(f"used, with namespaces ('' = cluster scope): {scopes}")
