"""The cluster simulator: what is *not* ours, played just well enough to run the real functions.

In production, three things act on CocoonSets and their pods besides this
project: kube-scheduler, the cocoon-operator (the normal flow) and vk-cocoon
(the virtual kubelet running the VMs). None of them run on a laptop, so the
simulator stands in for them against any Kubernetes API (in practice the
embedded one of the local stack). It is a test double for the world, not a
product. One module per actor decides what that actor does next:

* :mod:`devstack.sim_scheduler` -- kube-scheduler: binds each unbound pod to a
  seat of its pool, or marks it ``Unschedulable``;
* :mod:`devstack.sim_normal_flow` -- cocoon-operator's normal flow
  (docs/design.md#operator); with ``play_operator=False`` none is played here
  and :mod:`devstack.sim_operator` (the upstream operator's own slot release
  and wake) runs beside the simulator instead;
* :mod:`devstack.sim_vkcocoon` -- vk-cocoon: boots, restores (warm, cold or on
  its own) and hibernates VMs (:mod:`devstack.vkorder`, off the tick), and
  finalizes deleted pods.

What they read of pods and sets is :mod:`devstack.sim_pods`. This module wires
them: every tick reads the world (sets, pods), decides purely (:func:`decide`)
and then acts; conflicts and vanished objects are dropped and re-decided on
the next tick (level-triggered, like the real components).
"""

from __future__ import annotations

import contextlib
import threading
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from devstack.kubehttp import (
    JSON,
    ApiError,
    ConflictError,
    KubeHTTP,
    NotFoundError,
    pod_path,
    set_path,
)
from devstack.placement import NodeInfo
from devstack.sim_normal_flow import (
    AnnotatePod,
    CreatePod,
    DeletePod,
    OperatorAction,
    WriteSetStatus,
    decide_operator,
)
from devstack.sim_pods import (
    ann_of,
    gated,
    key_of,
    labels_of,
    manifest_exists,
    meta_of,
    node_of,
    now_rfc3339,
    patch_annotations,
    record_error,
    repository,
    terminating,
)
from devstack.sim_scheduler import (
    FIFO,
    BindPod,
    MarkUnschedulable,
    SchedulerAction,
    bind,
    decide_scheduler,
    mark_unschedulable,
)
from devstack.sim_vkcocoon import (
    AUTO,
    COLD,
    FRESH,
    IDLE_CPU,
    MSG_RESTORED,
    PEER,
    WARM,
    BootVM,
    FinalizeDelete,
    HibernateVM,
    RepublishState,
    Restore,
    ResumeVM,
    VkAction,
    decide_vk,
    metrics_path,
    pod_metrics,
    running_status,
)
from devstack.upstream import Upstream
from devstack.vkorder import DEFAULT_REPORT_GAP_S, Hibernation, VkHibernator
from shared import constants as k
from shared.enums import LifecycleState

Action = OperatorAction | SchedulerAction | VkAction


def decide(
    sets: Sequence[JSON],
    pods: Sequence[JSON],
    nodes: Sequence[NodeInfo],
    node_snapshots: Mapping[str, set[str]],
    *,
    order: str = FIFO,
    entered: Mapping[str, int] | None = None,
    operator: bool = True,
    upstream: Upstream = Upstream.TODAY,
) -> list[Action]:
    """Everything the simulated cluster would do next, given what it reads.

    `operator=False` leaves the operator out (devstack.sim_operator plays it instead).
    """
    out: list[Action] = []
    for s in sets if operator else ():
        out.extend(decide_operator(s, pods, upstream))
    out.extend(decide_scheduler(pods, nodes, order=order, entered=entered))
    out.extend(decide_vk(pods, node_snapshots, republish=upstream is Upstream.TODAY))
    return out


# --- acting ---------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class SimEvent:
    """Something the simulated cluster did, for narration."""

    at: float
    kind: str  # created, bound, unschedulable, booted, hibernated, deleted, ...
    namespace: str
    name: str
    detail: str = ""


# The CPU class the local stack's nodes carry (cocoonstack.io/snapshot-cpu-class), so
# that a set asking for it, as examples/valid/release-set.yaml does, schedules there.
LOCAL_CPU_CLASS = "intel-sapphire-rapids"


@dataclass
class NodeSpec:
    name: str
    seats: int = 1
    pool: str = k.DEFAULT_POOL
    cpu_class: str | None = None

    def info(self) -> NodeInfo:
        return NodeInfo(self.name, self.labels(), self.seats)

    def labels(self) -> dict[str, str]:
        labels = {k.LABEL_HOSTNAME: self.name, k.LABEL_POOL: self.pool}
        if self.cpu_class:
            labels[k.LABEL_SNAPSHOT_CPU_CLASS] = self.cpu_class
        return labels


