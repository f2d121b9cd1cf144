"""The main pod a wake creates, built purely from the set: a placeholder whose annotations
vk-cocoon runs as the VM. Never `spec.nodeName`: a pin is a required node affinity (the
scheduler still checks the node), a hint only a preferred one (no wake waits for one node).
"""

from __future__ import annotations

from typing import Any

from shared import constants as k
from shared.models import CocoonSet, dump
from shared.names import main_pod_name, vm_name
from shared.quantity import canonical_quantity, quantity_is_zero

__all__ = ["build_main_pod", "quantity_is_zero", "vm_spec_annotations"]


def vm_spec_annotations(cs: CocoonSet, *, vm: str | None = None) -> dict[str, str]:
    """The main VM's spec annotations for vk-cocoon, empty values omitted. `vm`: the name the
    snapshot was recorded under (a wake); else today's derived name."""
    agent = cs.spec.agent
    ann: dict[str, str] = {
        k.ANN_VM_NAME: vm or vm_name(cs.namespace, cs.name, 0),
        k.ANN_IMAGE: agent.image,
        k.ANN_MODE: agent.mode.value,
        k.ANN_OS: agent.os.value,
        # Canonical, as the operator prints it: it compares these strings to detect drift.
        k.ANN_STORAGE: "" if agent.storage is None else canonical_quantity(agent.storage),
        k.ANN_NETWORK: agent.network or "",
        k.ANN_SNAPSHOT_POLICY: cs.spec.snapshot_policy.value,
        k.ANN_MANAGED: k.TRUE,
        k.ANN_FORCE_PULL: k.TRUE if agent.force_pull else "",
        k.ANN_NO_DIRECT_IO: k.TRUE if agent.no_direct_io else "",
        k.ANN_CONN_TYPE: agent.conn_type.value if agent.conn_type else "",
        k.ANN_BACKEND: agent.backend.value,
        k.ANN_PROBE_PORT: str(agent.probe_port) if agent.probe_port else "",
    }
    return {key: value for key, value in ann.items() if value}


def _resources(cs: CocoonSet) -> dict[str, Any]:
    agent = cs.spec.agent
    res: dict[str, Any] = dump(agent.resources) if agent.resources is not None else {}
    if agent.storage is not None and not quantity_is_zero(agent.storage):
        storage = canonical_quantity(agent.storage)
        # Request and limit both: the scheduler reserves the disk the VM will
        # use, and the kubelet never lets the placeholder grow past it.
        res["requests"] = {**(res.get("requests") or {}), "ephemeral-storage": storage}
        res["limits"] = {**(res.get("limits") or {}), "ephemeral-storage": storage}
    return res


def _hostname_term(node: str) -> dict[str, Any]:
    return {"matchExpressions": [{"key": k.LABEL_HOSTNAME, "operator": "In", "values": [node]}]}


def _affinity(cs: CocoonSet, hint: str) -> dict[str, Any] | None:
    if cs.spec.node_name:  # the pin wins over the hint: the user asked for that node
        pinned = {"nodeSelectorTerms": [_hostname_term(cs.spec.node_name)]}
        return {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": pinned}}
    if hint:
        hinted = [{"weight": k.HINT_AFFINITY_WEIGHT, "preference": _hostname_term(hint)}]
        return {"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": hinted}}
    return None


def build_main_pod(cs: CocoonSet, *, hint: str, vm: str | None = None) -> dict[str, Any]:
    """The restore-intent main pod of `cs`; `vm`: the name its snapshot is under."""
    agent = cs.spec.agent
    annotations = vm_spec_annotations(cs, vm=vm)
    annotations[k.ANN_GENERATION] = str(cs.generation)
    annotations[k.ANN_RESTORE] = k.TRUE

    container: dict[str, Any] = {
        "name": k.MAIN_CONTAINER,
        "image": k.PLACEHOLDER_IMAGE,
        "resources": _resources(cs),
    }
    if agent.env_from:
        container["envFrom"] = [dump(e) for e in agent.env_from]

    node_selector = {k.LABEL_POOL: cs.spec.node_pool or k.DEFAULT_POOL}
    if cs.spec.snapshot_compatibility_class:
        node_selector[k.LABEL_SNAPSHOT_CPU_CLASS] = cs.spec.snapshot_compatibility_class

    spec: dict[str, Any] = {
        "containers": [container],
        "terminationGracePeriodSeconds": k.POD_GRACE_SECONDS,
        "tolerations": [
            {"key": k.TOLERATION_VK_PROVIDER, "operator": "Exists"},
            {"key": k.TOLERATION_NOT_READY, "operator": "Exists", "effect": "NoExecute"},
            {"key": k.TOLERATION_UNREACHABLE, "operator": "Exists", "effect": "NoExecute"},
        ],
        "nodeSelector": node_selector,
    }
    if agent.service_account_name:
        spec["serviceAccountName"] = agent.service_account_name
    affinity = _affinity(cs, hint)
    if affinity is not None:
        spec["affinity"] = affinity

    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": main_pod_name(cs.name),
            "namespace": cs.namespace,
            "labels": {
                k.LABEL_SET_NAME: cs.name,
                k.LABEL_ROLE: k.ROLE_MAIN,
                k.LABEL_SLOT: "0",
                k.LABEL_APP_NAME: cs.name,
            },
            "annotations": annotations,
            "ownerReferences": [
                {
                    "apiVersion": k.API_VERSION,
                    "kind": k.KIND,
                    "name": cs.name,
                    "uid": cs.metadata.uid or "",
                    "controller": True,
                    "blockOwnerDeletion": True,
                }
            ],
        },
        "spec": spec,
    }
