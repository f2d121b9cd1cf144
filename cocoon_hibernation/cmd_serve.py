"""`cocoon-hibernation serve`: every target in one process (plain Deployment or Knative)."""

from __future__ import annotations

import os
from pathlib import Path

import click

from cocoon_hibernation._common import EXIT_CODES_HELP, EXIT_USAGE, fail
from functions.serve import serve
from shared.config import Settings
from shared.errors import ConfigError


def _default_port() -> int:
    raw = os.environ.get("PORT", "8080")
    return int(raw) if raw.isdigit() else 8080


@click.command(name="serve", epilog=EXIT_CODES_HELP)
@click.option(
    "--port",
    type=click.IntRange(1, 65535),
    default=_default_port,
    show_default="$PORT or 8080",
    help="Port to listen on.",
)
@click.option("--host", default="0.0.0.0", show_default=True, help="Address to bind.")  # noqa: S104 - a server in a container listens on all interfaces
@click.option(
    "--source",
    type=click.Path(dir_okay=False, exists=True, path_type=Path),
    help="A main.py exposing the targets (default: the installed functions.entrypoints).",
)
def command(*, port: int, host: str, source: Path | None) -> None:
    """Serve POST /release, /wake, /sweep (CloudEvents), /registry and /kubernetes/audit
    (ingest) and GET /healthz from one process."""
    try:
        Settings.from_env()  # validate now: a bad variable is one line, not a crash per request
    except ConfigError as err:
        fail(str(err), code=EXIT_USAGE)
    click.echo(f"serving release, wake, sweep and ingest on http://{host}:{port}", err=True)
    serve(host, port, source)
