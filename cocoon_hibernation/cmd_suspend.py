"""`cocoon-hibernation suspend NAME...`: `spec.suspend=true` as a user sets it; `--wait` follows."""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta

from cocoon_hibernation._kube import KubeClient, set_action_command, wait_for_phase
from shared.config import Settings
from shared.names import SetRef
from shared.sweep.decide import format_duration


def suspend_one(
    client: KubeClient,
    settings: Settings,
    ref: SetRef,
    step: Callable[[str], None],
    *,
    wait: timedelta | None,
) -> dict[str, object]:
    def result(ok: bool, phase: str | None, message: str) -> dict[str, object]:
        return {"set": str(ref), "ok": ok, "phase": phase, "message": message}

    if client.get_set(ref) is None:
        return result(False, None, f"cocoonset {ref} not found")
    cs = client.patch_set(ref, {"spec": {"suspend": True}})
    phase = cs.phase.value if cs.phase else None
    if wait:
        phase = wait_for_phase(client, ref, "Suspended", wait, phase=phase, step=step)
        if phase != "Suspended":
            late = f"spec.suspend=true, but still {phase or '-'} after {format_duration(wait)}"
            return result(False, phase, late)
    return result(True, phase, f"spec.suspend=true (phase {phase or '-'})")


command = set_action_command(
    "suspend",
    wait_for="Suspended",
    doing="suspending",
    help="Set spec.suspend=true on CocoonSets.",
    act=suspend_one,
)
