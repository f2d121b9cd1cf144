"""The cluster simulator: what is *not* ours, played just well enough to run the real functions.

In production, three things act on CocoonSets and their pods besides this
project: kube-scheduler, the cocoon-operator (the normal flow) and vk-cocoon
(the virtual kubelet running the VMs). None of them run on a laptop, so this
module stands in for them against any Kubernetes API (in practice the embedded
one of the local stack). It is a test double for the world, not a product:

* **scheduler** -- binds each unbound pod to a node of its pool
  (:mod:`devstack.placement`: nodeSelector, required and preferred node
  affinity, a fixed number of *seats* per node; a pod holds a seat while it is
  bound and still exists). Binding goes through the ``binding`` subresource, as
  kube-scheduler's does. When nothing
  fits it writes ``PodScheduled=False``, reason ``Unschedulable``, with a
  kube-scheduler shaped message, once per distinct message.
* **operator** (the normal flow, SPEC §12) -- for a set that is not suspended
  and whose phase is unset, ``Pending`` or ``Running``: creates the main pod
  (SPEC §2/§3, *without* the restore marker) when the set has no pods, and
  derives the phase (``Pending`` -> ``Running`` once the main pod is Ready)
  with ``status.agents``. It never writes ``Suspending``/``Suspended``/
  ``Waking`` for a release-policy set and never creates a pod for a set in
  those phases: those belong to the functions. A suspended *retain* set gets
  the minimal retain flow: ``hibernate=true`` on its pods, ``Suspending`` then
  ``Suspended`` once vk reports them hibernated, and back on unsuspend.
  Sub-agents and toolboxes are not simulated (release sets have none).
* **vk-cocoon** -- on a bound pod without a VM: "boots" it (VM id, IP,
  lifecycle ``ready``, a Running and Ready container through ``/status``).
  A restore-marked pod restores *warm* when its node still holds that VM's
  node-local snapshot (the node it hibernated on, and the pod was deleted with
  ``keep-snapshot-on-delete``), else *cold* by pulling ``:hibernate`` from the
  registry; the outcome is written to ``lifecycle-state-message`` and kept in
  :attr:`Simulator.restores`. On ``hibernate=true`` it pushes a real
  ``<prefix>/<vm>:hibernate`` image to the registry and only then writes
  lifecycle ``hibernated`` with the observed generation (one patch). A pod
  being deleted is finalized at once (grace 0); a deleted pod's seat frees.

Every tick reads the world (sets, pods), decides purely
(:func:`decide`) and then acts; conflicts and vanished objects are dropped
and re-decided on the next tick (level-triggered, like the real components).
"""

from __future__ import annotations

import contextlib
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import requests

from devstack.kubehttp import (
    JSON,
    ApiError,
    ConflictError,
    KubeHTTP,
    NotFoundError,
    pod_path,
    set_path,
)
from devstack.placement import Bind, NodeInfo, place
from devstack.registry import push_image
from shared import constants as k
from shared.enums import CocoonSetPhase as Phase
from shared.enums import LifecycleState
from shared.names import main_pod_name, vm_name

WARM = "warm"
COLD = "cold"
FRESH = "fresh"
MSG_RESTORED = "restored {how} on {node}"

_NORMAL_FLOW_PHASES = {None, "", Phase.PENDING.value, Phase.RUNNING.value}
# An idle VM still uses a little CPU (guest timers, the agent's heartbeat).
IDLE_CPU = "2m"


def metrics_path(namespace: str, name: str | None = None) -> str:
    base = f"/apis/metrics.k8s.io/v1beta1/namespaces/{namespace}/pods"
    return f"{base}/{name}" if name else base


# --- the world as read ----------------------------------------------------------------


