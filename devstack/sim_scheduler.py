"""The simulator's kube-scheduler: binds each unbound pod to a node of its pool.

Placement is :mod:`devstack.placement` (nodeSelector, required and preferred
node affinity, a fixed number of *seats* per node; a pod holds a seat while it
is bound and still exists). Binding goes through the ``binding`` subresource,
as kube-scheduler's does. A pod with ``spec.schedulingGates`` is not considered
(kube-scheduler's PreEnqueue). The pick among pending pods is creation order
(``FIFO``), or ``NEWEST_FIRST``: kube-scheduler's per-pod backoff at its least
kind, where the pod that entered the queue last is tried first. When nothing
fits it writes ``PodScheduled=False``, reason ``Unschedulable``, with a
kube-scheduler shaped message, once per distinct message.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from devstack.kubehttp import JSON, KubeHTTP, pod_path
from devstack.placement import Bind, NodeInfo, place
from devstack.sim_pods import (
    gated,
    key_of,
    meta_of,
    node_of,
    now_rfc3339,
    terminating,
    unschedulable_message,
)


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


SchedulerAction = BindPod | MarkUnschedulable


def seats_used(pods: Iterable[Mapping[str, Any]]) -> dict[str, int]:
    """Seats held per node: every pod bound to it that still exists (terminating included)."""
    used: dict[str, int] = {}
    for p in pods:
        node = node_of(p)
        if node:
            used[node] = used.get(node, 0) + 1
    return used


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
) -> list[SchedulerAction]:
    """Bind what fits, mark the rest unschedulable; gated pods are not considered.

    `entered` is when (a sequence number) each pod uid was first seen schedulable:
    the queue order of NEWEST_FIRST.
    """
    used = seats_used(pods)
    # A pod with scheduling gates never reaches the queue (kube-scheduler's PreEnqueue).
    pending = [p for p in pods if not node_of(p) and not terminating(p) and not gated(p)]
    pending.sort(key=lambda p: (str(meta_of(p).get("creationTimestamp") or ""), key_of(p)))
    if order == NEWEST_FIRST:
        seen = entered or {}
        pending.sort(key=lambda p: seen.get(str(meta_of(p).get("uid") or ""), 0), reverse=True)
    out: list[SchedulerAction] = []
    for pod in pending:
        ns, name = key_of(pod)
        placement = place(pod.get("spec") or {}, nodes, used)
        if isinstance(placement, Bind):
            used[placement.node] = used.get(placement.node, 0) + 1
            out.append(BindPod(ns, name, placement.node))
        elif unschedulable_message(pod) != placement.message:
            out.append(MarkUnschedulable(ns, name, placement.message))
    return out


def bind(api: KubeHTTP, action: BindPod) -> None:
    # The binding subresource, as kube-scheduler does: the API server sets
    # spec.nodeName and PodScheduled=True, and refuses (409) an already bound pod.
    api.post(
        pod_path(action.namespace, action.name) + "/binding",
        {
            "apiVersion": "v1",
            "kind": "Binding",
            "metadata": {"name": action.name, "namespace": action.namespace},
            "target": {"apiVersion": "v1", "kind": "Node", "name": action.node},
        },
    )


def mark_unschedulable(api: KubeHTTP, action: MarkUnschedulable) -> None:
    status = {
        "phase": "Pending",
        "conditions": [
            {
                "type": "PodScheduled",
                "status": "False",
                "reason": "Unschedulable",
                "message": action.message,
                "lastTransitionTime": now_rfc3339(),
            }
        ],
    }
    api.merge_patch(pod_path(action.namespace, action.name) + "/status", {"status": status})
