"""A stateful model test of release and wake under faults, duplicates and the sweep.

Hypothesis' RuleBasedStateMachine drives one release-policy set through the
real reconciler (`reconcile_set`, `request_wake`, `run_sweep`) and the real
clients, against the embedded Kubernetes API (behind the fault proxy of
tests/fixtures/faultproxy.py) and a real Distribution registry. Its rules:

- deliver an event to `release` or `wake`, or a user's wake request;
- inject a fault (500 / cut / applied-then-answer-lost) into the n-th next write;
- fire a duplicate concurrently (two reconciles at once);
- run a sweep tick;
- advance the world: the user suspends or unsuspends, vk-cocoon hibernates and
  pushes the snapshot, the scheduler binds and vk-cocoon makes the restored VM
  live, the kubelet finishes a terminating pod.

After every step the safety invariants hold (never two mains, no delete before
the stash, no tag dropped before a restored VM is live, no Event or count
beyond what happened); at the end, with faults off and the world let run,
everything converges and every owed report is out exactly once (counts within
the window of docs/how-it-works.md#failure-semantics).

Bounded and replayable: `derandomize=True` fixes the examples (a failure
replays on every run), 200 examples of at most 8 steps. What is faked and why:
the Pub/Sub publisher (a recorder; no emulator can run here).
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import threading
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule, run_state_machine_as_test

from shared import constants as k
from shared import log
from shared.config import LogFormat, OperatorMode, Settings, parse_registry_base
from shared.errors import CocoonError
from shared.names import SetRef
from tests.fixtures.cocoon_objects import NS, SET, VM0, pod_manifest, set_manifest
from tests.fixtures.faultproxy import KINDS, FaultProxy
from tests.fixtures.reconcile_world import World

# Faults are injected by a forwarding proxy that reads and rewrites HTTP; the
# real kube-apiserver is https-only, so these run against the embedded API.
pytestmark = [
    pytest.mark.e2e,
    pytest.mark.embedded_only("the fault proxy speaks plain HTTP; the real server is TLS-only"),
]

POD = f"{SET}-0"
REF = SetRef(NS, SET)
EXAMPLES = int(os.environ.get("COCOON_MODEL_EXAMPLES", "200"))
STEPS = 8


class RecordingPublisher:
    """Stands in for the Pub/Sub publisher (the LifecyclePublisher port)."""

    def __init__(self) -> None:
        self.events: list[dict[str, Any]] = []
        self._lock = threading.Lock()

    def publish(self, data: bytes, *, ordering_key: str, attributes: Any) -> str:
        with self._lock:
            self.events.append(json.loads(data))
            return str(len(self.events))


class Env:
    """What every example shares: the world, the proxy, the clients."""

    def __init__(self, world: World, tmp: Path) -> None:
        from shared.clients.kube import KubeClient
        from shared.clients.registry import RegistryClient

        self.world = world
        self.proxy = FaultProxy(world.kube.url).start()
        config = yaml.safe_load(world.kubeconfig.read_text())
        config["clusters"][0]["cluster"]["server"] = self.proxy.url
        path = tmp / "kubeconfig"
        path.write_text(yaml.safe_dump(config))
        self.kubeconfig = str(path)
        self.client = KubeClient.from_kubeconfig(self.kubeconfig)
        self._registry_client = RegistryClient
        self.registry: Any = None
        self.settings: Settings | None = None

    def new_prefix(self) -> None:
        from shared.clients.registry import RegistryClient

        if self.registry is not None:
            self.registry.close()
        prefix = f"m{uuid.uuid4().hex[:10]}"
        self.world.prefix = prefix
        self.settings = Settings(
            kubeconfig=self.kubeconfig,
            registry_base=parse_registry_base(f"{self.world.registry.host}/{prefix}"),
            registry_insecure=True,
            operator=OperatorMode.ABSENT,  # the simulator's operator never releases
        )
        self.world.settings = self.settings
        self.world.snapshots.close()
        self.world.snapshots = RegistryClient(self.settings)
        self.registry = RegistryClient(self.settings)

    def close(self) -> None:
        self.proxy.stop()
        if self.registry is not None:
            self.registry.close()


def _metric_total(out: str, metric: str) -> int:
    total = 0
    for line in out.splitlines():
        try:
            rec = json.loads(line)
        except ValueError:
            continue
        if isinstance(rec, dict) and rec.get("metric") == metric:
            total += int(rec.get("value", 1))
    return total


class Model(RuleBasedStateMachine):
    env: Env  # set by the test before the machine runs

    def __init__(self) -> None:
        super().__init__()
        env = self.env
        self.w = env.world
        env.proxy.reset()
        self.w.kube.reset()
        env.new_prefix()
        self.logs = io.StringIO()
        log.configure(LogFormat.JSON, self.logs)
        self.publisher = RecordingPublisher()
        manifest = set_manifest(suspend=False, phase="Running")
        cs = self.w.create_set(manifest)
        self.w.patch_set(NS, SET, {"spec": {"suspend": True}})
        self.w.set_status(NS, SET, {"phase": "Suspending"})
        self.w.create_pod(pod_manifest(node="node-a"), owner=cs)
        # What the model knows happened (the judge of the once-effects).
        self.deleted_mains: set[str] = set()
        self.live_restores: set[str] = set()
        self.lost_event_answers = 0

    # --- helpers ----------------------------------------------------------------

    def cs(self) -> dict[str, Any]:
        return self.w.get_set(NS, SET)

    def pods(self) -> list[Any]:
        return self.w.pods(NS, SET)

    def main(self) -> Any:
        live = [p for p in self.pods() if p.metadata.deletion_timestamp is None]
        return live[0] if live else None

    def _reconcile(self) -> None:
        from shared.reconcile import reconcile_set

        # A CocoonError is a non-2xx: the platform would redeliver (a later step may).
        with contextlib.suppress(CocoonError):
            reconcile_set(
                REF,
                kube=self.env.client,
                registry=self.env.registry,
                settings=self.env.settings,
                publisher=self.publisher,
            )

    def _observe(self) -> None:
        """Learn from the world what happened (mains deleted, restores gone live)."""
        seen = {p.metadata.uid: p for p in self.pods()}
        for uid, p in seen.items():
            if p.metadata.deletion_timestamp is not None:
                self.deleted_mains.add(uid)
            ann = p.metadata.annotations or {}
            if ann.get(k.ANN_RESTORE) == k.TRUE and ann.get(k.ANN_VM_ID):
                self.live_restores.add(uid)
        self._known = getattr(self, "_known", set())
        for uid in self._known - set(seen):
            self.deleted_mains.add(uid)  # gone: deleted by the release, finished by the kubelet
        self._known |= set(seen)

    def _count_lost_event_answers(self) -> None:
        self.lost_event_answers = sum(
            1
            for r in self.env.proxy.requests()
            if r.fault == "lost" and r.method == "POST" and r.path.endswith("/events")
        )

    # --- rules: the function's inputs -----------------------------------------------

    @rule()
    def deliver_event(self) -> None:
        self._reconcile()
        self._observe()

    @rule()
    def user_wake_request(self) -> None:
        from shared.reconcile import request_wake

        with contextlib.suppress(CocoonError):
            request_wake(
                REF,
                kube=self.env.client,
                registry=self.env.registry,
                settings=self.env.settings,
                publisher=self.publisher,
            )
        self._observe()

    @rule(kind=st.sampled_from(KINDS), nth=st.integers(0, 3))
    def inject_fault(self, kind: str, nth: int) -> None:
        self.env.proxy.arm(kind, nth=nth)

    @rule()
    def concurrent_duplicates(self) -> None:
        threads = [threading.Thread(target=self._reconcile) for _ in range(2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=60)
        self._observe()

    @rule()
    def sweep_tick(self) -> None:
        from functions.sweep import run_sweep

        assert self.env.settings is not None
        with contextlib.suppress(CocoonError):
            run_sweep(
                settings=self.env.settings,
                dry_run=False,
                kube=self.env.client,
                registry=self.env.registry,
                publisher=self.publisher,
            )
        self._observe()

    # --- rules: the world ---------------------------------------------------------

    @rule(suspend=st.booleans())
    def user_sets_suspend(self, suspend: bool) -> None:
        self.w.patch_set(NS, SET, {"spec": {"suspend": suspend}})

    @rule()
    def vk_cocoon_hibernates_and_pushes(self) -> None:
        main = self.main()
        gen = int(self.cs()["metadata"]["generation"])
        ann = (main.metadata.annotations or {}) if main is not None else {}
        if main is None or ann.get(k.ANN_HIBERNATE) != k.TRUE:
            return
        if not self.w.snapshot_present(VM0):
            self.w.push_snapshot(VM0)
        self.w.annotate_pod(
            NS,
            main.metadata.name,
            {k.ANN_LIFECYCLE_STATE: "hibernated", k.ANN_LIFECYCLE_GENERATION: str(gen)},
        )

    @rule(node=st.sampled_from(["node-a", "node-b"]))
    def scheduler_binds_and_vm_goes_live(self, node: str) -> None:
        main = self.main()
        if main is None or (main.metadata.annotations or {}).get(k.ANN_RESTORE) != k.TRUE:
            return
        if (main.metadata.annotations or {}).get(k.ANN_VM_ID):
            return
        if main.spec.node_name is None:
            self.w.core.create_namespaced_pod_binding(
                POD,
                NS,
                {
                    "apiVersion": "v1",
                    "kind": "Binding",
                    "metadata": {"name": POD},
                    "target": {"apiVersion": "v1", "kind": "Node", "name": node},
                },
                _preload_content=False,
            )
        self.w.annotate_pod(NS, POD, {k.ANN_VM_ID: "vm-42"})
        self.w.pod_status(
            NS,
            POD,
            {
                "phase": "Running",
                "containerStatuses": [
                    {
                        "name": k.MAIN_CONTAINER,
                        "ready": True,
                        "image": k.PLACEHOLDER_IMAGE,
                        "imageID": "",
                        "restartCount": 0,
                        "state": {"running": {"startedAt": "2026-01-01T00:00:00Z"}},
                    }
                ],
                "conditions": [{"type": "Ready", "status": "True"}],
            },
        )
        self._observe()

    @rule()
    def kubelet_finishes_terminating_pods(self) -> None:
        self._observe()
        for p in self.pods():
            if p.metadata.deletion_timestamp is not None:
                self.w.core.delete_namespaced_pod(p.metadata.name, NS, grace_period_seconds=0)

    # --- safety, after every step ---------------------------------------------------
    # (One invariant reading the world once: the checks are cheap, the reads are not.)

    @invariant()
    def safety(self) -> None:
        pods = self.pods()
        live = [p for p in pods if p.metadata.deletion_timestamp is None]
        assert len(live) <= 1, "never two mains"
        self._stash_and_tag(live[0] if live else None)
        self._records()

    def _stash_and_tag(self, main: Any) -> None:
        ann = self.cs()["metadata"].get("annotations") or {}
        pann = (main.metadata.annotations or {}) if main is not None else {}
        restoring = pann.get(k.ANN_RESTORE) == k.TRUE and not pann.get(k.ANN_VM_ID)
        if main is None or restoring:
            # A seat was released (or is being restored): the stash and the
            # round preceded the delete, and the snapshot is still there.
            assert VM0 in ann.get(k.ANN_DELETE_VM_NAMES, "").split(",")
            assert ann.get(k.ANN_RELEASE_ROUND)
            assert self.w.snapshot_present(VM0), "tag dropped before the VM was live"

    def _records(self) -> None:
        events = Counter(e.reason for e in self.w.events(NS))
        out = self.logs.getvalue()
        assert events[k.REASON_SEAT_RELEASED] <= len(self.deleted_mains)
        assert events[k.REASON_WAKE_COMPLETED] <= len(self.live_restores)
        assert _metric_total(out, k.METRIC_PODS_DELETED) <= len(self.deleted_mains)
        assert _metric_total(out, k.METRIC_WAKE) <= len(self.live_restores)
        # One occurrence, one id: every copy of a lifecycle event agrees on its kind.
        kinds: dict[str, set[str]] = {}
        for e in self.publisher.events:
            kinds.setdefault(e["id"], set()).add(e["type"])
        assert all(len(v) == 1 for v in kinds.values())

    # --- convergence, at the end ----------------------------------------------------

    def teardown(self) -> None:
        try:
            self._converge_and_check()
        finally:
            self.env.proxy.disarm()
            log.configure(LogFormat.JSON, None)

    def _converge_and_check(self) -> None:
        self._count_lost_event_answers()
        self.env.proxy.disarm()
        before: Any = None
        for _ in range(8):
            self.vk_cocoon_hibernates_and_pushes()
            self.kubelet_finishes_terminating_pods()
            self.scheduler_binds_and_vm_goes_live("node-a")
            self.sweep_tick()
            self.deliver_event()
            now = (
                self.cs()["metadata"]["resourceVersion"],
                sorted((p.metadata.uid, p.metadata.resource_version) for p in self.pods()),
            )
            if now == before:
                break  # a fixpoint: nothing moved in a whole round
            before = now
        self.kubelet_finishes_terminating_pods()
        cs = self.cs()
        ann = cs["metadata"].get("annotations") or {}
        events = Counter(e.reason for e in self.w.events(NS))
        out = self.logs.getvalue()
        # Nothing owed is left behind.
        assert k.ANN_WAKE_REPORT_OWED not in ann
        if self.deleted_mains:
            assert ann.get(k.ANN_RELEASE_REPORTED) == ann.get(k.ANN_RELEASE_ROUND)
        # Exactly one SeatReleased per released main (one main per round), and
        # the count, except where an Event create's answer was lost.
        assert events[k.REASON_SEAT_RELEASED] == len(self.deleted_mains)
        counted = _metric_total(out, k.METRIC_PODS_DELETED)
        assert len(self.deleted_mains) - self.lost_event_answers <= counted
        assert counted <= len(self.deleted_mains)
        if cs["spec"].get("suspend"):
            assert cs["status"]["phase"] == "Suspended"
            assert self.main() is None
        elif self.deleted_mains:
            main = self.main()
            if main is not None and (main.metadata.annotations or {}).get(k.ANN_RESTORE):
                # The restore completed: tag dropped, hint cleared, reported once.
                assert cs["status"]["phase"] in ("Running", "Pending")
                assert k.ANN_HIBERNATED_ON_NODE not in ann
                assert not self.w.snapshot_present(VM0)
        wakes = events[k.REASON_WAKE_COMPLETED]
        assert wakes <= len(self.live_restores)
        counted_wakes = _metric_total(out, k.METRIC_WAKE)
        assert wakes - self.lost_event_answers <= counted_wakes <= wakes
        released = {e["id"] for e in self.publisher.events if e["type"].endswith(".released")}
        woken = {e["id"] for e in self.publisher.events if e["type"].endswith(".woken")}
        assert len(released) == events[k.REASON_SEAT_RELEASED]
        assert len(woken) == wakes


def test_release_and_wake_converge_under_faults(world: World, tmp_path: Path) -> None:
    env = Env(world, tmp_path)
    Model.env = env
    try:
        run_state_machine_as_test(
            Model,
            settings=settings(
                max_examples=EXAMPLES,
                stateful_step_count=STEPS,
                derandomize=True,
                database=None,
                deadline=None,
                suppress_health_check=list(HealthCheck),
            ),
        )
    finally:
        env.close()