def _meta(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    meta: Mapping[str, Any] = obj.get("metadata") or {}
    return meta


def _ann(obj: Mapping[str, Any]) -> Mapping[str, str]:
    ann: Mapping[str, str] = _meta(obj).get("annotations") or {}
    return ann


def _labels(obj: Mapping[str, Any]) -> Mapping[str, str]:
    labels: Mapping[str, str] = _meta(obj).get("labels") or {}
    return labels


def _key(obj: Mapping[str, Any]) -> tuple[str, str]:
    meta = _meta(obj)
    return str(meta.get("namespace") or "default"), str(meta.get("name") or "")


def _terminating(pod: Mapping[str, Any]) -> bool:
    return _meta(pod).get("deletionTimestamp") is not None


def _node_of(pod: Mapping[str, Any]) -> str:
    return str((pod.get("spec") or {}).get("nodeName") or "")


def _ready(pod: Mapping[str, Any]) -> bool:
    conds = (pod.get("status") or {}).get("conditions") or []
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conds)


def _unschedulable_message(pod: Mapping[str, Any]) -> str | None:
    for c in (pod.get("status") or {}).get("conditions") or []:
        if (
            c.get("type") == "PodScheduled"
            and c.get("status") == "False"
            and c.get("reason") == "Unschedulable"
        ):
            return str(c.get("message") or "")
    return None


def _owned(set_obj: Mapping[str, Any], pods: Iterable[JSON]) -> list[JSON]:
    ns, name = _key(set_obj)
    return [p for p in pods if _key(p)[0] == ns and _labels(p).get(k.LABEL_SET_NAME) == name]


def _spec(set_obj: Mapping[str, Any]) -> Mapping[str, Any]:
    spec: Mapping[str, Any] = set_obj.get("spec") or {}
    return spec


def _phase(set_obj: Mapping[str, Any]) -> str | None:
    status = set_obj.get("status") or {}
    phase = status.get("phase")
    return str(phase) if phase else None


def _is_release(set_obj: Mapping[str, Any]) -> bool:
    return _spec(set_obj).get("hibernatePolicy") == "release"


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


# --- decisions ------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class CreatePod:
    namespace: str
    body: JSON


@dataclass(frozen=True, slots=True)
class WriteSetStatus:
    namespace: str
    name: str
    resource_version: str
    status: JSON


@dataclass(frozen=True, slots=True)
class AnnotatePod:
    """A merge patch of pod annotations (None deletes a key)."""

    namespace: str
    name: str
    annotations: Mapping[str, str | None]


@dataclass(frozen=True, slots=True)
class BindPod:
    namespace: str
    name: str
    node: str


@dataclass(frozen=True, slots=True)
class MarkUnschedulable:
    namespace: str
    name: str
    message: str


@dataclass(frozen=True, slots=True)
class BootVM:
    namespace: str
    name: str
    vm: str
    node: str
    how: str  # WARM, COLD or FRESH


@dataclass(frozen=True, slots=True)
class HibernateVM:
    namespace: str
    name: str
    vm: str
    node: str
    generation: int


@dataclass(frozen=True, slots=True)
class ResumeVM:
    namespace: str
    name: str


@dataclass(frozen=True, slots=True)
class FinalizeDelete:
    namespace: str
    name: str
    uid: str


Action = (
    CreatePod
    | WriteSetStatus
    | AnnotatePod
    | BindPod
    | MarkUnschedulable
    | BootVM
    | HibernateVM
    | ResumeVM
    | FinalizeDelete
)


