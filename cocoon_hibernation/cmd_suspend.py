"""`cocoon-hibernation suspend NS/NAME`: ask for a set to hibernate, as a user would.

Patches `spec.suspend=true` (desired state, no precondition). For a
release-policy set the functions take it from there (hibernate, verify,
release the seat); with `--wait` the command follows the phase until
`Suspended`.
"""

from __future__ import annotations

import time
from pathlib import Path

import click

from cocoon_hibernation._common import fail, kube_options, parse_ref, progress
from cocoon_hibernation._kube import cli_settings, kube_client
from shared.errors import CocoonError


@click.command(name="suspend")
@click.argument("target", metavar="NS/NAME")
@kube_options
@click.option(
    "--wait",
    "wait_seconds",
    type=click.FloatRange(0),
    default=0,
    show_default=True,
    help="Seconds to wait for phase Suspended (0 = do not wait).",
)
def command(*, target: str, kubeconfig: Path | None, wait_seconds: float) -> None:
    """Set spec.suspend=true on a CocoonSet."""
    ref = parse_ref(target)
    try:
        settings = cli_settings(kubeconfig)
        with progress(f"suspending {ref}") as step:
            client = kube_client(settings)
            if client.get_set(ref) is None:
                fail(f"cocoonset {ref} not found")
            cs = client.patch_set(ref, {"spec": {"suspend": True}})
            phase = cs.phase.value if cs.phase else "-"
            deadline = time.monotonic() + wait_seconds
            while wait_seconds and phase != "Suspended" and time.monotonic() < deadline:
                time.sleep(0.25)
                current = client.get_set(ref)
                phase = current.phase.value if current and current.phase else "-"
                step(f"phase {phase}")
    except CocoonError as err:
        fail(str(err))
    if wait_seconds and phase != "Suspended":
        fail(f"{ref}: spec.suspend=true, but still {phase} after {wait_seconds:.0f}s")
    click.echo(f"{ref}: spec.suspend=true (phase {phase})")
