"""VM identity beside today's cocoonstack, end to end (docs/compatibility.md).

Through functions-framework, the API server (embedded and real) and a real Distribution
registry; the test plays vk-cocoon and the user. Each release and wake runs under both
naming generations (v0.3.0's legacy names and today's hashed ones), because a cluster
mid-upgrade has both.
"""

from __future__ import annotations

from typing import Any

import pytest

from shared import constants as k
from shared.names import legacy_vm_name, vm_name
from tests.e2e.test_release_e2e import gone_or_terminating, post, pushed_event
from tests.e2e.test_wake_e2e import main_pod, report_live, wake_event
from tests.fixtures.cocoon_objects import NS, SET, pod_manifest, set_manifest
from tests.fixtures.reconcile_world import World

pytestmark = pytest.mark.e2e

GENERATIONS = {"hashed": vm_name(NS, SET, 0), "legacy": legacy_vm_name(NS, SET, 0)}
IMAGE = "ghcr.io/acme/agent:1"


def suspended_with(world: World, vm: str, *, namespace: str = NS, name: str = SET) -> Any:
    """A release set just suspended whose main VM (named `vm`) vk-cocoon hibernated."""
    world.create_set(set_manifest(name=name, namespace=namespace, suspend=False, phase="Running"))
    world.patch_set(namespace, name, {"spec": {"suspend": True}})
    cs = world.set_status(namespace, name, {"phase": "Suspending"})
    world.create_pod(
        pod_manifest(
            name=f"{name}-0",
            namespace=namespace,
            set_name=name,
            vm=vm,
            hibernate=True,
            state="hibernated",
            generation=cs["metadata"]["generation"],
            annotations={k.ANN_IMAGE: IMAGE},
        ),
        owner=cs,
    )
    return cs


def released_with(world: World, vm: str, **annotations: str) -> Any:
    """A set whose seat was released under `vm`: the stash and hint record it."""
    ann = {k.ANN_DELETE_VM_NAMES: vm, k.ANN_HIBERNATED_ON_NODE: "node-a", **annotations}
    cs = world.create_set(set_manifest(suspend=True, phase="Suspended", annotations=ann))
    world.push_snapshot(vm)
    return cs


def warnings(world: World, namespace: str, reason: str) -> list[Any]:
    return [e for e in world.events(namespace) if e.reason == reason and e.type == "Warning"]


@pytest.mark.parametrize("generation", GENERATIONS)
def test_a_push_frees_the_seat_and_records_the_image(
    world: World, function_app: Any, generation: str
) -> None:
    vm = GENERATIONS[generation]
    suspended_with(world, vm)
    digest = world.push_snapshot(vm)

    assert (
        post(function_app("release"), pushed_event(world, vm=vm, digest=digest)).status_code == 200
    )

    assert gone_or_terminating(world)
    annotations = world.get_set(NS, SET)["metadata"]["annotations"]
    assert annotations[k.ANN_HIBERNATED_IMAGE] == IMAGE
    assert annotations[k.ANN_DELETE_VM_NAMES] == vm


@pytest.mark.parametrize("generation", GENERATIONS)
def test_a_wake_restores_and_drops_the_tag_under_the_recorded_name(
    world: World, function_app: Any, generation: str
) -> None:
    vm = GENERATIONS[generation]
    released_with(world, vm, **{k.ANN_HIBERNATED_IMAGE: IMAGE})
    wake = function_app("wake")

    assert post(wake, wake_event()).status_code == 200
    pod = main_pod(world)
    assert pod.metadata.annotations[k.ANN_RESTORE] == k.TRUE
    assert pod.metadata.annotations[k.ANN_VM_NAME] == vm

    report_live(world)
    assert post(wake, wake_event()).status_code == 200
    # No stale `:hibernate` for vk-cocoon's evidence-based restore to boot from later.
    assert not world.snapshot_present(vm)
    annotations = world.get_set(NS, SET)["metadata"]["annotations"]
    assert k.ANN_HIBERNATED_ON_NODE not in annotations
    assert k.ANN_HIBERNATED_IMAGE not in annotations
    # Who asked is named where the wake lands (here the platform in front of the
    # per-target function authenticated the caller), then forgotten.
    (done,) = [e for e in world.events(NS) if e.reason == k.REASON_WAKE_COMPLETED]
    assert "requested by platform:platform" in done.message
    assert k.ANN_WAKE_REQUESTED_BY not in annotations


def test_after_an_image_change_a_wake_never_creates_a_restore_pod(
    world: World, function_app: Any
) -> None:
    vm = GENERATIONS["hashed"]
    released_with(world, vm, **{k.ANN_HIBERNATED_IMAGE: "ghcr.io/acme/agent:0"})

    assert post(function_app("wake"), wake_event()).status_code == 200

    assert main_pod(world) is None  # the normal flow boots the new image fresh
    assert not world.snapshot_present(vm)
    annotations = world.get_set(NS, SET)["metadata"]["annotations"]
    assert k.ANN_HIBERNATED_ON_NODE not in annotations
    assert k.ANN_HIBERNATED_IMAGE not in annotations
    # No WakeCompleted follows a fresh boot: the requester is forgotten with the record,
    # or the next wake the operator completes alone would be booked to this caller.
    assert k.ANN_WAKE_REQUESTED_BY not in annotations
    (event,) = warnings(world, NS, k.REASON_SNAPSHOT_DISCARDED)
    assert "ghcr.io/acme/agent:0" in event.message


def test_two_sets_sharing_a_legacy_name_are_never_released(world: World, function_app: Any) -> None:
    # `vk-a-b-c-0` is both a/b-c and a-b/c under v0.3.0's naming.
    shared = "vk-a-b-c-0"
    suspended_with(world, shared, namespace="a", name="b-c")
    suspended_with(world, shared, namespace="a-b", name="c")
    digest = world.push_snapshot(shared)
    release = function_app("release")

    assert post(release, pushed_event(world, vm=shared, digest=digest)).status_code == 200
    assert post(release, pushed_event(world, vm=shared, digest=digest)).status_code == 200

    for ns, name in (("a", "b-c"), ("a-b", "c")):
        assert [p.metadata.name for p in world.pods(ns, name)] == [f"{name}-0"]
        assert world.pods(ns, name)[0].metadata.deletion_timestamp is None
        (event,) = warnings(world, ns, k.REASON_VM_NAME_SHARED)  # once, however often pushed
        assert "a/b-c" in event.message and "a-b/c" in event.message


def test_a_released_set_whose_snapshot_is_gone_gets_a_warning_and_no_pod(
    world: World, function_app: Any
) -> None:
    vm = GENERATIONS["hashed"]
    released_with(world, vm)
    world.snapshots.drop_snapshot(vm)
    wake = function_app("wake")

    assert post(wake, wake_event()).status_code == 200
    assert post(wake, wake_event()).status_code == 200

    assert main_pod(world) is None
    (event,) = warnings(world, NS, k.REASON_SNAPSHOT_MISSING)
    assert vm in event.message
