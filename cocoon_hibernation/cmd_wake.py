"""`cocoon-hibernation wake NAME...`: a wake request from a terminal.

The same path as the wake function's `io.cocoonstack.cocoonset.wake.requested`:
`request_wake` makes `spec.suspend=false` durable, then runs the wake
reconcile (probe the snapshot, persist `Waking`, create the restore-marked
main pod with the hint). The restore itself completes as the cluster
schedules the pod; `--wait` follows the phase until `Running`, and when it
gives up says why the pod is not running (the pool has no free seat: the
WakeNoCapacity Event, else the pod's Unschedulable condition).

A set already `Running` (and not asked to suspend) is a no-op success.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from cocoon_hibernation._common import format_seconds
from cocoon_hibernation._kube import (
    KubeClient,
    SetAction,
    phase_of,
    registry_client,
    set_action_command,
    wait_for_phase,
)
from shared import constants as k
from shared.config import Settings
from shared.enums import CocoonSetPhase
from shared.errors import CocoonError
from shared.names import SetRef
from shared.reconcile import OutcomeResult, request_wake


@dataclass(frozen=True, slots=True)
class WakeResult:
    set: str
    ok: bool
    phase: str | None
    message: str
    steps: tuple[str, ...] = ()

    def as_dict(self) -> dict[str, Any]:
        return {
            "set": self.set,
            "ok": self.ok,
            "phase": self.phase,
            "message": self.message,
            "steps": list(self.steps),
        }


def why_not_running(client: KubeClient, ref: SetRef) -> str:
    """Why a waking set's pod is not running, in words: no free seat, or just not yet."""
    try:
        events = client.list_events(
            ref.namespace,
            f"involvedObject.name={ref.name},reason={k.REASON_WAKE_NO_CAPACITY}",
        )
    except CocoonError:
        events = []
    events = [e for e in events if (e.get("involvedObject") or {}).get("kind") == k.KIND]
    if events:
        latest = max(events, key=lambda e: str(e.get("lastTimestamp") or e.get("eventTime") or ""))
        return f"the pool has no free seat ({latest.get('message', '')})"
    try:
        pod = client.get_pod(ref.namespace, f"{ref.name}-0")
    except CocoonError:
        pod = None
    if pod is not None:
        raw = pod.model_dump(by_alias=True, mode="json")
        for cond in (raw.get("status") or {}).get("conditions") or []:
            if cond.get("type") == "PodScheduled" and cond.get("reason") == "Unschedulable":
                return f"the pool has no free seat (main pod unschedulable: {cond.get('message')})"
    return "the restore has not finished"


def wake_one(
    client: KubeClient, settings: Any, ref: SetRef, wait: timedelta | None, step: Any
) -> WakeResult:
    before = client.get_set(ref)
    if before is None:
        return WakeResult(str(ref), False, None, f"cocoonset {ref} not found")
    if before.phase is CocoonSetPhase.RUNNING and not before.suspended:
        return WakeResult(str(ref), True, "Running", "already Running: nothing to do")
    outcome = request_wake(ref, kube=client, registry=registry_client(settings), settings=settings)
    if outcome.result == OutcomeResult.NOT_FOUND:
        return WakeResult(str(ref), False, None, f"cocoonset {ref} not found")
    if outcome.result == OutcomeResult.NOT_OURS:
        after = client.get_set(ref)
        if after is not None and after.phase is CocoonSetPhase.RUNNING and not after.suspended:
            # Asked to suspend but not suspended yet: the unsuspend was the whole wake.
            return WakeResult(
                str(ref), True, "Running", "spec.suspend=false; still Running", outcome.steps
            )
        phase = after.phase.value if after is not None and after.phase else None
        return WakeResult(str(ref), False, phase, outcome.reason, outcome.steps)
    phase = phase_of(client, ref)
    if wait:
        phase = wait_for_phase(
            client, ref, "Running", wait, phase=phase, step=step, label=f"{ref}: "
        )
        if phase != "Running":
            return WakeResult(
                str(ref),
                False,
                phase,
                f"wake requested, but still {phase or '-'} after {format_seconds(wait)}: "
                f"{why_not_running(client, ref)}",
                outcome.steps,
            )
    steps = ", ".join(outcome.steps) or "nothing to do"
    return WakeResult(
        str(ref), True, phase, f"wake requested ({steps}); phase {phase or '-'}", outcome.steps
    )


def _waking(wait: timedelta | None) -> SetAction:
    def act(
        client: KubeClient, settings: Settings, ref: SetRef, step: Callable[[str], None]
    ) -> dict[str, Any]:
        return wake_one(client, settings, ref, wait, step).as_dict()

    return act


command = set_action_command(
    "wake",
    wait_for="Running",
    doing="waking",
    help="""Wake release-policy CocoonSets (spec.suspend=false, then the wake reconcile).

    A set already Running is left alone (exit 0, said so).""",
    act=_waking,
)
