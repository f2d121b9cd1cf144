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
  kube-scheduler's does. A pod with ``spec.schedulingGates`` is not considered
  (kube-scheduler's PreEnqueue). The pick among pending pods is creation order
  (``FIFO``), or ``NEWEST_FIRST``: kube-scheduler's per-pod backoff at its least
  kind, where the pod that entered the queue last is tried first. When nothing
  fits it writes ``PodScheduled=False``, reason ``Unschedulable``, with a
  kube-scheduler shaped message, once per distinct message.
* **operator** (the normal flow, docs/design.md#operator), as cocoon-operator's source
  behaves where the functions meet it: it keeps only the pods a set
  *controls* (controller ownerReference with the set's uid), stamps the set's
  ``metadata.generation`` on every one of them first, on every pass; a failed
  main (pod phase ``Failed`` or lifecycle ``failed``) makes the phase
  ``Failed`` before anything else. For a set that is not suspended and whose
  phase is unset, ``Pending``, ``Running`` (or ``Suspending`` without a hint,
  a fast unsuspend): clears ``hibernate`` on its pods, deletes a main pod
  that drifted from what it would build (its podSpecMatchesAgent: the VM-spec
  annotations *as strings*, CPU/memory resources, service account, envFrom,
  node pool and CPU class; the next pass recreates it), creates the main pod
  (the same builder as the functions' wake, *without* the restore marker) when
  the set has no pods, and derives the phase (``Pending`` -> ``Running`` once the main pod is
  Ready) with ``status.agents``. It never writes ``Suspending``/``Suspended``/
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
  registry; a managed pod *without* the marker restores the same way on its
  own when the registry has a ``:hibernate`` tag for its VM, and boots fresh
  only when it has none. The outcome is written to ``lifecycle-state-message``
  and kept in :attr:`Simulator.restores`. On ``hibernate=true`` it snapshots a
  running VM once, in vk-cocoon's order (:mod:`devstack.vkorder`): lifecycle
  ``hibernating``, push a real ``<prefix>/<vm>:hibernate`` image to the
  registry, remove the VM (``report_gap`` seconds, off the tick), and only
  then write lifecycle ``hibernated`` with the observed
  generation -- the *pod's* ``cocoonset.cocoonstack.io/generation`` stamp,
  never the set's (it does not read the set) -- in one patch. A pod being
  deleted is finalized at once (grace 0); a deleted pod's seat frees.

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
from fractions import Fraction
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
from devstack.vkorder import DEFAULT_REPORT_GAP_S, Hibernation, VkHibernator
from shared import constants as k
from shared.enums import CocoonSetPhase as Phase
from shared.enums import LifecycleState
from shared.models import CocoonSet, Pod, parse_go_int
from shared.quantity import QuantityError, canonical_quantity, parse_quantity
from shared.reconcile.mainpod import build_main_pod, vm_spec_annotations
from shared.reconcile.status import build_status

WARM = "warm"
COLD = "cold"
FRESH = "fresh"
# No restore marker: vk-cocoon restores if the registry has a `:hibernate` tag, else boots fresh.
AUTO = "auto"
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


def _controller_uid(pod: Mapping[str, Any]) -> str:
    refs = _meta(pod).get("ownerReferences") or []
    ref = next((r for r in refs if r.get("controller")), None)
    return str(ref.get("uid") or "") if ref is not None else ""


def _owned(set_obj: Mapping[str, Any], pods: Iterable[JSON]) -> list[JSON]:
    """Labelled pods the set controls (metav1.IsControlledBy), as the operator keeps them."""
    ns, name = _key(set_obj)
    uid = str(_meta(set_obj).get("uid") or "")
    return [
        p
        for p in pods
        if _key(p)[0] == ns
        and _labels(p).get(k.LABEL_SET_NAME) == name
        and uid
        and _controller_uid(p) == uid
    ]


def _pod_terminal(pod: Mapping[str, Any]) -> bool:
    return (pod.get("status") or {}).get("phase") == "Failed" or _ann(pod).get(
        k.ANN_LIFECYCLE_STATE
    ) == LifecycleState.FAILED.value


# The VM-spec keys the operator compares (meta.ParseVMSpec), absent = "".
_VM_SPEC_KEYS = (
    k.ANN_VM_NAME,
    k.ANN_IMAGE,
    k.ANN_MODE,
    k.ANN_OS,
    k.ANN_STORAGE,
    k.ANN_NETWORK,
    k.ANN_SNAPSHOT_POLICY,
    k.ANN_MANAGED,
    k.ANN_FORCE_PULL,
    k.ANN_NO_DIRECT_IO,
    k.ANN_CONN_TYPE,
    k.ANN_BACKEND,
    k.ANN_PROBE_PORT,
)


def vm_spec_drifted(set_obj: Mapping[str, Any], pod: Mapping[str, Any]) -> bool:
    """The operator's drift check: the pod's VM-spec annotations, as strings, against its own."""
    cs = CocoonSet.model_validate(set_obj)
    want = vm_spec_annotations(cs)
    want[k.ANN_VM_NAME] = _ann(pod).get(k.ANN_VM_NAME, "")  # the operator copies the name
    # Stated here, not inherited from the wake's builder: the operator's storage string is
    # the parsed quantity's String() (meta.QuantityString), whatever the user typed.
    storage = cs.spec.agent.storage
    want[k.ANN_STORAGE] = "" if storage is None else canonical_quantity(storage)
    have = _ann(pod)
    return any(have.get(key, "") != want.get(key, "") for key in _VM_SPEC_KEYS)


def _amount(raw: Any) -> Fraction | None:
    try:
        q = parse_quantity(str(raw))
    except QuantityError:
        return None
    return Fraction(q.unscaled) * Fraction(10) ** q.scale


def _same_amount(have: Mapping[str, Any], want: Mapping[str, Any], name: str) -> bool:
    # quantityEqual: both absent is equal, one absent is not, else Quantity.Cmp.
    if name not in have and name not in want:
        return True
    if name not in have or name not in want:
        return False
    return _amount(have[name]) == _amount(want[name])


def pod_spec_drifted(set_obj: Mapping[str, Any], pod: Mapping[str, Any]) -> bool:
    """The operator's podSpecMatchesAgent for the main agent, negated.

    The VM-spec strings, then CPU and memory limits and requests (requests
    default to the limits; ephemeral-storage is never compared), the service
    account ("" and "default" alike), envFrom (nil and empty alike) and the
    scheduling: the node pool (nodeSelector, else label, else annotation, else
    `default`) and the snapshot CPU class of the nodeSelector (a live pod without
    one is adopted).
    """
    if vm_spec_drifted(set_obj, pod):
        return True
    agent: Mapping[str, Any] = _spec(set_obj).get("agent") or {}
    spec: Mapping[str, Any] = pod.get("spec") or {}
    containers = spec.get("containers") or [{}]
    container: Mapping[str, Any] = containers[0] if containers else {}
    got = container.get("resources") or {}
    want = agent.get("resources") or {}
    want_req = want.get("requests") or want.get("limits") or {}
    for name in ("cpu", "memory"):
        if not _same_amount(got.get("limits") or {}, want.get("limits") or {}, name):
            return True
        if not _same_amount(got.get("requests") or {}, want_req, name):
            return True
    if (spec.get("serviceAccountName") or "default") != (
        agent.get("serviceAccountName") or "default"
    ):
        return True
    if list(container.get("envFrom") or []) != list(agent.get("envFrom") or []):
        return True
    selector: Mapping[str, str] = spec.get("nodeSelector") or {}
    pool = (
        selector.get(k.LABEL_POOL)
        or _labels(pod).get(k.LABEL_POOL)
        or _ann(pod).get(k.LABEL_POOL)
        or k.DEFAULT_POOL
    )
    if pool != (_spec(set_obj).get("nodePool") or k.DEFAULT_POOL):
        return True
    cls = selector.get(k.LABEL_SNAPSHOT_CPU_CLASS, "")
    want_cls = _spec(set_obj).get("snapshotCompatibilityClass") or ""
    return not (cls == want_cls or (cls == "" and not _pod_terminal(pod)))


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
    """The hibernate request is gone: vk-cocoon restores the VM from its :hibernate snapshot."""

    namespace: str
    name: str
    vm: str = ""
    node: str = ""


@dataclass(frozen=True, slots=True)
class DeletePod:
    """The operator deletes a pod (VM-spec drift), with a UID precondition."""

    namespace: str
    name: str
    uid: str


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
    | DeletePod
    | FinalizeDelete
)


def main_pod_body(set_obj: Mapping[str, Any]) -> JSON:
    """The normal flow's main pod: our builder (docs/design.md#main-pod), without the restore
    marker and without a hint (the operator's buildAgentPod has neither)."""
    body = build_main_pod(CocoonSet.model_validate(set_obj), hint="")
    del body["metadata"]["annotations"][k.ANN_RESTORE]
    return body


def decide_operator(set_obj: Mapping[str, Any], pods: Sequence[JSON]) -> list[Action]:
    ns, _ = _key(set_obj)
    phase = _phase(set_obj)
    suspended = bool(_spec(set_obj).get("suspend"))
    owned = _owned(set_obj, pods)
    live = [p for p in owned if not _terminating(p)]
    main = next((p for p in live if _labels(p).get(k.LABEL_ROLE) == k.ROLE_MAIN), None)
    generation = int(_meta(set_obj).get("generation") or 0)
    out: list[Action] = []

    # syncCocoonSetGeneration: every owned pod, every pass, before anything else.
    for p in live:
        if parse_go_int(_ann(p).get(k.ANN_GENERATION, "")) != generation:
            out.append(AnnotatePod(ns, _key(p)[1], {k.ANN_GENERATION: str(generation)}))
    # A failed main is the operator's Failed phase, whatever suspend says.
    if main is not None and _pod_terminal(main):
        if phase != Phase.FAILED.value:
            out.extend(_status(set_obj, live, Phase.FAILED))
        return out

    if not _is_release(set_obj) and suspended:
        # Minimal retain flow: the VM hibernates in place and keeps its seat.
        for p in live:
            if _ann(p).get(k.ANN_HIBERNATE) != k.TRUE:
                out.append(AnnotatePod(ns, _key(p)[1], {k.ANN_HIBERNATE: k.TRUE}))
        done = bool(live) and all(
            _ann(p).get(k.ANN_LIFECYCLE_STATE) == LifecycleState.HIBERNATED.value for p in live
        )
        want = Phase.SUSPENDED.value if done or not live else Phase.SUSPENDING.value
        out.extend(_status(set_obj, live, Phase(want)))
        return out

    if suspended:
        return out  # a suspended release set: the functions' business
    if not _is_release(set_obj) and phase in (Phase.SUSPENDING.value, Phase.SUSPENDED.value):
        # Retain unsuspend: resume in place, then the normal derivation takes over.
        for p in live:
            if _ann(p).get(k.ANN_HIBERNATE) is not None:
                out.append(AnnotatePod(ns, _key(p)[1], {k.ANN_HIBERNATE: None}))
        out.extend(_status(set_obj, live, Phase.PENDING))
        return out
    hint = _ann(set_obj).get(k.ANN_HIBERNATED_ON_NODE, "")
    fast_unsuspend = phase == Phase.SUSPENDING.value and not hint
    if phase not in _NORMAL_FLOW_PHASES and not fast_unsuspend:
        return out  # Suspended/Waking (or Suspending with the hint) of a release set, Failed
    unfinished_wake = (
        main is not None
        and _ann(main).get(k.ANN_RESTORE) == k.TRUE
        and _ann(main).get(k.ANN_HIBERNATE) != k.TRUE
        and bool(hint)
    )
    if unfinished_wake:
        return out  # the wake's (reconcileWake runs before the normal flow)
    # applyUnsuspend: the suspend is over, so is the hibernate request.
    for p in live:
        if _ann(p).get(k.ANN_HIBERNATE) is not None:
            out.append(AnnotatePod(ns, _key(p)[1], {k.ANN_HIBERNATE: None}))
    if main is not None and pod_spec_drifted(set_obj, main):
        # Drift: the pod goes and the next pass recreates it from the spec.
        out.append(DeletePod(ns, _key(main)[1], str(_meta(main).get("uid") or "")))
        return out
    if not owned and not (_is_release(set_obj) and _ann(set_obj).get(k.ANN_HIBERNATED_ON_NODE)):
        out.append(CreatePod(ns, main_pod_body(set_obj)))
    want = Phase.RUNNING if main is not None and _ready(main) else Phase.PENDING
    out.extend(_status(set_obj, live, want))
    return out


_STATUS_FIELDS = (
    "phase",
    "observedGeneration",
    "readyAgents",
    "desiredAgents",
    "readyToolboxes",
    "desiredToolboxes",
    "agents",
    "toolboxes",
)


def _condition_keys(conditions: Iterable[Mapping[str, Any]] | None) -> list[tuple[Any, ...]]:
    keys = ("type", "status", "reason", "message", "observedGeneration")
    return sorted(tuple(c.get(x) for x in keys) for c in conditions or ())


def _status(set_obj: Mapping[str, Any], live: Sequence[JSON], phase: Phase) -> list[Action]:
    """The operator's patchStatus(buildStatus(...)): the whole status, skipped when a no-op.

    The same builder as the functions' (the operator's rules), so the two never
    disagree about what a phase looks like.
    """
    ns, name = _key(set_obj)
    full = build_status(
        CocoonSet.model_validate(set_obj),
        tuple(Pod.model_validate(p) for p in live),
        phase,
        now=datetime.now(UTC),
    )
    current: Mapping[str, Any] = set_obj.get("status") or {}
    same = all(current.get(f) == full[f] for f in _STATUS_FIELDS) and _condition_keys(
        current.get("conditions")
    ) == _condition_keys(full["conditions"])
    if same:
        return []
    if current.get("phase") == full["phase"]:
        del full["phase"]  # unchanged: not a phase transition to narrate
    return [WriteSetStatus(ns, name, str(_meta(set_obj).get("resourceVersion") or ""), full)]


def seats_used(pods: Iterable[Mapping[str, Any]]) -> dict[str, int]:
    """Seats held per node: every pod bound to it that still exists (terminating included)."""
    used: dict[str, int] = {}
    for p in pods:
        node = _node_of(p)
        if node:
            used[node] = used.get(node, 0) + 1
    return used


def _gated(pod: Mapping[str, Any]) -> bool:
    return bool((pod.get("spec") or {}).get("schedulingGates"))


# How the simulated scheduler picks among pending pods when seats are short.
FIFO = "fifo"  # creation order: kinder than kube-scheduler
# The pod that entered the queue last is tried first: kube-scheduler's per-pod
# backoff (1 s doubling to 10 s per failed attempt) at its least kind, where the
# newest waiter has the shortest backoff when a seat frees.
NEWEST_FIRST = "newest-first"


def decide_scheduler(
    pods: Sequence[JSON],
    nodes: Sequence[NodeInfo],
    *,
    order: str = FIFO,
    entered: Mapping[str, int] | None = None,
) -> list[Action]:
    """Bind what fits, mark the rest unschedulable; gated pods are not considered.

    `entered` is when (a sequence number) each pod uid was first seen schedulable:
    the queue order of NEWEST_FIRST.
    """
    used = seats_used(pods)
    # A pod with scheduling gates never reaches the queue (kube-scheduler's PreEnqueue).
    pending = [p for p in pods if not _node_of(p) and not _terminating(p) and not _gated(p)]
    pending.sort(key=lambda p: (str(_meta(p).get("creationTimestamp") or ""), _key(p)))
    if order == NEWEST_FIRST:
        seen = entered or {}
        pending.sort(key=lambda p: seen.get(str(_meta(p).get("uid") or ""), 0), reverse=True)
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
    node_snapshots: Mapping[str, set[str]],
    booting: set[tuple[str, str]] | None = None,
) -> list[Action]:
    """vk-cocoon: it reads pods only (never a set), so it echoes the pod's own stamp."""
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
            elif ann.get(k.ANN_MANAGED) == k.TRUE:
                how = AUTO  # restores on its own if a :hibernate tag exists
            else:
                how = FRESH
            out.append(BootVM(ns, name, vm, node, how))
            continue
        state = ann.get(k.ANN_LIFECYCLE_STATE, "")
        if ann.get(k.ANN_HIBERNATE) == k.TRUE:
            # A running VM is snapshotted once; a hibernated one has nothing left
            # to snapshot, whatever its stamp says since.
            if state not in (LifecycleState.HIBERNATED.value, LifecycleState.FAILED.value):
                stamp = parse_go_int(ann.get(k.ANN_GENERATION, ""))
                out.append(HibernateVM(ns, name, vm, node, stamp))
        elif state == LifecycleState.HIBERNATED.value:
            out.append(ResumeVM(ns, name, vm, node))
    return out


def decide(
    sets: Sequence[JSON],
    pods: Sequence[JSON],
    nodes: Sequence[NodeInfo],
    node_snapshots: Mapping[str, set[str]],
    *,
    order: str = FIFO,
    entered: Mapping[str, int] | None = None,
    operator: bool = True,
) -> list[Action]:
    """Everything the simulated cluster would do next, given what it reads.

    `operator=False` leaves the operator out (devstack.sim_operator plays it instead).
    """
    out: list[Action] = []
    for s in sets if operator else ():
        out.extend(decide_operator(s, pods))
    out.extend(decide_scheduler(pods, nodes, order=order, entered=entered))
    out.extend(decide_vk(pods, node_snapshots))
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
        for p in pods:
            uid = str(_meta(p).get("uid") or "")
            if uid and uid not in self._entered and not _node_of(p) and not _gated(p):
                self._entered[uid] = len(self._entered) + 1
        actions = decide(
            sets,
            pods,
            [n.info() for n in self.nodes],
            self.node_snapshots,
            order=self.scheduler_order,
            entered=self._entered,
            operator=self.play_operator,
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
            # In place: warm from the node's own copy when it kept one, else a pull.
            how = WARM if action.vm in self.node_snapshots.get(action.node, set()) else COLD
            api.merge_patch(
                pod_path(action.namespace, action.name),
                {
                    "metadata": {
                        "annotations": {
                            k.ANN_LIFECYCLE_STATE: LifecycleState.READY.value,
                            k.ANN_LIFECYCLE_MESSAGE: MSG_RESTORED.format(how=how, node=action.node),
                        }
                    }
                },
            )
            self.restores.append(
                Restore(action.namespace, action.name, action.vm, action.node, how)
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
        if how == AUTO:
            # vk-cocoon restores a VM whose :hibernate snapshot exists, marker or not.
            tagged = _manifest_exists(
                self.registry_url, self._registry_repository(action.vm), k.TAG_HIBERNATE
            )
            warm = action.vm in self.node_snapshots.get(action.node, set())
            how = (WARM if warm else COLD) if tagged else FRESH
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
