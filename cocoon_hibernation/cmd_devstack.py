"""`cocoon-hibernation devstack up|kube`: the local stack (or only its embedded Kubernetes
API) by hand, until Ctrl-C. Heavy modules load inside the commands (`--help` stays instant)."""

from __future__ import annotations

import sys
import time
from pathlib import Path

import click

from cocoon_hibernation._common import EXIT_CODES_HELP, fail, invocation, progress
from devstack.extra import LocalExtraMissing, require_local_extra
from devstack.processes import Interrupted, StackError, install_signal_handlers
from devstack.simulator import LOCAL_CPU_CLASS, NodeSpec
from devstack.stack import Stack, StackConfig


def require_local() -> None:
    try:
        require_local_extra()
    except LocalExtraMissing as err:
        fail(str(err))


def stay_up(stack: Stack) -> None:
    """Until Ctrl-C (Interrupted) or a part of the stack stops (StackError)."""
    sys.stdout.flush()
    while True:
        stack.check_alive()
        time.sleep(0.5)


@click.group(name="devstack", epilog=EXIT_CODES_HELP, context_settings={"show_default": True})
def command() -> None:
    """The local stack: embedded Kubernetes API, registry, functions, simulated cluster."""


@command.command(name="kube")
@click.option(
    "--port", type=click.IntRange(0, 65535), default=0, help="Port on 127.0.0.1 (0: a free one)."
)
@click.option(
    "--kubeconfig",
    type=click.Path(dir_okay=False, path_type=Path),
    required=True,
    help="Where to write a kubeconfig for the API.",
)
@click.option(
    "--audit-webhook", metavar="URL", help="Post audit.k8s.io/v1 EventLists of every request here."
)
@click.option(
    "--audit-token",
    envvar="COCOON_AUDIT_TOKEN",
    show_envvar=True,
    help="Bearer token for the audit webhook (kept out of argv: use the env var).",
)
def kube(
    *, port: int, kubeconfig: Path, audit_webhook: str | None, audit_token: str | None
) -> None:
    """Serve the embedded Kubernetes API with the CocoonSet CRD installed."""
    require_local()
    from devstack.kubeapi import serve_forever  # noqa: PLC0415 - heavy; --help must not load it

    serve_forever(port, kubeconfig, audit_webhook, audit_token)


@command.command(name="up")
@click.option(
    "--nodes", type=click.IntRange(1, 50), default=2, help="Simulated nodes in pool 'default'."
)
@click.option("--seats", type=click.IntRange(1, 100), default=1, help="Seats per node.")
@click.option(
    "--tick", type=click.FloatRange(0), default=30.0, help="Seconds between sweep ticks (0 = none)."
)
@click.option(
    "--dir",
    "workdir",
    type=click.Path(file_okay=False, path_type=Path),
    help="Directory for the kubeconfig, registry and logs (default: a temp dir).",
)
def up(*, nodes: int, seats: int, tick: float, workdir: Path | None) -> None:
    """Start the whole stack on 127.0.0.1 and keep it up until Ctrl-C."""
    require_local()
    restore = install_signal_handlers()
    # Pool `default` and the CPU class the shipped examples ask for (run unchanged).
    specs = [
        NodeSpec(f"node-{i + 1}", seats=seats, cpu_class=LOCAL_CPU_CLASS) for i in range(nodes)
    ]
    config = StackConfig(
        nodes=specs, tick_seconds=tick, workdir=workdir, keep_workdir=workdir is not None
    )
    try:
        with progress("starting the local stack", plain=True) as step:
            stack = Stack(config, on_progress=step)
            stack.__enter__()
        try:
            click.echo(f"local stack up in {stack.workdir}")
            click.echo(f"  Kubernetes API  {stack.kube_url}  (kubeconfig {stack.kubeconfig})")
            click.echo(f"  registry        {stack.registry_url}  (base {stack.registry_base})")
            for target in ("release", "wake", "sweep", "ingest"):
                click.echo(f"  {target:<15} {stack.target_url(target)}")
            click.echo(f"  logs            {stack.workdir / 'logs'}")
            click.echo("try:")
            click.echo(f"  source {stack.workdir / 'env.sh'}")
            click.echo(f"  kubectl --kubeconfig {stack.kubeconfig} get cocoonsets -A")
            # Runnable as printed: `uv run …` in a clone where the script is not on PATH.
            click.echo(f"  {invocation()} status --kubeconfig {stack.kubeconfig}")
            click.echo("Ctrl-C stops everything.")
            stay_up(stack)
        finally:
            stack.stop()
    except (Interrupted, KeyboardInterrupt):
        click.echo("stopped.", err=True)
    except StackError as err:
        fail(str(err))
    finally:
        restore()
