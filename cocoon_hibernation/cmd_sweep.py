"""`cocoon-hibernation sweep [--dry-run]`: one run of the scheduled sweep's code from a terminal
(`--dry-run` only reads and prints what it would do); exit codes: docs/cli.md."""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

import click

from cocoon_hibernation._common import (
    EXIT_CODES_HELP,
    echo_table,
    emit_structured,
    fail,
    kube_options,
    output_option,
    set_options,
)
from shared.errors import CocoonError, ConfigError
from shared.ports import KubeApi
from shared.sweep.report import Result, SweepIncomplete, SweepSummary

_STYLE = {
    Result.WOULD.value: "cyan",
    **dict.fromkeys((Result.CONFLICT.value, Result.GONE.value, "waiting"), "yellow"),
    **dict.fromkeys((Result.ERROR.value, "refused"), "red"),
}


def render(summary: SweepSummary) -> None:
    """The actions as a table (rich on a terminal, else plain columns), then the totals."""
    title = "sweep (dry run: nothing written)" if summary.dry_run else "sweep"
    counts = ", ".join(f"{key}={n}" for key, n in summary.counts().items()) or "no actions"
    totals = (
        f"{summary.sets} set(s) in {summary.set_pages} page(s), "
        f"{summary.pod_lists} pod list(s); {counts}; "
        f"{summary.deferred} idle set(s) deferred by the cap; {summary.errors} error(s)"
    )
    rows = [(a.kind.value, str(a.ref), a.shown_result, a.detail) for a in summary.actions]
    if not sys.stdout.isatty():
        if rows:
            echo_table(("ACTION", "COCOONSET", "RESULT", "DETAIL"), rows)
        # The title goes into the totals line: no header line a script must skip.
        click.echo(f"{title}: {totals}" if rows else f"{title}: nothing to do; {totals}")
        return
    from rich.console import Console  # noqa: PLC0415  (rich loads only when printing)
    from rich.table import Table  # noqa: PLC0415

    console = Console()
    table = Table("action", "cocoonset", "result", "detail", title=title)
    for kind, ref, result, detail in rows:
        table.add_row(kind, ref, f"[{_STYLE.get(result, 'green')}]{result}[/]", detail)
    console.print(table if rows else f"{title}: nothing to do")
    console.print(totals)


def summary_dict(summary: SweepSummary) -> dict[str, Any]:
    return {
        "dry_run": summary.dry_run,
        "sets": summary.sets,
        "errors": summary.errors,
        "deferred": summary.deferred,
        "failures": list(summary.failures),
        "actions": [
            {
                "action": a.kind.value,
                "set": str(a.ref) if a.ref is not None else None,
                "result": a.shown_result,
                "detail": a.detail,
            }
            for a in summary.actions
        ],
    }


@dataclass(frozen=True)
class SelectedSets:
    """A client whose set lists the API server narrows by `sweep -l`'s label selector."""

    inner: Any
    selector: str

    def list_sets(self, namespace: str | None, *, limit: int = 500) -> Any:
        return self.inner.list_sets(namespace, limit=limit, label_selector=self.selector)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


@click.command("sweep", epilog=EXIT_CODES_HELP)
@click.option("--dry-run", is_flag=True, help="Report what the sweep would do; write nothing.")
@kube_options
@set_options
@output_option
def command(
    *,
    dry_run: bool,
    kubeconfig: Path | None,
    context: str | None,
    namespace: str | None,
    selector: str | None,
    output: str,
) -> None:
    """Suspend idle sets and reconcile sets whose events were lost (one run)."""
    # Imported here: `sweep --help` stays fast.
    from cocoon_hibernation._kube import cli_settings  # noqa: PLC0415
    from functions.sweep import run_sweep  # noqa: PLC0415
    from shared.clients.kube import get_client  # noqa: PLC0415

    try:
        settings = cli_settings(kubeconfig, context, namespace)
        kube = cast("KubeApi", SelectedSets(get_client(settings), selector)) if selector else None
        try:
            summary = run_sweep(settings=settings, dry_run=dry_run, kube=kube)
        except SweepIncomplete as err:
            summary = err.summary
    # --kubeconfig missing, -n outside COCOON_NAMESPACES, no CRD, no kubeconfig nor cluster
    except ConfigError as err:
        fail(str(err))
    except CocoonError as err:
        fail(f"sweep failed: {err}")
    if output != "table":
        emit_structured(summary_dict(summary), output)
    else:
        render(summary)
    if summary.errors:
        errors = (a.detail for a in summary.actions if a.result is Result.ERROR)
        failed = [*summary.failures, *errors]
        detail = f": {failed[0]}" if failed else ""
        fail(f"sweep met {summary.errors} error(s){detail}")