def main_pod_body(set_obj: Mapping[str, Any]) -> JSON:
    """The normal flow's main pod (SPEC §2/§3), without the restore marker."""
    ns, name = _key(set_obj)
    spec = _spec(set_obj)
    agent = spec.get("agent") or {}
    vm = vm_name(ns, name, 0)
    annotations = {
        k.ANN_VM_NAME: vm,
        k.ANN_IMAGE: str(agent.get("image", "")),
        k.ANN_MODE: str(agent.get("mode") or "clone"),
        k.ANN_OS: str(agent.get("os") or "linux"),
        k.ANN_SNAPSHOT_POLICY: str(spec.get("snapshotPolicy") or "always"),
        k.ANN_MANAGED: k.TRUE,
        k.ANN_BACKEND: str(agent.get("backend") or "cloud-hypervisor"),
        k.ANN_GENERATION: str(_meta(set_obj).get("generation") or 0),
    }
    selector = {k.LABEL_POOL: str(spec.get("nodePool") or k.DEFAULT_POOL)}
    if spec.get("snapshotCompatibilityClass"):
        selector[k.LABEL_SNAPSHOT_CPU_CLASS] = str(spec["snapshotCompatibilityClass"])
    pod_spec: JSON = {
        "containers": [
            {
                "name": k.MAIN_CONTAINER,
                "image": k.PLACEHOLDER_IMAGE,
                "resources": agent.get("resources") or {},
            }
        ],
        "terminationGracePeriodSeconds": k.POD_GRACE_SECONDS,
        "nodeSelector": selector,
        "tolerations": [
            {"key": k.TOLERATION_VK_PROVIDER, "operator": "Exists"},
            {"key": k.TOLERATION_NOT_READY, "operator": "Exists", "effect": "NoExecute"},
            {"key": k.TOLERATION_UNREACHABLE, "operator": "Exists", "effect": "NoExecute"},
        ],
    }
    if spec.get("nodeName"):
        pod_spec["affinity"] = {
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [
                        {
                            "matchExpressions": [
                                {
                                    "key": k.LABEL_HOSTNAME,
                                    "operator": "In",
                                    "values": [spec["nodeName"]],
                                }
                            ]
                        }
                    ]
                }
            }
        }
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": main_pod_name(name),
            "namespace": ns,
            "labels": {
                k.LABEL_SET_NAME: name,
                k.LABEL_ROLE: k.ROLE_MAIN,
                k.LABEL_SLOT: "0",
                k.LABEL_APP_NAME: name,
            },
            "annotations": annotations,
            "ownerReferences": [
                {
                    "apiVersion": k.API_VERSION,
                    "kind": k.KIND,
                    "name": name,
                    "uid": str(_meta(set_obj).get("uid") or ""),
                    "controller": True,
                    "blockOwnerDeletion": True,
                }
            ],
        },
        "spec": pod_spec,
    }


def _agents_status(set_obj: Mapping[str, Any], main: Mapping[str, Any] | None) -> list[JSON]:
    ns, name = _key(set_obj)
    entry: JSON = {"role": k.ROLE_MAIN, "slot": 0, "vmName": vm_name(ns, name, 0)}
    if main is not None:
        entry["podName"] = _meta(main).get("name")
        if _ann(main).get(k.ANN_VM_ID):
            entry["vmID"] = _ann(main)[k.ANN_VM_ID]
        entry["phase"] = (main.get("status") or {}).get("phase") or "Pending"
    return [entry]


