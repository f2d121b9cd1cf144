"""The reads of the release and the wake, bounded as docs/reads.md says (both backends).

- the pods of a set are listed not older than the set as read: every pod write before
  the set's resourceVersion is in the answer, however new etcd's revision is;
- a bound the server cannot reach falls back to a consistent list (logged), once;
- the reconciler sends that bound (the set's version as read, and for a wake request
  the version before its own unsuspend), and no more requests than before.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import parse_qs

import pytest

from shared import constants as k
from shared.clients.kube import KubeClient
from shared.names import SetRef
from tests.e2e.test_release_e2e import POD, hibernated_main, post, pushed_event, suspended_set
from tests.e2e.test_wake_e2e import released_set, wake_event
from tests.fixtures.cocoon_objects import NS, SET, VM0, pod_manifest, set_manifest
from tests.fixtures.reconcile_world import World

pytestmark = pytest.mark.e2e

REF = SetRef(NS, SET)
PODS_PATH = f"/api/v1/namespaces/{NS}/pods"


@pytest.fixture
def client(world: World) -> KubeClient:
    c: KubeClient = world.client
    c.reset_requests()
    return c


def test_pods_not_older_than_the_set_include_every_pod_write_before_it(
    world: World, client: KubeClient
) -> None:
    cs = world.create_set(set_manifest(phase=None))
    world.create_pod(pod_manifest(), owner=cs)
    world.annotate_pod(NS, POD, {"probe": "before-the-set"})
    world.create_pod(pod_manifest(name=f"{SET}-1", slot="1", role=k.ROLE_SUB_AGENT), owner=cs)
    bound = world.patch_set(NS, SET, {"metadata": {"annotations": {"x": "1"}}})
    # Writes to other resources afterwards: etcd's revision moves past the bound.
    world.create_set(set_manifest(name="other", phase=None))
    world.patch_set(NS, "other", {"metadata": {"annotations": {"y": "2"}}})

    pods = client.list_pods(REF, not_older_than=bound["metadata"]["resourceVersion"])

    assert sorted(p.name for p in pods) == [POD, f"{SET}-1"]
    main = next(p for p in pods if p.name == POD)
    assert main.metadata.annotations["probe"] == "before-the-set"
    assert client.requests == 1


def test_a_bound_the_server_has_not_reached_falls_back_to_a_consistent_list(
    world: World, client: KubeClient, capsys: pytest.CaptureFixture[str]
) -> None:
    cs = world.create_set(set_manifest(phase=None))
    world.create_pod(pod_manifest(), owner=cs)
    future = str(int(cs["metadata"]["resourceVersion"]) + 10_000_000)

    pods = client.list_pods(REF, not_older_than=future)

    assert [p.name for p in pods] == [POD]
    # The bounded LIST (the server already waited for it: not repeated), then one
    # consistent LIST; the fallback is logged, not silent.
    assert client.requests == 2
    assert "bounded LIST answered too large" in capsys.readouterr().out


def _pod_lists(world: World) -> list[dict[str, list[str]]]:
    return [
        parse_qs(r["query"])
        for r in world.api_requests()
        if r["method"] == "GET" and r["path"] == PODS_PATH
    ]


@pytest.mark.embedded_only("asserts on the emulator's request log")
def test_the_release_lists_pods_not_older_than_the_set_it_read(
    world: World, function_app: Any
) -> None:
    cs = suspended_set(world)
    hibernated_main(world, cs)
    world.push_snapshot(VM0)
    set_rv = world.get_set(NS, SET)["metadata"]["resourceVersion"]
    world.reset_log()

    assert post(function_app("release"), pushed_event(world)).status_code == 200

    lists = _pod_lists(world)
    assert lists == [
        {
            "labelSelector": [f"{k.LABEL_SET_NAME}={SET}"],
            "resourceVersion": [set_rv],
            "resourceVersionMatch": ["NotOlderThan"],
        }
    ]


@pytest.mark.embedded_only("asserts on the emulator's request log")
def test_a_wake_request_bounds_its_pod_list_by_the_set_before_its_own_unsuspend(
    world: World, function_app: Any
) -> None:
    released_set(world)
    before = world.get_set(NS, SET)["metadata"]["resourceVersion"]
    world.reset_log()

    assert post(function_app("wake"), wake_event()).status_code == 200

    lists = [q for q in _pod_lists(world) if "resourceVersionMatch" in q]
    assert lists[0]["resourceVersion"] == [before]
    assert lists[0]["resourceVersionMatch"] == ["NotOlderThan"]
    unsuspend = next(r for r in world.api_requests() if r["method"] == "PATCH")
    assert unsuspend["status"] == 200
    assert world.get_set(NS, SET)["spec"]["suspend"] is False
