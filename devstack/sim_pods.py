"""What the simulated actors read off pods and sets, and the operator's own main pod.

Shared by the simulator's actors (:mod:`devstack.sim_scheduler`,
:mod:`devstack.sim_normal_flow`, :mod:`devstack.sim_vkcocoon`) and by the
upstream operator model (:mod:`devstack.sim_operator`): one reading of the world
for all of them, so two stand-ins never disagree about what a pod says. The
operator's pod (its builder and its drift check, podSpecMatchesAgent) is here
because both operator plays create and compare the same one
(docs/design.md#operator).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import UTC, datetime
from fractions import Fraction
from typing import Any

import requests

from devstack.kubehttp import JSON, KubeHTTP
from devstack.upstream import Upstream, agent_vm_name
from shared import constants as k
from shared.enums import LifecycleState
from shared.models import CocoonSet
from shared.quantity import QuantityError, canonical_quantity, parse_quantity
from shared.reconcile.mainpod import build_main_pod, vm_spec_annotations

# The manifest media types a registry client accepts (OCI first, then Docker v2).
MANIFEST_ACCEPT = ", ".join(
    [
        "application/vnd.oci.image.manifest.v1+json",
        "application/vnd.docker.distribution.manifest.v2+json",
    ]
)


def meta_of(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    meta: Mapping[str, Any] = obj.get("metadata") or {}
    return meta


def ann_of(obj: Mapping[str, Any]) -> Mapping[str, str]:
    ann: Mapping[str, str] = meta_of(obj).get("annotations") or {}
    return ann


def labels_of(obj: Mapping[str, Any]) -> Mapping[str, str]:
    labels: Mapping[str, str] = meta_of(obj).get("labels") or {}
    return labels


def key_of(obj: Mapping[str, Any]) -> tuple[str, str]:
    meta = meta_of(obj)
    return str(meta.get("namespace") or "default"), str(meta.get("name") or "")


def terminating(pod: Mapping[str, Any]) -> bool:
    return meta_of(pod).get("deletionTimestamp") is not None


def node_of(pod: Mapping[str, Any]) -> str:
    return str((pod.get("spec") or {}).get("nodeName") or "")


def is_ready(pod: Mapping[str, Any]) -> bool:
    conds = (pod.get("status") or {}).get("conditions") or []
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conds)


def unschedulable_message(pod: Mapping[str, Any]) -> str | None:
    for c in (pod.get("status") or {}).get("conditions") or []:
        if (
            c.get("type") == "PodScheduled"
            and c.get("status") == "False"
            and c.get("reason") == "Unschedulable"
        ):
            return str(c.get("message") or "")
    return None


def controller_uid(pod: Mapping[str, Any]) -> str:
    refs = meta_of(pod).get("ownerReferences") or []
    ref = next((r for r in refs if r.get("controller")), None)
    return str(ref.get("uid") or "") if ref is not None else ""


def owned_pods(set_obj: Mapping[str, Any], pods: Iterable[JSON]) -> list[JSON]:
    """Labelled pods the set controls (metav1.IsControlledBy), as the operator keeps them."""
    ns, name = key_of(set_obj)
    uid = str(meta_of(set_obj).get("uid") or "")
    return [
        p
        for p in pods
        if key_of(p)[0] == ns
        and labels_of(p).get(k.LABEL_SET_NAME) == name
        and uid
        and controller_uid(p) == uid
    ]


def pod_terminal(pod: Mapping[str, Any]) -> bool:
    return (pod.get("status") or {}).get("phase") == "Failed" or ann_of(pod).get(
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
    want[k.ANN_VM_NAME] = ann_of(pod).get(k.ANN_VM_NAME, "")  # the operator copies the name
    # Stated here, not inherited from the wake's builder: the operator's storage string is
    # the parsed quantity's String() (meta.QuantityString), whatever the user typed.
    storage = cs.spec.agent.storage
    want[k.ANN_STORAGE] = "" if storage is None else canonical_quantity(storage)
    have = ann_of(pod)
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
    agent: Mapping[str, Any] = spec_of(set_obj).get("agent") or {}
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
        or labels_of(pod).get(k.LABEL_POOL)
        or ann_of(pod).get(k.LABEL_POOL)
        or k.DEFAULT_POOL
    )
    if pool != (spec_of(set_obj).get("nodePool") or k.DEFAULT_POOL):
        return True
    cls = selector.get(k.LABEL_SNAPSHOT_CPU_CLASS, "")
    want_cls = spec_of(set_obj).get("snapshotCompatibilityClass") or ""
    return not (cls == want_cls or (cls == "" and not pod_terminal(pod)))


def spec_of(set_obj: Mapping[str, Any]) -> Mapping[str, Any]:
    spec: Mapping[str, Any] = set_obj.get("spec") or {}
    return spec


def phase_of(set_obj: Mapping[str, Any]) -> str | None:
    status = set_obj.get("status") or {}
    phase = status.get("phase")
    return str(phase) if phase else None


def is_release(set_obj: Mapping[str, Any]) -> bool:
    return spec_of(set_obj).get("hibernatePolicy") == "release"


def now_rfc3339() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def gated(pod: Mapping[str, Any]) -> bool:
    return bool((pod.get("spec") or {}).get("schedulingGates"))


def condition_keys(conditions: Iterable[Mapping[str, Any]] | None) -> list[tuple[Any, ...]]:
    keys = ("type", "status", "reason", "message", "observedGeneration")
    return sorted(tuple(c.get(x) for x in keys) for c in conditions or ())


def main_pod_body(set_obj: Mapping[str, Any], upstream: Upstream = Upstream.TODAY) -> JSON:
    """The normal flow's main pod: our builder (docs/design.md#main-pod), without the restore
    marker and without a hint (the operator's buildAgentPod has neither), its VM named as
    that generation of cocoon-common names it."""
    cs = CocoonSet.model_validate(set_obj)
    vm = agent_vm_name(upstream, cs.namespace, cs.name, 0)
    body = build_main_pod(cs, hint="", vm=vm)
    del body["metadata"]["annotations"][k.ANN_RESTORE]
    return body


def operator_main_pod(
    set_obj: Mapping[str, Any],
    annotations: Mapping[str, str],
    *,
    node: str,
    namespace: str | None = None,
) -> JSON:
    """A set's main pod as cocoon-operator builds it: labelled, controlled by the set (its
    uid), bound to `node`, with the given annotations -- where the trigger rig and the
    release benchmark start a release from (the VM's state is in the annotations)."""
    name = str(meta_of(set_obj)["name"])
    meta: JSON = {"name": f"{name}-0"}
    if namespace is not None:
        meta["namespace"] = namespace
    meta["labels"] = {k.LABEL_SET_NAME: name, k.LABEL_ROLE: k.ROLE_MAIN, k.LABEL_SLOT: "0"}
    meta["ownerReferences"] = [
        {
            "apiVersion": k.API_VERSION,
            "kind": k.KIND,
            "name": name,
            "uid": meta_of(set_obj)["uid"],
            "controller": True,
        }
    ]
    meta["annotations"] = dict(annotations)
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": meta,
        "spec": {
            "nodeName": node,
            "containers": [{"name": k.MAIN_CONTAINER, "image": k.PLACEHOLDER_IMAGE}],
        },
    }


# --- writes and the registry, as every actor makes them ---------------------------------


def patch_annotations(api: KubeHTTP, path: str, annotations: Mapping[str, str | None]) -> None:
    """A merge patch of an object's annotations (None deletes a key)."""
    api.merge_patch(path, {"metadata": {"annotations": dict(annotations)}})


def record_error(errors: list[str], text: str) -> None:
    """Keep the last 50 distinct errors, a repeat of the newest counted once."""
    if not errors or errors[-1] != text:
        errors.append(text)
        del errors[:-50]


def repository(prefix: str, vm: str) -> str:
    """The registry repository of a VM under the ``COCOON_REGISTRY_BASE`` prefix."""
    return f"{prefix}/{vm}" if prefix else vm


def manifest_url(registry_url: str, repo: str, ref: str) -> str:
    return f"{registry_url.rstrip('/')}/v2/{repo}/manifests/{ref}"


def manifest_exists(registry_url: str, repo: str, tag: str) -> bool:
    """A real GET of the manifest (vk-cocoon's pull): 200 is there, anything else is not."""
    resp = requests.get(
        manifest_url(registry_url, repo, tag), headers={"Accept": MANIFEST_ACCEPT}, timeout=5
    )
    return resp.status_code == 200
