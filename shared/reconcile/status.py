"""The whole `status` the operator would write for a phase, built from the owned pods.

A phase written alone would sit beside a stale `Ready=True` or `observedGeneration`; built
from the same inputs with the operator's rules, whichever writer writes last, the status agrees.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from shared import constants as k
from shared.durations import format_rfc3339
from shared.enums import CocoonSetPhase as Phase
from shared.models import CocoonSet, Condition, Pod

READY = "Ready"
PROGRESSING = "Progressing"
REASON_ALL_READY = "AllAgentsReady"
REASON_NOT_READY = "AgentsNotReady"
REASON_STABLE = "Stable"
REASON_RECONCILING = "Reconciling"


def _agent_entry(pod: Pod, slot: int, role: str, forked_from: str) -> dict[str, Any]:
    entry: dict[str, Any] = {"slot": slot, "role": role}
    for key, value in (
        ("podName", pod.name),
        ("vmName", pod.vm_name),
        ("vmID", pod.annotations.get(k.ANN_VM_ID, "")),
        ("ip", pod.annotations.get(k.ANN_VM_IP, "")),
        ("phase", pod.status.phase or ""),
        ("forkedFrom", forked_from),
    ):
        if value:  # the Go fields are `omitempty`
            entry[key] = value
    return entry


def _slot(pod: Pod) -> int | None:
    raw = pod.labels.get(k.LABEL_SLOT, "")
    return int(raw) if raw.isascii() and raw.isdigit() else None


def _conditions(
    cs: CocoonSet, *, ready: int, desired: int, tb_ready: int, tb_desired: int, phase: Phase
) -> list[dict[str, Any]]:
    all_ready = ready == desired and desired > 0 and tb_ready == tb_desired
    progressing = phase in (Phase.PENDING, Phase.SCALING)
    return [
        {
            "type": READY,
            "status": "True" if all_ready else "False",
            "reason": REASON_ALL_READY if all_ready else REASON_NOT_READY,
            "message": f"{ready}/{desired} agents ready, {tb_ready}/{tb_desired} toolboxes ready",
            "observedGeneration": cs.generation,
        },
        {
            "type": PROGRESSING,
            "status": "True" if progressing else "False",
            "reason": REASON_RECONCILING if progressing else REASON_STABLE,
            "message": phase.value,
            "observedGeneration": cs.generation,
        },
    ]


def _merge(
    previous: list[Condition] | None, new: list[dict[str, Any]], now: datetime
) -> list[dict[str, Any]]:
    """Conditions keep `lastTransitionTime` unless their status flips; other types are kept."""
    merged: list[dict[str, Any]] = [
        c.model_dump(by_alias=True, exclude_none=True, mode="json") for c in previous or ()
    ]
    for cond in new:
        old = next((c for c in merged if c.get("type") == cond["type"]), None)
        if old is None:
            merged.append({**cond, "lastTransitionTime": format_rfc3339(now)})
            continue
        if old.get("status") != cond["status"]:
            old["lastTransitionTime"] = format_rfc3339(now)
        old.update(cond)
    return merged


def build_status(
    cs: CocoonSet,
    pods: tuple[Pod, ...],
    phase: Phase,
    *,
    now: datetime,
    observed_generation: bool = True,
) -> dict[str, Any]:
    """The `status` merge patch for `phase` from the owned pods (those being deleted left out).
    `observed_generation` False leaves that field out: beside a cocoon-operator it is the
    operator's proof of what its cache has seen, so only it may write it."""
    live = [p for p in pods if not p.terminating]
    main = next((p for p in live if p.role == k.ROLE_MAIN), None)
    replicas = cs.spec.agent.replicas or 0
    desired = 1 + replicas
    ready = 0
    agents: list[dict[str, Any]] = []
    main_vm = ""
    if main is not None:
        ready += main.ready
        main_vm = main.vm_name
        agents.append(_agent_entry(main, 0, k.ROLE_MAIN, ""))
    subs = sorted(
        ((s, p) for p in live if p.role == k.ROLE_SUB_AGENT and (s := _slot(p)) is not None),
        key=lambda sp: sp[0],
    )
    for slot, pod in subs:
        ready += pod.ready
        agents.append(_agent_entry(pod, slot, k.ROLE_SUB_AGENT, main_vm))
    tb_desired = len(cs.spec.toolboxes or ())
    tb_ready = 0
    toolboxes: list[dict[str, Any]] = []
    for pod in sorted(
        (p for p in live if p.role == k.ROLE_TOOLBOX), key=lambda p: p.labels.get(k.LABEL_SLOT, "")
    ):
        tb_ready += pod.ready
        entry = {"name": pod.labels.get(k.LABEL_SLOT, "")}
        for key, value in (
            ("podName", pod.name),
            ("vmName", pod.vm_name),
            ("vmID", pod.annotations.get(k.ANN_VM_ID, "")),
            ("ip", pod.annotations.get(k.ANN_VM_IP, "")),
            ("phase", pod.status.phase or ""),
        ):
            if value:
                entry[key] = value
        toolboxes.append(entry)
    out: dict[str, Any] = {
        "observedGeneration": cs.generation,
        "phase": phase.value,
        "readyAgents": ready,
        "desiredAgents": desired,
        "readyToolboxes": tb_ready,
        "desiredToolboxes": tb_desired,
        # `omitempty` in the operator's type: an empty list is no list (null deletes it).
        "agents": agents or None,
        "toolboxes": toolboxes or None,
        "conditions": _merge(
            cs.status.conditions,
            _conditions(
                cs,
                ready=ready,
                desired=desired,
                tb_ready=tb_ready,
                tb_desired=tb_desired,
                phase=phase,
            ),
            now,
        ),
    }
    if not observed_generation:
        del out["observedGeneration"]
    return out