def decide_operator(set_obj: Mapping[str, Any], pods: Sequence[JSON]) -> list[Action]:
    ns, name = _key(set_obj)
    rv = str(_meta(set_obj).get("resourceVersion") or "")
    phase = _phase(set_obj)
    suspended = bool(_spec(set_obj).get("suspend"))
    owned = _owned(set_obj, pods)
    live = [p for p in owned if not _terminating(p)]
    main = next((p for p in live if _labels(p).get(k.LABEL_ROLE) == k.ROLE_MAIN), None)
    generation = int(_meta(set_obj).get("generation") or 0)
    out: list[Action] = []

    if not _is_release(set_obj) and suspended:
        # Minimal retain flow: the VM hibernates in place and keeps its seat.
        for p in live:
            if _ann(p).get(k.ANN_HIBERNATE) != k.TRUE:
                out.append(AnnotatePod(ns, _key(p)[1], {k.ANN_HIBERNATE: k.TRUE}))
        done = bool(live) and all(
            _ann(p).get(k.ANN_LIFECYCLE_STATE) == LifecycleState.HIBERNATED.value for p in live
        )
        want = Phase.SUSPENDED.value if done or not live else Phase.SUSPENDING.value
        if phase != want:
            out.append(WriteSetStatus(ns, name, rv, {"phase": want}))
        return out

    if suspended:
        return out  # a suspended release set: the functions' business
    if not _is_release(set_obj) and phase in (Phase.SUSPENDING.value, Phase.SUSPENDED.value):
        # Retain unsuspend: resume in place, then the normal derivation takes over.
        for p in live:
            if _ann(p).get(k.ANN_HIBERNATE) is not None:
                out.append(AnnotatePod(ns, _key(p)[1], {k.ANN_HIBERNATE: None}))
        out.append(WriteSetStatus(ns, name, rv, {"phase": Phase.PENDING.value}))
        return out
    if phase not in _NORMAL_FLOW_PHASES:
        return out  # Suspending/Suspended/Waking of a release set, Failed, ...
    if not owned and not (_is_release(set_obj) and _ann(set_obj).get(k.ANN_HIBERNATED_ON_NODE)):
        out.append(CreatePod(ns, main_pod_body(set_obj)))
    want = Phase.RUNNING.value if main is not None and _ready(main) else Phase.PENDING.value
    status: JSON = {}
    if phase != want:
        status["phase"] = want
    agents = _agents_status(set_obj, main)
    current = (set_obj.get("status") or {}).get("agents")
    if current != agents:
        status["agents"] = agents
    if (set_obj.get("status") or {}).get("observedGeneration") != generation:
        status["observedGeneration"] = generation
    ready = 1 if main is not None and _ready(main) else 0
    if (set_obj.get("status") or {}).get("readyAgents") != ready:
        status["readyAgents"] = ready
    if (set_obj.get("status") or {}).get("desiredAgents") != 1:
        status["desiredAgents"] = 1  # the main agent; release sets have no sub-agents
    if status:
        out.append(WriteSetStatus(ns, name, rv, status))
    return out


def seats_used(pods: Iterable[Mapping[str, Any]]) -> dict[str, int]:
    """Seats held per node: every pod bound to it that still exists (terminating included)."""
    used: dict[str, int] = {}
    for p in pods:
        node = _node_of(p)
        if node:
            used[node] = used.get(node, 0) + 1
    return used


def decide_scheduler(pods: Sequence[JSON], nodes: Sequence[NodeInfo]) -> list[Action]:
    used = seats_used(pods)
    pending = [p for p in pods if not _node_of(p) and not _terminating(p)]
    pending.sort(key=lambda p: (str(_meta(p).get("creationTimestamp") or ""), _key(p)))
    out: list[Action] = []
    for pod in pending:
        ns, name = _key(pod)
        placement = place(pod.get("spec") or {}, nodes, used)
        if isinstance(placement, Bind):
            used[placement.node] = used.get(placement.node, 0) + 1
            out.append(BindPod(ns, name, placement.node))
        elif _unschedulable_message(pod) != placement.message:
            out.append(MarkUnschedulable(ns, name, placement.message))
    return out


def decide_vk(
    pods: Sequence[JSON],
    sets: Sequence[JSON],
    node_snapshots: Mapping[str, set[str]],
    booting: set[tuple[str, str]] | None = None,
) -> list[Action]:
    generations = {_key(s): int(_meta(s).get("generation") or 0) for s in sets}
    out: list[Action] = []
    for pod in pods:
        ns, name = _key(pod)
        node = _node_of(pod)
        ann = _ann(pod)
        vm = ann.get(k.ANN_VM_NAME, "")
        if _terminating(pod):
            out.append(FinalizeDelete(ns, name, str(_meta(pod).get("uid") or "")))
            continue
        if not node or not vm:
            continue
        if not ann.get(k.ANN_VM_ID):
            if booting is not None and (ns, name) in booting:
                continue
            if ann.get(k.ANN_RESTORE) == k.TRUE:
                how = WARM if vm in node_snapshots.get(node, set()) else COLD
            else:
                how = FRESH
            out.append(BootVM(ns, name, vm, node, how))
            continue
        state = ann.get(k.ANN_LIFECYCLE_STATE, "")
        set_gen = generations.get((ns, _labels(pod).get(k.LABEL_SET_NAME, "")), 0)
        if ann.get(k.ANN_HIBERNATE) == k.TRUE:
            try:
                observed = int(ann.get(k.ANN_LIFECYCLE_GENERATION, "0"))
            except ValueError:
                observed = 0
            if state != LifecycleState.HIBERNATED.value or observed < set_gen:
                out.append(HibernateVM(ns, name, vm, node, set_gen))
        elif state == LifecycleState.HIBERNATED.value:
            out.append(ResumeVM(ns, name))
    return out


