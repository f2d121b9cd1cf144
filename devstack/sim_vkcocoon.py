"""The simulator's vk-cocoon: the virtual kubelet that boots, restores and hibernates VMs.

On a bound pod without a VM it "boots" one (VM id, IP, lifecycle ``ready``, a
Running and Ready container through ``/status``). A restore-marked pod restores
*warm* when its node still holds that VM's node-local snapshot (the node it
hibernated on, and the pod was deleted with ``keep-snapshot-on-delete``), else
*cold* by pulling ``:hibernate`` from the registry; a managed pod *without* the
marker restores the same way on its own when the registry has a ``:hibernate``
tag for its VM, and boots fresh only when it has none. The outcome is written
to ``lifecycle-state-message`` and kept in ``Simulator.restores``
(:class:`Restore`). On ``hibernate=true`` it snapshots a running VM once, in
vk-cocoon's order (:mod:`devstack.vkorder`): lifecycle ``hibernating``, push a
real ``<prefix>/<vm>:hibernate`` image to the registry, remove the VM
(``report_gap`` seconds, off the tick), and only then write lifecycle
``hibernated`` with the observed generation -- the *pod's*
``cocoonset.cocoonstack.io/generation`` stamp, never the set's (it does not
read the set) -- in one patch. A pod being deleted is finalized at once
(grace 0); a deleted pod's seat frees. Its VM statistics are served as
metrics-server's PodMetrics.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from devstack.kubehttp import JSON
from devstack.sim_pods import ann_of, key_of, meta_of, node_of, terminating
from shared import constants as k
from shared.enums import LifecycleState
from shared.models import parse_go_int

WARM = "warm"
COLD = "cold"
# Today's vk-cocoon, off the node that pushed: the snapshot is copied from that node
# (snapshots/peer.go) before it falls back to a registry pull.
PEER = "peer"
FRESH = "fresh"
# No restore marker: vk-cocoon restores if the registry has a `:hibernate` tag, else boots fresh.
AUTO = "auto"
MSG_RESTORED = "restored {how} on {node}"

# An idle VM still uses a little CPU (guest timers, the agent's heartbeat).
IDLE_CPU = "2m"


def metrics_path(namespace: str, name: str | None = None) -> str:
    base = f"/apis/metrics.k8s.io/v1beta1/namespaces/{namespace}/pods"
    return f"{base}/{name}" if name else base


@dataclass(frozen=True, slots=True)
class BootVM:
    namespace: str
    name: str
    vm: str
    node: str
    how: str  # WARM, COLD (PEER once booted) or FRESH


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
class RepublishState:
    """Today's vk-cocoon (republishLifecycleOnGenerationBump): a bare stamp bump on a pod
    re-marks its current state at the new generation, so a report is never frozen."""

    namespace: str
    name: str
    generation: int


@dataclass(frozen=True, slots=True)
class FinalizeDelete:
    namespace: str
    name: str
    uid: str


VkAction = BootVM | HibernateVM | ResumeVM | RepublishState | FinalizeDelete


@dataclass(frozen=True, slots=True)
class Restore:
    namespace: str
    pod: str
    vm: str
    node: str
    how: str


def decide_vk(
    pods: Sequence[JSON],
    node_snapshots: Mapping[str, set[str]],
    booting: set[tuple[str, str]] | None = None,
    *,
    republish: bool = False,
) -> list[VkAction]:
    """vk-cocoon: it reads pods only (never a set), so it echoes the pod's own stamp.

    `republish`: today's, which re-reports a hibernated pod's state when its stamp moves on.
    """
    out: list[VkAction] = []
    for pod in pods:
        ns, name = key_of(pod)
        node = node_of(pod)
        ann = ann_of(pod)
        vm = ann.get(k.ANN_VM_NAME, "")
        if terminating(pod):
            out.append(FinalizeDelete(ns, name, str(meta_of(pod).get("uid") or "")))
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
            stamp = parse_go_int(ann.get(k.ANN_GENERATION, ""))
            if state not in (LifecycleState.HIBERNATED.value, LifecycleState.FAILED.value):
                out.append(HibernateVM(ns, name, vm, node, stamp))
            elif (
                republish
                and state == LifecycleState.HIBERNATED.value
                and stamp > parse_go_int(ann.get(k.ANN_LIFECYCLE_GENERATION, ""))
            ):
                out.append(RepublishState(ns, name, stamp))
        elif state == LifecycleState.HIBERNATED.value:
            out.append(ResumeVM(ns, name, vm, node))
    return out


def running_status(ip: str, now: str) -> JSON:
    """A booted VM's pod status: Running, every condition True, the main container up."""
    return {
        "phase": "Running",
        "podIP": ip,
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


def pod_metrics(
    namespace: str, name: str, labels: Mapping[str, str], cpu: str, window: str, now: str
) -> JSON:
    """vk-cocoon's stats of one VM as metrics-server serves them (a PodMetrics)."""
    return {
        "apiVersion": "metrics.k8s.io/v1beta1",
        "kind": "PodMetrics",
        # metrics-server copies the pod's labels, so label selectors work.
        "metadata": {"name": name, "namespace": namespace, "labels": dict(labels)},
        "timestamp": now,
        "window": window,
        "containers": [{"name": k.MAIN_CONTAINER, "usage": {"cpu": cpu, "memory": "512Mi"}}],
    }
