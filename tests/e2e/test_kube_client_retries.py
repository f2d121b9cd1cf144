"""No retry happens behind our back: the kubernetes client sends each write once.

Through a forwarding proxy (tests/fixtures/faultproxy.py) in front of the
embedded API, so "applied, then the answer lost" is real: the server applied
the request and the connection died before the answer. Before the client's
urllib3 retries were turned off, a DELETE was silently re-sent and answered
409 (its resourceVersion precondition), which decided our semantics for us.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from shared.clients.kube import READ_ATTEMPTS, KubeClient
from shared.errors import TransientError
from shared.names import SetRef
from tests.e2e.test_release_e2e import hibernated_main, suspended_set
from tests.fixtures.cocoon_objects import NS, SET
from tests.fixtures.faultproxy import FaultProxy
from tests.fixtures.reconcile_world import World

# Faults are injected by a forwarding proxy that reads and rewrites HTTP; the
# real kube-apiserver is https-only, so these run against the embedded API.
pytestmark = [
    pytest.mark.e2e,
    pytest.mark.embedded_only("the fault proxy speaks plain HTTP; the real server is TLS-only"),
]

POD = f"{SET}-0"


@pytest.fixture
def proxied(world: World, tmp_path: Path) -> Any:
    proxy = FaultProxy(world.kube.url).start()
    config = yaml.safe_load(world.kubeconfig.read_text())
    config["clusters"][0]["cluster"]["server"] = proxy.url
    path = tmp_path / "kubeconfig"
    path.write_text(yaml.safe_dump(config))
    try:
        yield proxy, KubeClient.from_kubeconfig(str(path))
    finally:
        proxy.stop()


def test_a_delete_whose_answer_is_lost_is_sent_once(world: World, proxied: Any) -> None:
    proxy, client = proxied
    cs = suspended_set(world)
    pod = hibernated_main(world, cs)
    world.reset_log()
    proxy.arm("lost", match=lambda m, p: m == "DELETE")

    with pytest.raises(TransientError):
        client.delete_pod(
            NS, POD, uid=pod.metadata.uid, resource_version=pod.metadata.resource_version
        )

    deletes = [r for r in world.api_requests() if r["method"] == "DELETE"]
    assert len(deletes) == 1 and deletes[0]["status"] == 200  # applied, once
    assert client.requests == 1


def test_a_patch_cut_before_the_server_is_not_resent(world: World, proxied: Any) -> None:
    proxy, client = proxied
    suspended_set(world)
    proxy.arm("cut", match=lambda m, p: m == "PATCH")

    with pytest.raises(TransientError):
        client.patch_set(SetRef(NS, SET), {"metadata": {"annotations": {"a": "b"}}})

    assert [r.method for r in proxy.requests()] == ["PATCH"]
    assert "a" not in (world.get_set(NS, SET)["metadata"].get("annotations") or {})


def test_reads_are_retried_explicitly_and_bounded(world: World, proxied: Any) -> None:
    proxy, client = proxied
    suspended_set(world)

    proxy.arm("5xx", match=lambda m, p: m == "GET", times=READ_ATTEMPTS - 1)
    assert client.get_set(SetRef(NS, SET)) is not None  # the last attempt answers
    assert client.requests == READ_ATTEMPTS

    client.reset_requests()
    proxy.arm("cut", match=lambda m, p: m == "GET", times=None)
    with pytest.raises(TransientError):
        client.get_set(SetRef(NS, SET))
    assert client.requests == READ_ATTEMPTS  # never more
