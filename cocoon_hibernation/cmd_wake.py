"""`cocoon-hibernation wake NAME...`: `request_wake` from a terminal (durable `spec.suspend=false`,
then the wake reconcile); `--wait` follows the phase to `Running` and says why it gave up."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import timedelta
from typing import Any

from cocoon_hibernation._kube import (
    KubeClient,
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
from shared.sweep.decide import format_duration


def why_not_running(client: KubeClient, ref: SetRef) -> str:
    """Why a waking set's pod is not running, in words: no free seat, or just not yet."""
    try:
        events = client.list_events(
            ref.namespace, f"involvedObject.name={ref.name},reason={k.REASON_WAKE_NO_CAPACITY}"
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
    message = pod.unschedulable_message() if pod is not None else None
    if message is not None:
        return f"the pool has no free seat (main pod unschedulable: {message})"
    return "the restore has not finished"


def wake_one(
    client: KubeClient,
    settings: Settings,
    ref: SetRef,
    step: Callable[[str], None],
    *,
    wait: timedelta | None,
) -> dict[str, Any]:
    def result(
        ok: bool, phase: str | None, message: str, steps: Sequence[str] = ()
    ) -> dict[str, Any]:
        return {"set": str(ref), "ok": ok, "phase": phase, "message": message, "steps": list(steps)}

    before = client.get_set(ref)
    if before is None:
        return result(False, None, f"cocoonset {ref} not found")
    if before.phase is CocoonSetPhase.RUNNING and not before.suspended:
        return result(True, "Running", "already Running: nothing to do")
    outcome = request_wake(ref, kube=client, registry=registry_client(settings), settings=settings)
    if outcome.result == OutcomeResult.NOT_FOUND:
        return result(False, None, f"cocoonset {ref} not found")
    if outcome.result == OutcomeResult.NOT_OURS:
        after = client.get_set(ref)
        if after is not None and after.phase is CocoonSetPhase.RUNNING and not after.suspended:
            # Asked to suspend but not suspended yet: the unsuspend was the whole wake.
            return result(True, "Running", "spec.suspend=false; still Running", outcome.steps)
        phase = after.phase.value if after is not None and after.phase else None
        return result(False, phase, outcome.reason, outcome.steps)
    phase = phase_of(client, ref)
    if wait:
        phase = wait_for_phase(client, ref, "Running", wait, phase=phase, step=step)
        if phase != "Running":
            message = (
                f"wake requested, but still {phase or '-'} after {format_duration(wait)}: "
                f"{why_not_running(client, ref)}"
            )
            return result(False, phase, message, outcome.steps)
    steps = ", ".join(outcome.steps) or "nothing to do"
    return result(True, phase, f"wake requested ({steps}); phase {phase or '-'}", outcome.steps)


command = set_action_command(
    "wake",
    wait_for="Running",
    doing="waking",
    help="""Wake release-policy CocoonSets (spec.suspend=false, then the wake reconcile).

    A set already Running is left alone (exit 0, said so).""",
    act=wake_one,
)
