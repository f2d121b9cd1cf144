"""Rendering the demo: a live rich table on a TTY, plain timestamped lines otherwise.

Both renderers print the same transition lines (one per change, with the
elapsed time) so a CI log reads like the terminal session, minus the table.
"""

from __future__ import annotations

import sys
from typing import TextIO

from rich.console import Console
from rich.live import Live
from rich.table import Table

from devstack.observe import View
from devstack.scenario import DemoResult, Narration, StepResult


def _fmt(elapsed: float) -> str:
    return f"[{elapsed:6.1f}s]"


class PlainNarration(Narration):
    def __init__(self, out: TextIO | None = None) -> None:
        self.out = out or sys.stdout

    def _print(self, text: str) -> None:
        self.out.write(text + "\n")
        self.out.flush()

    def step(self, index: int, total: int, title: str) -> None:
        self._print(f"== step {index}/{total}: {title}")

    def line(self, elapsed: float, text: str) -> None:
        self._print(f"{_fmt(elapsed)} {text}")

    def view(self, view: View) -> None:
        return None

    def step_done(self, result: StepResult) -> None:
        if result.ok:
            self._print(f"   ok ({result.seconds:.1f}s)")
        else:
            self._print(f"   FAILED after {result.seconds:.1f}s: {result.detail}")

    def info(self, text: str) -> None:
        self._print(text)

    def close(self) -> None:
        return None


def sets_table(view: View) -> Table:
    table = Table(title="CocoonSets (namespace demo)", expand=False)
    for col in ("set", "policy", "suspend", "phase", "main pod", "node", "hibernated-on-node"):
        table.add_column(col)
    style = {
        "Running": "green",
        "Waking": "yellow",
        "Suspending": "yellow",
        "Suspended": "blue",
        "Pending": "magenta",
    }
    for s in view.sets.values():
        table.add_row(
            s.name,
            s.policy,
            "yes" if s.suspend else "no",
            f"[{style.get(s.phase, 'white')}]{s.phase}[/]",
            s.pod,
            s.node or "-",
            s.hint or "-",
        )
    seats = "  ".join(
        f"{n}: {'■' * u}{'□' * max(t - u, 0)} {u}/{t}" for n, (u, t) in view.seats.items()
    )
    table.caption = f"seats  {seats}"
    return table


class RichNarration(Narration):
    """A live table of sets and seats under the scrolling transition lines."""

    def __init__(self) -> None:
        self.console = Console()
        self.live = Live(console=self.console, refresh_per_second=8, transient=True)
        self.live.start()

    def step(self, index: int, total: int, title: str) -> None:
        self.console.print(f"[bold cyan]step {index}/{total}[/] [bold]{title}[/]")

    def line(self, elapsed: float, text: str) -> None:
        self.console.print(f"[dim]{_fmt(elapsed)}[/] {text}", highlight=False)

    def view(self, view: View) -> None:
        self.live.update(sets_table(view))

    def step_done(self, result: StepResult) -> None:
        if result.ok:
            self.console.print(f"  [green]✓[/] {result.seconds:.1f}s")
        else:
            self.console.print(f"  [red]✗ {result.detail}[/] ({result.seconds:.1f}s)")

    def info(self, text: str) -> None:
        self.console.print(text)

    def close(self) -> None:
        self.live.stop()


def summary_lines(result: DemoResult) -> list[str]:
    out = ["", "summary"]
    for i, step in enumerate(result.steps, start=1):
        mark = "ok" if step.ok else "FAILED"
        out.append(f"  {i}. {step.title:<58} {step.seconds:6.1f}s  {mark}")
    out.append(f"  total {result.total_seconds:.1f}s")
    if result.wake_node:
        how = result.wake_restore or "restored"
        out.append(f"  wake landed on {result.wake_node} ({how})")
    if result.api_requests:
        parts = ", ".join(f"{k} {v}" for k, v in result.api_requests.items())
        out.append(f"  Kubernetes API requests: {parts}")
    if result.registry_requests:
        counts = dict(result.registry_requests)
        total = counts.pop("total", sum(counts.values()))
        groups: dict[str, list[str]] = {}
        for key, n in sorted(counts.items(), key=lambda kv: -kv[1]):
            who, _, method = key.rpartition(" ")
            groups.setdefault(who or key, []).append(f"{method} {n}" if who else str(n))
        parts = "; ".join(f"{who}: {', '.join(items)}" for who, items in groups.items())
        out.append(f"  registry requests: {total} ({parts})")
    if result.tag_present_at_end is False:
        out.append("  registry: a's :hibernate tag is gone (the wake dropped it)")
    if not result.ok:
        out.append(f"  FAILED at: {result.failed_step}")
        state = result.last_state
        out.append("  last state seen:")
        for name, row in (state.get("sets") or {}).items():
            out.append(
                f"    {name}: phase {row['phase']}, suspend={str(row['suspend']).lower()}, "
                f"pod {row['pod']}{' on ' + row['node'] if row['node'] else ''}, "
                f"hint {row['hint'] or '-'}"
            )
        if state.get("seats"):
            out.append("    seats: " + ", ".join(f"{n} {v}" for n, v in state["seats"].items()))
        for event in state.get("events") or []:
            out.append(f"    event: {event}")
        for err in state.get("simulator_errors") or []:
            out.append(f"    simulator error: {err}")
    return out


def print_summary(result: DemoResult, *, rich: bool) -> None:
    """The summary: a table on a terminal, the plain lines otherwise (and in logs)."""
    if not rich:
        for line in summary_lines(result):
            sys.stdout.write(line + "\n")
        sys.stdout.flush()
        return
    console = Console()
    table = Table(title="summary", title_justify="left")
    table.add_column("#", justify="right")
    table.add_column("step")
    table.add_column("time", justify="right")
    table.add_column("")
    for i, step in enumerate(result.steps, start=1):
        mark = "[green]✓[/]" if step.ok else f"[red]✗ {step.detail}[/]"
        table.add_row(str(i), step.title, f"{step.seconds:.1f}s", mark)
    table.add_row("", "[bold]total[/]", f"{result.total_seconds:.1f}s", "")
    console.print(table)
    # The facts after the table are the same lines the plain summary ends with.
    for line in summary_lines(result)[len(result.steps) + 3 :]:
        console.print(line, highlight=False)
