"""`cocoon-hibernation suspend NAME...`: ask for sets to hibernate, as a user would.

Patches `spec.suspend=true` (desired state, no precondition). For a
release-policy set the functions take it from there (hibernate, verify,
release the seat); with `--wait` the command follows the phase until
`Suspended`.
"""

from __future__ import annotations

import time
from datetime import timedelta
from pathlib import Path

import click

from cocoon_hibernation._common import (
    EXIT_CODES_HELP,
    EXIT_FINDING,
    Duration,
    echo_result,
    emit_structured,
    fail,
    format_seconds,
    kube_options,
    namespace_option,
    output_option,
    progress,
    selector_options,
)
from cocoon_hibernation._kube import chosen_sets, cli_settings, kube_client
from shared.errors import CocoonError


@click.command(name="suspend", epilog=EXIT_CODES_HELP)
@click.argument("names", nargs=-1, metavar="[NS/NAME | NAME -n NS]...")
@kube_options
@namespace_option
@selector_options
@click.option(
    "--wait",
    type=Duration(),
    default=None,
    help="Wait up to this long (30s, 5m) for phase Suspended; default: do not wait.",
)
@output_option
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
                    deadline = time.monotonic() + wait.total_seconds()
                    while phase != "Suspended" and time.monotonic() < deadline:
                        time.sleep(0.25)
                        current = client.get_set(ref)
                        phase = current.phase.value if current and current.phase else None
                        step(f"phase {phase or '-'}")
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
    if output != "table":
        emit_structured(results, output)
    else:
        for r in results:
            echo_result(str(r["set"]), bool(r["ok"]), str(r["message"]))
        if not results:
            click.echo("no CocoonSet matched")
    if any(not r["ok"] for r in results):
        raise SystemExit(EXIT_FINDING)
