"""`cocoon-hibernation sweep [--dry-run]`: run one sweep from a terminal and show what it did.

The same code the scheduled `sweep` function runs. With `--dry-run` it only
reads (set and pod lists) and prints every action it would take. Exit status:
0 when the run completed, 1 when a transient error left work undone (the
table still shows everything that was done), 2 on a configuration error.
"""

from __future__ import annotations

import sys

import click

from shared import log
from shared.config import LogFormat, Settings
from shared.errors import CocoonError, ConfigError
from shared.sweep.execute import Result, SweepIncomplete, SweepSummary

_STYLE = {
    Result.DONE: "green",
    Result.WOULD: "cyan",
    Result.CONFLICT: "yellow",
    Result.GONE: "yellow",
    Result.ERROR: "red",
}


def render(summary: SweepSummary) -> None:
    """The actions as a table, then one line of totals (stdout)."""
    from rich.console import Console  # noqa: PLC0415  (rich loads only when printing)
    from rich.table import Table  # noqa: PLC0415

    console = Console()
    title = "sweep (dry run: nothing written)" if summary.dry_run else "sweep"
    table = Table(title=title)
    for col in ("action", "cocoonset", "result", "detail"):
        table.add_column(col)
    for a in summary.actions:
        table.add_row(
            a.kind.value,
            str(a.ref),
            f"[{_STYLE[a.result]}]{a.result.value}[/]",
            a.detail,
        )
    if summary.actions:
        console.print(table)
    else:
        console.print(f"{title}: nothing to do")
    counts = ", ".join(f"{key}={n}" for key, n in summary.counts().items()) or "no actions"
    console.print(
        f"{summary.sets} set(s) in {summary.set_pages} page(s), "
        f"{summary.pod_lists} pod list(s); {counts}; "
        f"{summary.deferred} idle set(s) deferred by the cap; {summary.errors} error(s)"
    )


class _ConfigProblem(click.ClickException):
    exit_code = 2  # unusable input (the environment), as for every command


@click.command("sweep")
@click.option("--dry-run", is_flag=True, help="Report what the sweep would do; write nothing.")
def command(dry_run: bool) -> None:
    """Suspend idle sets and reconcile sets whose events were lost (one run)."""
    # Log lines go to stderr as text, so stdout carries only the table.
    log.configure(LogFormat.TEXT, stream=sys.stderr)
    try:
        settings = Settings.from_env()
    except ConfigError as err:
        raise _ConfigProblem(str(err)) from None
    from functions.sweep import run_sweep  # noqa: PLC0415  (the CLI's other commands start fast)

    try:
        summary = run_sweep(settings=settings, dry_run=dry_run)
    except SweepIncomplete as err:
        render(err.summary)
        raise SystemExit(1) from None
    except ConfigError as err:  # e.g. no kubeconfig and not in a cluster
        raise _ConfigProblem(str(err)) from None
    except CocoonError as err:
        raise click.ClickException(f"sweep failed: {err}") from None
    render(summary)
