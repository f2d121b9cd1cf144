"""The simulator's operator: cocoon-operator's normal flow (docs/design.md#operator).

As cocoon-operator's source behaves where the functions meet it: it keeps only
the pods a set *controls* (controller ownerReference with the set's uid),
stamps the set's ``metadata.generation`` on every one of them first, on every
pass; a failed main (pod phase ``Failed`` or lifecycle ``failed``) makes the
phase ``Failed`` before anything else. For a set that is not suspended and
whose phase is unset, ``Pending``, ``Running`` (or ``Suspending`` without a
hint, a fast unsuspend): clears ``hibernate`` on its pods, deletes a main pod
that drifted from what it would build (its podSpecMatchesAgent: the VM-spec
annotations *as strings*, CPU/memory resources, service account, envFrom,
node pool and CPU class; the next pass recreates it), creates the main pod
(the same builder as the functions' wake, *without* the restore marker) when
the set has no pods, and derives the phase (``Pending`` -> ``Running`` once the
main pod is Ready) with ``status.agents``. It never writes
``Suspending``/``Suspended``/``Waking`` for a release-policy set and never
creates a pod for a set in those phases: those belong to the functions. A
suspended *retain* set gets the minimal retain flow: ``hibernate=true`` on its
pods, ``Suspending`` then ``Suspended`` once vk reports them hibernated, and
back on unsuspend. Sub-agents and toolboxes are not simulated (release sets
have none).

The upstream operator's own slot release and wake are
:mod:`devstack.sim_operator`'s, which runs instead of this one when asked.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from devstack.kubehttp import JSON
from devstack.sim_pods import (
    ann_of,
    condition_keys,
    is_ready,
    is_release,
    key_of,
    labels_of,
    main_pod_body,
    meta_of,
    owned_pods,
    phase_of,
    pod_spec_drifted,
    pod_terminal,
    spec_of,
    terminating,
)
from devstack.upstream import Upstream
from shared import constants as k
from shared.enums import CocoonSetPhase as Phase
from shared.enums import LifecycleState
from shared.models import CocoonSet, Pod, parse_go_int
from shared.reconcile.status import build_status

_NORMAL_FLOW_PHASES = {None, "", Phase.PENDING.value, Phase.RUNNING.value}


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
class DeletePod:
    """The operator deletes a pod (VM-spec drift), with a UID precondition."""

    namespace: str
    name: str
    uid: str


OperatorAction = CreatePod | WriteSetStatus | AnnotatePod | DeletePod


def decide_operator(
    set_obj: Mapping[str, Any], pods: Sequence[JSON], upstream: Upstream = Upstream.TODAY
) -> list[OperatorAction]:
    ns, _ = key_of(set_obj)
    phase = phase_of(set_obj)
    suspended = bool(spec_of(set_obj).get("suspend"))
    owned = owned_pods(set_obj, pods)
    live = [p for p in owned if not terminating(p)]
    main = next((p for p in live if labels_of(p).get(k.LABEL_ROLE) == k.ROLE_MAIN), None)
    generation = int(meta_of(set_obj).get("generation") or 0)
    out: list[OperatorAction] = []

    # syncCocoonSetGeneration: every owned pod, every pass, before anything else.
    for p in live:
        if parse_go_int(ann_of(p).get(k.ANN_GENERATION, "")) != generation:
            out.append(AnnotatePod(ns, key_of(p)[1], {k.ANN_GENERATION: str(generation)}))
    # A failed main is the operator's Failed phase: whatever suspend says in August;
    # today spec.suspend is checked first (a suspend settles instead).
    suspend_first = upstream is Upstream.TODAY and suspended
    if main is not None and pod_terminal(main) and not suspend_first:
        if phase != Phase.FAILED.value:
            out.extend(_status(set_obj, live, Phase.FAILED))
        return out

    if not is_release(set_obj) and suspended:
        # Minimal retain flow: the VM hibernates in place and keeps its seat.
        for p in live:
            if ann_of(p).get(k.ANN_HIBERNATE) != k.TRUE:
                out.append(AnnotatePod(ns, key_of(p)[1], {k.ANN_HIBERNATE: k.TRUE}))
        done = bool(live) and all(
            ann_of(p).get(k.ANN_LIFECYCLE_STATE) == LifecycleState.HIBERNATED.value for p in live
        )
        want = Phase.SUSPENDED.value if done or not live else Phase.SUSPENDING.value
        out.extend(_status(set_obj, live, Phase(want)))
        return out

    if suspended:
        return out  # a suspended release set: the functions' business
    if not is_release(set_obj) and phase in (Phase.SUSPENDING.value, Phase.SUSPENDED.value):
        # Retain unsuspend: resume in place, then the normal derivation takes over.
        for p in live:
            if ann_of(p).get(k.ANN_HIBERNATE) is not None:
                out.append(AnnotatePod(ns, key_of(p)[1], {k.ANN_HIBERNATE: None}))
        out.extend(_status(set_obj, live, Phase.PENDING))
        return out
    hint = ann_of(set_obj).get(k.ANN_HIBERNATED_ON_NODE, "")
    fast_unsuspend = phase == Phase.SUSPENDING.value and not hint
    if phase not in _NORMAL_FLOW_PHASES and not fast_unsuspend:
        return out  # Suspended/Waking (or Suspending with the hint) of a release set, Failed
    unfinished_wake = (
        main is not None
        and ann_of(main).get(k.ANN_RESTORE) == k.TRUE
        and ann_of(main).get(k.ANN_HIBERNATE) != k.TRUE
        and bool(hint)
    )
    if unfinished_wake:
        return out  # the wake's (reconcileWake runs before the normal flow)
    # applyUnsuspend: the suspend is over, so is the hibernate request.
    for p in live:
        if ann_of(p).get(k.ANN_HIBERNATE) is not None:
            out.append(AnnotatePod(ns, key_of(p)[1], {k.ANN_HIBERNATE: None}))
    if main is not None and pod_spec_drifted(set_obj, main):
        # Drift: the pod goes and the next pass recreates it from the spec.
        out.append(DeletePod(ns, key_of(main)[1], str(meta_of(main).get("uid") or "")))
        return out
    if not owned and not (is_release(set_obj) and ann_of(set_obj).get(k.ANN_HIBERNATED_ON_NODE)):
        out.append(CreatePod(ns, main_pod_body(set_obj, upstream)))
    want = Phase.RUNNING if main is not None and is_ready(main) else Phase.PENDING
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


def _status(set_obj: Mapping[str, Any], live: Sequence[JSON], phase: Phase) -> list[OperatorAction]:
    """The operator's patchStatus(buildStatus(...)): the whole status, skipped when a no-op.

    The same builder as the functions' (the operator's rules), so the two never
    disagree about what a phase looks like.
    """
    ns, name = key_of(set_obj)
    full = build_status(
        CocoonSet.model_validate(set_obj),
        tuple(Pod.model_validate(p) for p in live),
        phase,
        now=datetime.now(UTC),
    )
    current: Mapping[str, Any] = set_obj.get("status") or {}
    same = all(current.get(f) == full[f] for f in _STATUS_FIELDS) and condition_keys(
        current.get("conditions")
    ) == condition_keys(full["conditions"])
    if same:
        return []
    if current.get("phase") == full["phase"]:
        del full["phase"]  # unchanged: not a phase transition to narrate
    return [WriteSetStatus(ns, name, str(meta_of(set_obj).get("resourceVersion") or ""), full)]
