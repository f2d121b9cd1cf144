"""`cocoon-hibernation suspend NAME...`: ask for sets to hibernate, as a user would.

Patches `spec.suspend=true` (desired state, no precondition). For a
release-policy set the functions take it from there (hibernate, verify,
release the seat); with `--wait` the command follows the phase until
`Suspended`.
"""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import click

from cocoon_hibernation._common import (
    EXIT_CODES_HELP,
    emit_results,
    fail,
    format_seconds,
    progress,
    set_action_options,
)
from cocoon_hibernation._kube import chosen_sets, cli_settings, kube_client, wait_for_phase
from shared.errors import CocoonError


@click.command(name="suspend", epilog=EXIT_CODES_HELP)
@set_action_options(wait_for="Suspended")
def command(
    *,
    names: tuple[str, ...],
    kubeconfig: Path | None,
    context: str | None,
    namespace: str | None,
    selector: str | None,
    all_sets: bool,
    wait: timedelta | None,
    output: str,
) -> None:
    """Set spec.suspend=true on CocoonSets."""
    results: list[dict[str, object]] = []
    try:
        settings = cli_settings(kubeconfig, context, namespace)
        client = kube_client(settings)
        refs = chosen_sets(
            client, settings, names, namespace=namespace, selector=selector, all_sets=all_sets
        )
        for ref in refs:
            with progress(f"suspending {ref}") as step:
                if client.get_set(ref) is None:
                    missing = f"cocoonset {ref} not found"
                    results.append(
                        {"set": str(ref), "ok": False, "phase": None, "message": missing}
                    )
                    continue
                cs = client.patch_set(ref, {"spec": {"suspend": True}})
                phase = cs.phase.value if cs.phase else None
                if wait:
                    phase = wait_for_phase(client, ref, "Suspended", wait, phase=phase, step=step)
                ok = not wait or phase == "Suspended"
                message = (
                    f"spec.suspend=true (phase {phase or '-'})"
                    if ok
                    else f"spec.suspend=true, but still {phase or '-'} after "
                    f"{format_seconds(wait or timedelta())}"
                )
                results.append({"set": str(ref), "ok": ok, "phase": phase, "message": message})
    except CocoonError as err:
        fail(str(err))
    emit_results(results, output)
