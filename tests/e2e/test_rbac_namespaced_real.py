"""Reads confined to COCOON_NAMESPACES, on a real kube-apiserver.

The function identities get exactly `rbac.yaml` plus, for `NS` only, the per-namespace
read and write bindings (`namespace-read-binding.yaml`, `namespace-binding.yaml`): no
cluster-wide binding at all. They work in `NS` and get 403 anywhere else.
"""

from __future__ import annotations

import dataclasses
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from devstack.realkube import PROJECT_ID, REPO_ROOT
from shared import constants as k
from shared.clients.kube import KubeClient
from shared.durations import format_rfc3339
from shared.errors import AccessDenied
from shared.names import SetRef
from tests.fixtures.cocoon_objects import NS, SET, set_manifest
from tests.fixtures.reconcile_world import World

pytestmark = pytest.mark.e2e

OTHER = "team-elsewhere"
K8S = REPO_ROOT / "infra" / "k8s"


def _manifest(name: str, namespace: str) -> str:
    text = (K8S / name).read_text().replace("PROJECT_ID", PROJECT_ID)
    return text.replace("NAMESPACE", namespace)


@pytest.fixture
def world(real_kube_session: Any, registry: Any, tmp_path: Path) -> Iterator[World]:
    real = real_kube_session
    real.reset()
    # The session's server is shared: another module's cluster-wide read binding
    # (gke-binding.yaml) would make every namespace readable here.
    real.request(
        "DELETE",
        "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings/cocoon-hibernation-functions",
    )
    real.apply_manifest((K8S / "rbac.yaml").read_text())
    admin = real.write_kubeconfig(tmp_path / "admin.kubeconfig")
    w = World(kube=real, registry=registry, kubeconfig=admin, prefix=f"n{uuid.uuid4().hex[:10]}")
    w.ensure_namespace(NS)
    w.ensure_namespace(OTHER)
    real.apply_manifest(_manifest("namespace-read-binding.yaml", NS))
    real.apply_manifest(_manifest("namespace-binding.yaml", NS))
    w.settings = dataclasses.replace(w.settings, namespaces=frozenset({NS}))
    try:
        yield w
    finally:
        w.close()


def _as(real: Any, tmp_path: Path, identity: str) -> KubeClient:
    path = real.write_kubeconfig(tmp_path / f"{identity}.kubeconfig", identity=identity)
    return KubeClient.from_kubeconfig(str(path))


@pytest.mark.parametrize("identity", ["release", "wake", "sweep", "ingest"])
def test_reads_in_a_listed_namespace_and_403_elsewhere(
    real_kube_session: Any, world: World, tmp_path: Path, identity: str
) -> None:
    kube = _as(real_kube_session, tmp_path, identity)
    world.create_set(set_manifest(namespace=NS, suspend=True, phase="Suspended"))
    world.create_set(set_manifest(namespace=OTHER, suspend=True, phase="Suspended"))

    assert kube.get_set(SetRef(NS, SET)) is not None
    assert [cs.name for page in kube.list_sets(NS) for cs in page] == [SET]
    assert kube.list_pods(SetRef(NS, SET)) == []
    assert list(kube.watch_pod(NS, f"{SET}-0", timeout=0.5)) is not None

    for read in (
        lambda: kube.get_set(SetRef(OTHER, SET)),
        lambda: list(kube.list_sets(OTHER)),
        lambda: kube.list_pods(SetRef(OTHER, SET)),
    ):
        with pytest.raises(AccessDenied) as refused:
            read()
        assert refused.value.namespace == OTHER
    with pytest.raises(AccessDenied) as cluster_wide:
        list(kube.list_sets(None))
    assert cluster_wide.value.namespace == ""


def test_a_sweep_limited_to_the_allowlist_runs_on_namespaced_reads_alone(
    real_kube_session: Any, world: World, tmp_path: Path
) -> None:
    from functions.sweep import run_sweep

    old = format_rfc3339(datetime.now(UTC) - timedelta(hours=2))
    idle = {k.ANN_IDLE_TIMEOUT: "30m", k.ANN_LAST_ACTIVITY: old}
    world.create_set(set_manifest(namespace=NS, suspend=None, phase="Running", annotations=idle))
    world.create_set(set_manifest(namespace=OTHER, suspend=None, phase="Running", annotations=idle))
    summary = run_sweep(
        settings=world.settings,
        dry_run=False,
        kube=_as(real_kube_session, tmp_path, "sweep"),
        registry=world.snapshots,
        now=datetime.now(UTC) + timedelta(hours=3),
    )
    assert summary.errors == 0
    assert world.get_set(NS, SET)["spec"]["suspend"] is True
    assert world.get_set(OTHER, SET)["spec"].get("suspend") is None
