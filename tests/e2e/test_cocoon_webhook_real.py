"""A wake through cocoon-webhook's admission chain, on the real kube-apiserver.

cocoon-webhook refuses every cocoon pod whose creator is not in its POD_CREATORS
(default: the operator's service account), and every spec change of a CocoonSet that
breaks its rules. The webhook here (tests/fixtures/cocoon_webhook.py) applies those
documented rules and is registered as cocoon-webhook registers itself; the real API
server calls it, authenticates the functions and renders the refusal.

Real-only: the embedded API (devstack/kubeapi) runs no admission webhooks.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from devstack.realkube import FUNCTION_USERS
from shared import admission as adm
from shared import constants as k
from shared.durations import format_rfc3339
from tests.e2e.test_real_cluster import (  # the real cluster's fixtures and helpers
    NS,
    POD,
    SET,
    _changed,
    _hibernated,
    _kubelet_finalizes,
    _pod,
    _post,
    _pushed,
    _report_live,
    _wake,
    as_target,
    real,
    rworld,
)
from tests.fixtures.cocoon_objects import set_manifest
from tests.fixtures.cocoon_webhook import CocoonWebhook, username
from tests.fixtures.reconcile_world import World

pytestmark = pytest.mark.e2e
__all__ = ["as_target", "real", "rworld"]  # fixtures, imported for pytest


@pytest.fixture
def webhook(real: Any) -> Iterator[CocoonWebhook]:
    hook = CocoonWebhook()
    try:
        yield hook
    finally:
        hook.unregister(real)
        hook.stop()


def _refusals(world: World) -> list[Any]:
    return [e for e in world.events(NS) if e.reason == k.REASON_WRITE_REFUSED]


def _released(world: World, as_target: Callable[[str], Any]) -> None:
    assert _post(as_target("release"), _pushed(world)).status_code == 200
    _kubelet_finalizes(world)
    assert _pod(world) is None


def test_wake_is_refused_once_with_the_default_pod_creators_and_lands_with_the_documented_one(
    real: Any, rworld: World, as_target: Callable[[str], Any], webhook: CocoonWebhook
) -> None:
    _hibernated(rworld)  # the operator's part, before the webhook (the test is its creator)
    _released(rworld, as_target)
    webhook.register(real, NS)
    wake_user = username(real, "wake")
    assert wake_user == FUNCTION_USERS["wake"]
    before = len(webhook.seen("/mutate"))

    # Default POD_CREATORS: the restore pod is refused by the webhook, the wake acks.
    assert _post(as_target("wake"), _wake()).status_code == 200
    assert _pod(rworld) is None
    (warning,) = _refusals(rworld)
    assert warning.type == "Warning"
    assert adm.POD_WEBHOOK in warning.message
    assert adm.creator_message(wake_user) in warning.message
    assert f"POD_CREATORS={adm.DEFAULT_POD_CREATORS},{wake_user}" in warning.message
    assert rworld.get_set(NS, SET)["status"]["phase"] == "Waking"

    # A redelivery, then the sweep's pace: no second Warning, one create per attempt.
    assert _post(as_target("wake"), _changed()).status_code == 200
    assert len(_refusals(rworld)) == 1
    creates = [
        r for r in webhook.seen("/mutate")[before:] if r["userInfo"]["username"] == wake_user
    ]
    assert len(creates) == 2, "each invocation tries the create once: no retry storm"

    # The documented setting: the operator's account plus every function's username.
    users = [username(real, role) for role in ("release", "wake", "sweep", "ingest")]
    webhook.pod_creators = adm.parse_creators(",".join([adm.DEFAULT_POD_CREATORS, *users]))
    assert _post(as_target("wake"), _changed()).status_code == 200
    pod = _pod(rworld)
    assert pod is not None and pod.metadata.annotations[k.ANN_RESTORE] == k.TRUE
    _report_live(rworld)  # back on node-a, the node it hibernated on: warm
    assert _post(as_target("wake"), _changed()).status_code == 200
    completed = [e for e in rworld.events(NS) if e.reason == k.REASON_WAKE_COMPLETED]
    assert completed and k.PLACEMENT_HINT_NODE in completed[0].message
    assert len(_refusals(rworld)) == 1
    assert pod.metadata.name == POD


def test_unsuspend_of_a_set_breaking_the_webhook_rules_is_refused_once(
    real: Any, rworld: World, as_target: Callable[[str], Any], webhook: CocoonWebhook
) -> None:
    # Predates the webhook: a clone-mode image with a registry port (docs/validation.md).
    bad = "registry.local:5000/agent:1"
    rworld.create_set(
        set_manifest(suspend=True, phase="Suspended", hint="node-a", agent={"image": bad})
    )
    webhook.register(real, NS)
    # Metadata-only writes pass (spec unchanged): the set stays deletable and annotatable.
    rworld.patch_set(NS, SET, {"metadata": {"annotations": {"x": "y"}}})

    assert _post(as_target("wake"), _wake()).status_code == 200
    assert rworld.get_set(NS, SET)["spec"]["suspend"] is True
    (warning,) = _refusals(rworld)
    assert adm.COCOONSET_WEBHOOK in warning.message
    assert f'spec.agent.image "{bad}" must be repo[:tag] when mode is clone' in warning.message
    assert "cocoon-hibernation validate" in warning.message
    assert _post(as_target("wake"), _wake()).status_code == 200
    assert len(_refusals(rworld)) == 1


def test_the_sweeps_idle_suspend_refused_by_the_webhook_is_told_once(
    real: Any, rworld: World, webhook: CocoonWebhook, tmp_path: Path
) -> None:
    from functions.sweep import run_sweep
    from shared.clients.kube import KubeClient

    old = format_rfc3339(datetime.now(UTC) - timedelta(hours=2))
    rworld.create_set(
        set_manifest(
            suspend=None,
            phase="Running",
            agent={"image": "registry.local:5000/agent:1"},
            annotations={k.ANN_IDLE_TIMEOUT: "30m", k.ANN_LAST_ACTIVITY: old},
        )
    )
    webhook.register(real, NS)
    sweeper = KubeClient.from_kubeconfig(
        str(real.write_kubeconfig(tmp_path / "sweep.kubeconfig", identity="sweep"))
    )
    for _ in range(2):  # two ticks: the same refusal is told once
        run_sweep(
            settings=rworld.settings,
            dry_run=False,
            kube=sweeper,
            registry=rworld.snapshots,
            now=datetime.now(UTC) + timedelta(hours=3),
        )
    assert rworld.get_set(NS, SET)["spec"].get("suspend") is not True
    (warning,) = _refusals(rworld)
    assert warning.message.startswith("idle suspend refused by the admission webhook")
    assert adm.COCOONSET_WEBHOOK in warning.message