def decide(
    sets: Sequence[JSON],
    pods: Sequence[JSON],
    nodes: Sequence[NodeInfo],
    node_snapshots: Mapping[str, set[str]],
) -> list[Action]:
    """Everything the simulated cluster would do next, given what it reads."""
    out: list[Action] = []
    for s in sets:
        out.extend(decide_operator(s, pods))
    out.extend(decide_scheduler(pods, nodes))
    out.extend(decide_vk(pods, sets, node_snapshots))
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


@dataclass(frozen=True, slots=True)
class Restore:
    namespace: str
    pod: str
    vm: str
    node: str
    how: str


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
        if not self.errors or self.errors[-1] != text:
            self.errors.append(text)
            del self.errors[:-50]

    def _emit(self, kind: str, namespace: str, name: str, detail: str = "") -> None:
        if self.on_event is not None:
            self.on_event(SimEvent(time.monotonic(), kind, namespace, name, detail))

    # -- one tick --
    def step(self) -> list[Action]:
        sets = self.api.list_items(set_path())
        pods = self.api.list_items(pod_path())
        self._remember(pods)
        actions = decide(sets, pods, [n.info() for n in self.nodes], self.node_snapshots)
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
        now = _now()
        for p in pods:
            vm = _ann(p).get(k.ANN_VM_NAME, "")
            if _terminating(p) or not _node_of(p) or not _ann(p).get(k.ANN_VM_ID) or not vm:
                continue
            ns, name = _key(p)
            live.add((ns, name))
            body = {
                "apiVersion": "metrics.k8s.io/v1beta1",
                "kind": "PodMetrics",
                # metrics-server copies the pod's labels, so label selectors work.
                "metadata": {"name": name, "namespace": ns, "labels": dict(_labels(p))},
                "timestamp": now,
                "window": f"{max(int(self.metrics_interval), 1)}s",
                "containers": [
                    {
                        "name": k.MAIN_CONTAINER,
                        "usage": {"cpu": self.cpu_load.get(vm, IDLE_CPU), "memory": "512Mi"},
                    }
                ],
            }
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
            uid = str(_meta(p).get("uid") or "")
            seen.add(uid)
            node, vm = _node_of(p), _ann(p).get(k.ANN_VM_NAME, "")
            if node and vm:
                self._memory[uid] = _PodMemory(node, vm, _ann(p).get(k.ANN_KEEP_SNAPSHOT) == k.TRUE)
        for uid in [u for u in self._memory if u not in seen]:
            self._forget(uid, deleted_pod=None)

    def _forget(self, uid: str, deleted_pod: Mapping[str, Any] | None) -> None:
        mem = self._memory.pop(uid, None)
        if mem is None:
            return
        keep = mem.keep or (
            deleted_pod is not None and _ann(deleted_pod).get(k.ANN_KEEP_SNAPSHOT) == k.TRUE
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
            api.merge_patch(
                pod_path(action.namespace, action.name),
                {"metadata": {"annotations": dict(action.annotations)}},
            )
        elif isinstance(action, BindPod):
            self._bind(action)
        elif isinstance(action, MarkUnschedulable):
            status = {
                "phase": "Pending",
                "conditions": [
                    {
                        "type": "PodScheduled",
                        "status": "False",
                        "reason": "Unschedulable",
                        "message": action.message,
                        "lastTransitionTime": _now(),
                    }
                ],
            }
            api.merge_patch(pod_path(action.namespace, action.name) + "/status", {"status": status})
            self._emit("unschedulable", action.namespace, action.name, action.message)
        elif isinstance(action, BootVM):
            self._boot(action)
        elif isinstance(action, HibernateVM):
            self._hibernate(action)
        elif isinstance(action, ResumeVM):
            api.merge_patch(
                pod_path(action.namespace, action.name),
                {"metadata": {"annotations": {k.ANN_LIFECYCLE_STATE: LifecycleState.READY.value}}},
            )
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

    def _bind(self, action: BindPod) -> None:
        # The binding subresource, as kube-scheduler does: the API server sets
        # spec.nodeName and PodScheduled=True, and refuses (409) an already bound pod.
        self.api.post(
            pod_path(action.namespace, action.name) + "/binding",
            {
                "apiVersion": "v1",
                "kind": "Binding",
                "metadata": {"name": action.name, "namespace": action.namespace},
                "target": {"apiVersion": "v1", "kind": "Node", "name": action.node},
            },
        )
        self._emit("bound", action.namespace, action.name, action.node)

    def _registry_repository(self, vm: str) -> str:
        return f"{self.registry_prefix}/{vm}" if self.registry_prefix else vm

    def _boot(self, action: BootVM) -> None:
        path = pod_path(action.namespace, action.name)
        how = action.how
        # A cold restore pulls the snapshot from the registry (a real GET of the manifest).
        if how == COLD and not _manifest_exists(
            self.registry_url, self._registry_repository(action.vm), k.TAG_HIBERNATE
        ):
            self.api.merge_patch(
                path,
                {
                    "metadata": {
                        "annotations": {
                            k.ANN_LIFECYCLE_STATE: LifecycleState.FAILED.value,
                            k.ANN_LIFECYCLE_MESSAGE: "restore failed: no :hibernate snapshot",
                        }
                    }
                },
            )
            self._emit("restore-failed", action.namespace, action.name, action.node)
            return
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
        self.api.merge_patch(path, {"metadata": {"annotations": annotations}})
        now = _now()
        status = {
            "phase": "Running",
            "podIP": annotations[k.ANN_VM_IP],
            "conditions": [
                {"type": t, "status": "True", "lastTransitionTime": now}
                for t in ("PodScheduled", "Initialized", "ContainersReady", "Ready")
            ],
            "containerStatuses": [
                {
                    "name": k.MAIN_CONTAINER,
                    "image": k.PLACEHOLDER_IMAGE,
                    "imageID": "",
                    "ready": True,
                    "started": True,
                    "restartCount": 0,
                    "state": {"running": {"startedAt": now}},
                }
            ],
        }
        self.api.merge_patch(path + "/status", {"status": status})
        if how != FRESH:
            self.restores.append(
                Restore(action.namespace, action.name, action.vm, action.node, how)
            )
        self._emit("booted", action.namespace, action.name, f"{how} on {action.node}")

    def _hibernate(self, action: HibernateVM) -> None:
        path = pod_path(action.namespace, action.name)
        self.api.merge_patch(
            path,
            {
                "metadata": {
                    "annotations": {k.ANN_LIFECYCLE_STATE: LifecycleState.HIBERNATING.value}
                }
            },
        )
        digest = push_image(self.registry_url, self._registry_repository(action.vm), "hibernate")
        # The snapshot is also kept on the node: the warm copy a wake may restore from.
        self.node_snapshots.setdefault(action.node, set()).add(action.vm)
        self.api.merge_patch(
            path,
            {
                "metadata": {
                    "annotations": {
                        k.ANN_LIFECYCLE_STATE: LifecycleState.HIBERNATED.value,
                        k.ANN_LIFECYCLE_GENERATION: str(action.generation),
                    }
                }
            },
        )
        self._emit("hibernated", action.namespace, action.name, digest)


def _manifest_exists(registry_url: str, repository: str, tag: str) -> bool:
    accept = ", ".join(
        [
            "application/vnd.oci.image.manifest.v1+json",
            "application/vnd.docker.distribution.manifest.v2+json",
        ]
    )
    resp = requests.get(
        f"{registry_url.rstrip('/')}/v2/{repository}/manifests/{tag}",
        headers={"Accept": accept},
        timeout=5,
    )
    return resp.status_code == 200
