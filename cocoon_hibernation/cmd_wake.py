"""`cocoon-hibernation wake NS/NAME`: a wake request from a terminal.

The same path as the wake function's `io.cocoonstack.cocoonset.wake.requested`:
`request_wake` makes `spec.suspend=false` durable, then runs the wake
reconcile (probe the snapshot, persist `Waking`, create the restore-marked
main pod with the hint). The restore itself completes as the cluster
schedules the pod; `--wait` follows the phase until `Running`.
"""

from __future__ import annotations

import time
from pathlib import Path

import click

from cocoon_hibernation._common import fail, kube_options, parse_ref, progress
from cocoon_hibernation._kube import cli_settings, kube_client, registry_client
from shared.errors import CocoonError
from shared.reconcile import request_wake


@click.command(name="wake")
@click.argument("target", metavar="NS/NAME")
@kube_options
@click.option(
    "--wait",
    "wait_seconds",
    type=click.FloatRange(0),
    default=0,
    show_default=True,
    help="Seconds to wait for phase Running (0 = do not wait).",
)
def command(*, target: str, kubeconfig: Path | None, wait_seconds: float) -> None:
    """Wake a release-policy CocoonSet (spec.suspend=false, then the wake reconcile)."""
    ref = parse_ref(target)
    try:
        settings = cli_settings(kubeconfig)
        with progress(f"waking {ref}") as step:
            client = kube_client(settings)
            outcome = request_wake(
                ref, kube=client, registry=registry_client(settings), settings=settings
            )
            if outcome.result == "not-found":
                fail(f"cocoonset {ref} not found")
            if outcome.result == "not-ours":
                fail(f"{ref}: {outcome.reason}")
            cs = client.get_set(ref)
            phase = cs.phase.value if cs is not None and cs.phase else "-"
            deadline = time.monotonic() + wait_seconds
            while wait_seconds and phase != "Running" and time.monotonic() < deadline:
                time.sleep(0.25)
                cs = client.get_set(ref)
                phase = cs.phase.value if cs is not None and cs.phase else "-"
                step(f"phase {phase}")
    except CocoonError as err:
        fail(str(err))
    if wait_seconds and phase != "Running":
        fail(f"{ref}: wake requested, but still {phase} after {wait_seconds:.0f}s")
    steps = ", ".join(outcome.steps) or "nothing to do"
    click.echo(f"{ref}: wake requested ({steps}); phase {phase}")