@dataclass
class _PodMemory:
    node: str
    vm: str
    keep: bool


@dataclass
class Simulator:
    """The simulated scheduler, operator and vk-cocoon, driven by a fast poll loop.

    `registry_url` is the registry's base URL (``http://127.0.0.1:PORT``) and
    `registry_prefix` the repository prefix of ``COCOON_REGISTRY_BASE``.
    """

    api: KubeHTTP
    registry_url: str
    registry_prefix: str = ""
    nodes: list[NodeSpec] = field(default_factory=list)
    interval: float = 0.1
    on_event: Callable[[SimEvent], None] | None = None
    node_snapshots: dict[str, set[str]] = field(default_factory=dict)
    restores: list[Restore] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    _memory: dict[str, _PodMemory] = field(default_factory=dict)
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None
    _booted: int = 0
    # vk-cocoon's VM statistics, as metrics-server would serve them (PodMetrics):
    # CPU use per VM name (a quantity); a VM not listed idles at IDLE_CPU.
    cpu_load: dict[str, str] = field(default_factory=dict)
    # How often PodMetrics are refreshed (metrics-server's resolution is ~15 s; the
    # local stack uses a shorter one so a demo need not wait). 0 = never.
    metrics_interval: float = 1.0
    _metrics_at: float = -1.0e9
    _metrics_pods: set[tuple[str, str]] = field(default_factory=set)
    # The scheduler's pick among pending pods: FIFO or NEWEST_FIRST (see decide_scheduler).
    scheduler_order: str = FIFO
    _entered: dict[str, int] = field(default_factory=dict)
    # vk-cocoon's push -> report gap (the VM's removal), see devstack.vkorder.
    report_gap: float = DEFAULT_REPORT_GAP_S
    vk: VkHibernator | None = None
    _hibernated: set[tuple[str, str, int]] = field(default_factory=set)
    # False: this simulator plays no operator (devstack.sim_operator.UpstreamOperator,
    # cocoon-operator's own slot release and wake, runs beside it instead).
    play_operator: bool = True
    # Which cocoonstack the simulated actors play (devstack.upstream).
    upstream: Upstream = Upstream.TODAY
    # vk-cocoon's restore time, warm (node-local copy) and cold (registry pull): the
    # restore pod holds its seat meanwhile. 0 = at once (the default everywhere else).
    warm_restore_s: float = 0.0
    cold_restore_s: float = 0.0
    _restoring: dict[tuple[str, str, str], float] = field(default_factory=dict)

    # -- lifecycle --
    def register_nodes(self) -> None:
        for node in self.nodes:
            body = {
                "apiVersion": "v1",
                "kind": "Node",
                "metadata": {"name": node.name, "labels": node.labels()},
                "status": {
                    "capacity": {"pods": str(node.seats)},
                    "allocatable": {"pods": str(node.seats)},
                    "conditions": [{"type": "Ready", "status": "True"}],
                },
            }
            with contextlib.suppress(ConflictError):  # already registered: fine
                self.api.post("/api/v1/nodes", body)
            self.node_snapshots.setdefault(node.name, set())

    def start(self) -> None:
        self.register_nodes()
        self._thread = threading.Thread(target=self._loop, name="cluster-simulator", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=10)
        if self.vk is not None:
            self.vk.join()

    def __enter__(self) -> Simulator:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _loop(self) -> None:
        while not self._stop.is_set():
            try:
                self.step()
            except Exception as err:  # noqa: BLE001 - the loop must outlive any one bad tick
                self._record_error(f"tick: {err}")
            self._stop.wait(self.interval)

    def _record_error(self, text: str) -> None:
        record_error(self.errors, text)

    def _emit(self, kind: str, namespace: str, name: str, detail: str = "") -> None:
        if self.on_event is not None:
            self.on_event(SimEvent(time.monotonic(), kind, namespace, name, detail))

    # -- one tick --
    def step(self) -> list[Action]:
        sets = self.api.list_items(set_path())
        pods = self.api.list_items(pod_path())
        self._remember(pods)
        for p in pods:
            uid = str(meta_of(p).get("uid") or "")
            if uid and uid not in self._entered and not node_of(p) and not gated(p):
                self._entered[uid] = len(self._entered) + 1
        actions = decide(
            sets,
            pods,
            [n.info() for n in self.nodes],
            self.node_snapshots,
            order=self.scheduler_order,
            entered=self._entered,
            operator=self.play_operator,
            upstream=self.upstream,
        )
        for action in actions:
            try:
                self._act(action)
            except (NotFoundError, ConflictError):
                continue  # the world moved on: the next tick re-decides
            except ApiError as err:
                self._record_error(str(err))
        if self.metrics_interval and time.monotonic() - self._metrics_at >= self.metrics_interval:
            self._metrics_at = time.monotonic()
            self._feed_metrics(pods)
        return actions

    def _feed_metrics(self, pods: Sequence[JSON]) -> None:
        """vk-cocoon's stats -> PodMetrics: one per running VM pod, none for pods gone."""
        live: set[tuple[str, str]] = set()
        now = now_rfc3339()
        for p in pods:
            vm = ann_of(p).get(k.ANN_VM_NAME, "")
            if terminating(p) or not node_of(p) or not ann_of(p).get(k.ANN_VM_ID) or not vm:
                continue
            ns, name = key_of(p)
            live.add((ns, name))
            body = pod_metrics(
                ns,
                name,
                labels_of(p),
                self.cpu_load.get(vm, IDLE_CPU),
                f"{max(int(self.metrics_interval), 1)}s",
                now,
            )
            try:
                self.api.request("PUT", metrics_path(ns, name), body=body)
            except ApiError as err:
                self._record_error(f"podmetrics {ns}/{name}: {err}")
        for ns, name in self._metrics_pods - live:
            with contextlib.suppress(ApiError):
                self.api.delete(metrics_path(ns, name))
        self._metrics_pods = live

    def _remember(self, pods: Sequence[JSON]) -> None:
        """Track pods across ticks: a pod that vanished frees its seat and maybe its cache."""
        seen: set[str] = set()
        for p in pods:
            uid = str(meta_of(p).get("uid") or "")
            seen.add(uid)
            node, vm = node_of(p), ann_of(p).get(k.ANN_VM_NAME, "")
            if node and vm:
                self._memory[uid] = _PodMemory(
                    node, vm, ann_of(p).get(k.ANN_KEEP_SNAPSHOT) == k.TRUE
                )
        for uid in [u for u in self._memory if u not in seen]:
            self._forget(uid, deleted_pod=None)

    def _forget(self, uid: str, deleted_pod: Mapping[str, Any] | None) -> None:
        mem = self._memory.pop(uid, None)
        if mem is None:
            return
        keep = mem.keep or (
            deleted_pod is not None and ann_of(deleted_pod).get(k.ANN_KEEP_SNAPSHOT) == k.TRUE
        )
        if not keep:
            # vk-cocoon drops the node-local snapshot unless the delete is a seat release.
            self.node_snapshots.get(mem.node, set()).discard(mem.vm)
        self._emit("seat-freed", "", mem.vm, f"{mem.node} (snapshot kept)" if keep else mem.node)

    def _act(self, action: Action) -> None:
        api = self.api
        if isinstance(action, CreatePod):
            api.post(pod_path(action.namespace), action.body)
            self._emit("pod-created", action.namespace, str(action.body["metadata"]["name"]))
        elif isinstance(action, WriteSetStatus):
            patch = {
                "metadata": {"resourceVersion": action.resource_version},
                "status": action.status,
            }
            api.merge_patch(set_path(action.namespace, action.name) + "/status", patch)
            if "phase" in action.status:
                self._emit("phase", action.namespace, action.name, str(action.status["phase"]))
        elif isinstance(action, AnnotatePod):
            patch_annotations(api, pod_path(action.namespace, action.name), action.annotations)
        elif isinstance(action, BindPod):
            bind(api, action)
            self._emit("bound", action.namespace, action.name, action.node)
        elif isinstance(action, MarkUnschedulable):
            mark_unschedulable(api, action)
            self._emit("unschedulable", action.namespace, action.name, action.message)
        elif isinstance(action, BootVM):
            self._boot(action)
        elif isinstance(action, HibernateVM):
            self._hibernate(action)
        elif isinstance(action, ResumeVM):
            # In place: warm from the node's own copy when it kept one, else a pull.
            how = WARM if action.vm in self.node_snapshots.get(action.node, set()) else COLD
            if how == COLD and self._peer_has(action.vm, action.node):
                how = PEER
            patch_annotations(
                api,
                pod_path(action.namespace, action.name),
                {
                    k.ANN_LIFECYCLE_STATE: LifecycleState.READY.value,
                    k.ANN_LIFECYCLE_MESSAGE: MSG_RESTORED.format(how=how, node=action.node),
                },
            )
            self.restores.append(
                Restore(action.namespace, action.name, action.vm, action.node, how)
            )
        elif isinstance(action, RepublishState):
            patch_annotations(
                api,
                pod_path(action.namespace, action.name),
                {k.ANN_LIFECYCLE_GENERATION: str(action.generation)},
            )
        elif isinstance(action, DeletePod):
            api.delete(
                pod_path(action.namespace, action.name),
                {"kind": "DeleteOptions", "apiVersion": "v1", "preconditions": {"uid": action.uid}},
            )
            self._emit("drift-deleted", action.namespace, action.name)
        elif isinstance(action, FinalizeDelete):
            pod = api.get(pod_path(action.namespace, action.name))
            api.delete(
                pod_path(action.namespace, action.name),
                {
                    "kind": "DeleteOptions",
                    "apiVersion": "v1",
                    "gracePeriodSeconds": 0,
                    "preconditions": {"uid": action.uid},
                },
            )
            self._forget(action.uid, deleted_pod=pod)

    def _peer_has(self, vm: str, node: str) -> bool:
        """Today's restore source after the local copy: another node still holding it."""
        return self.upstream is Upstream.TODAY and any(
            vm in held for other, held in self.node_snapshots.items() if other != node
        )

    def _registry_repository(self, vm: str) -> str:
        return repository(self.registry_prefix, vm)

    def _boot(self, action: BootVM) -> None:
        path = pod_path(action.namespace, action.name)
        how = action.how
        if how == AUTO:
            # vk-cocoon restores a VM whose :hibernate snapshot exists, marker or not.
            tagged = manifest_exists(
                self.registry_url, self._registry_repository(action.vm), k.TAG_HIBERNATE
            )
            warm = action.vm in self.node_snapshots.get(action.node, set())
            how = (WARM if warm else COLD) if tagged else FRESH
        if how != FRESH and not self._restore_done(action, how):
            return  # still restoring: the next tick looks again
        # A cold restore pulls the snapshot from the registry (a real GET of the manifest).
        if how == COLD and not manifest_exists(
            self.registry_url, self._registry_repository(action.vm), k.TAG_HIBERNATE
        ):
            patch_annotations(
                self.api,
                path,
                {
                    k.ANN_LIFECYCLE_STATE: LifecycleState.FAILED.value,
                    k.ANN_LIFECYCLE_MESSAGE: "restore failed: no :hibernate snapshot",
                },
            )
            self._emit("restore-failed", action.namespace, action.name, action.node)
            return
        if how == COLD and self._peer_has(action.vm, action.node):
            how = PEER
        vm_id = f"vm-{uuid.uuid4().hex[:12]}"
        self._booted += 1
        n = self._booted
        annotations = {
            k.ANN_VM_ID: vm_id,
            k.ANN_VM_IP: f"10.88.0.{10 + n % 200}",
            k.ANN_LIFECYCLE_STATE: LifecycleState.READY.value,
        }
        if how != FRESH:
            annotations[k.ANN_LIFECYCLE_MESSAGE] = MSG_RESTORED.format(how=how, node=action.node)
        patch_annotations(self.api, path, annotations)
        status = running_status(annotations[k.ANN_VM_IP], now_rfc3339())
        self.api.merge_patch(path + "/status", {"status": status})
        if how != FRESH:
            self.restores.append(
                Restore(action.namespace, action.name, action.vm, action.node, how)
            )
        self._emit("booted", action.namespace, action.name, f"{how} on {action.node}")

    def _restore_done(self, action: BootVM, how: str) -> bool:
        """Whether this restore's time has passed (its clock starts on first sight).

        Today's peer transfer is timed as cold: like a pull it moves the whole snapshot
        over the network (the split is decided after the wait, in `_boot`)."""
        took = self.warm_restore_s if how == WARM else self.cold_restore_s
        if took <= 0:
            return True
        key = (action.namespace, action.name, action.node)
        due = self._restoring.setdefault(key, time.monotonic() + took)
        if time.monotonic() < due:
            return False
        del self._restoring[key]
        return True

    def _vk(self) -> VkHibernator:
        if self.vk is None:
            self.vk = VkHibernator(
                api=self.api,
                registry_url=self.registry_url,
                gap=self.report_gap,
                on_reported=self._on_reported,
                on_error=self._record_error,
            )
        return self.vk

    def _on_reported(self, h: Hibernation, digest: str) -> None:
        self._hibernated.add((h.namespace, h.name, h.generation))
        # The snapshot is also kept on the node: the warm copy a wake may restore from.
        self.node_snapshots.setdefault(h.node, set()).add(h.vm)
        self._emit("hibernated", h.namespace, h.name, digest)

    def _hibernate(self, action: HibernateVM) -> None:
        # Once per pod and round: a tick that read the pods before the report landed
        # must not start a second hibernation of the same round.
        if (action.namespace, action.name, action.generation) in self._hibernated:
            return
        self._vk().start(
            Hibernation(
                action.namespace,
                action.name,
                action.vm,
                action.node,
                action.generation,
                self._registry_repository(action.vm),
            )
        )
