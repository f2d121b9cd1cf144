"""The whole `status` the operator would write for a phase, built from the owned pods: a
phase written alone would sit beside a stale `Ready=True` or `observedGeneration`; built with
the operator's rules, whichever writer writes last, the status agrees.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from shared import constants as k
from shared.durations import format_rfc3339
from shared.enums import CocoonSetPhase as Phase
from shared.models import CocoonSet, Condition, Pod


def _entry(pod: Pod, fixed: dict[str, Any], forked_from: str = "") -> dict[str, Any]:
    optional = {
        "podName": pod.name,
        "vmName": pod.vm_name,
        "vmID": pod.annotations.get(k.ANN_VM_ID, ""),
        "ip": pod.annotations.get(k.ANN_VM_IP, ""),
        "phase": pod.status.phase or "",
        "forkedFrom": forked_from,
    }
    return {**fixed, **{key: value for key, value in optional.items() if value}}  # `omitempty`


def _slot(pod: Pod) -> int | None:
    raw = pod.labels.get(k.LABEL_SLOT, "")
    return int(raw) if raw.isascii() and raw.isdigit() else None


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
    `observed_generation` False: left to a cocoon-operator, its proof of what it has seen."""
    live = [p for p in pods if not p.terminating]
    main = next((p for p in live if p.role == k.ROLE_MAIN), None)
    subs = sorted(
        ((s, p) for p in live if p.role == k.ROLE_SUB_AGENT and (s := _slot(p)) is not None),
        key=lambda sp: sp[0],
    )
    agents = [_entry(main, {"slot": 0, "role": k.ROLE_MAIN})] if main is not None else []
    main_vm = main.vm_name if main is not None else ""
    agents += [_entry(p, {"slot": s, "role": k.ROLE_SUB_AGENT}, main_vm) for s, p in subs]
    ready = (main is not None and main.ready) + sum(p.ready for _, p in subs)
    desired = 1 + (cs.spec.agent.replicas or 0)
    boxes = sorted(
        (p for p in live if p.role == k.ROLE_TOOLBOX), key=lambda p: p.labels.get(k.LABEL_SLOT, "")
    )
    toolboxes = [_entry(p, {"name": p.labels.get(k.LABEL_SLOT, "")}) for p in boxes]
    tb_ready = sum(p.ready for p in boxes)
    tb_desired = len(cs.spec.toolboxes or ())
    all_ready = ready == desired and desired > 0 and tb_ready == tb_desired
    progressing = phase in (Phase.PENDING, Phase.SCALING)
    conditions = [
        {
            "type": "Ready",
            "status": "True" if all_ready else "False",
            "reason": "AllAgentsReady" if all_ready else "AgentsNotReady",
            "message": f"{ready}/{desired} agents ready, {tb_ready}/{tb_desired} toolboxes ready",
            "observedGeneration": cs.generation,
        },
        {
            "type": "Progressing",
            "status": "True" if progressing else "False",
            "reason": "Reconciling" if progressing else "Stable",
            "message": phase.value,
            "observedGeneration": cs.generation,
        },
    ]
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
        "conditions": _merge(cs.status.conditions, conditions, now),
    }
    if not observed_generation:
        del out["observedGeneration"]
    return out
