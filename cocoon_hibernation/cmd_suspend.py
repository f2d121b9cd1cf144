"""`cocoon-hibernation suspend NAME...`: patch `spec.suspend=true` as a user would; `--wait`
follows the phase to `Suspended`."""

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
    if client.get_set(ref) is None:
        missing = f"cocoonset {ref} not found"
        return {"set": str(ref), "ok": False, "phase": None, "message": missing}
    cs = client.patch_set(ref, {"spec": {"suspend": True}})
    phase = cs.phase.value if cs.phase else None
    if wait:
        phase = wait_for_phase(client, ref, "Suspended", wait, phase=phase, step=step)
    ok = not wait or phase == "Suspended"
    message = (
        f"spec.suspend=true (phase {phase or '-'})"
        if ok
        else f"spec.suspend=true, but still {phase or '-'} after "
        f"{format_duration(wait or timedelta())}"
    )
    return {"set": str(ref), "ok": ok, "phase": phase, "message": message}


command = set_action_command(
    "suspend",
    wait_for="Suspended",
    doing="suspending",
    help="Set spec.suspend=true on CocoonSets.",
    act=suspend_one,
)
