"""`cocoon-hibernation demo`: the local stack, the scenario of `devstack.scenario`, narrated.
Exit 0 only when every step happened; a timed-out step says which and the last state seen."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import click

from cocoon_hibernation._common import EXIT_CODES_HELP, fail, invocation, progress
from cocoon_hibernation.cmd_devstack import require_local, stay_up
from devstack.narrate import PlainNarration, RichNarration, print_summary
from devstack.processes import Interrupted, StackError, install_signal_handlers
from devstack.scenario import Scenario
from devstack.stack import Stack, StackConfig


@click.command(name="demo", epilog=EXIT_CODES_HELP, context_settings={"show_default": True})
@click.option("--keep", is_flag=True, help="Leave the stack up after the summary (Ctrl-C ends it).")
@click.option(
    "--tick",
    type=click.FloatRange(0.2),
    default=2.0,
    help="Seconds between sweep ticks (the safety net for lost events).",
)
@click.option(
    "--step-timeout",
    type=click.FloatRange(1),
    default=45.0,
    help="Seconds each step may take before the demo fails.",
)
@click.option(
    "--poll",
    type=click.FloatRange(0.01),
    default=0.1,
    help="Seconds between the observer's and the simulator's polls of the API.",
)
@click.option(
    "--report",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Also write the result (steps, transitions, counts) as JSON here.",
)
@click.option("--plain", is_flag=True, help="Plain lines even on a terminal.")
@click.option(
    "--pace",
    type=click.FloatRange(0),
    help="Seconds to pause after each step  [default: 1.5 on a terminal, else 0].",
)
def command(
    *,
    keep: bool,
    tick: float,
    step_timeout: float,
    poll: float,
    report: Path | None,
    plain: bool,
    pace: float | None,
) -> None:
    """Run the slot-release story end to end on a local stack and narrate it."""
    require_local()
    restore = install_signal_handlers()
    stack = Stack(StackConfig(tick_seconds=tick, sim_interval=poll, log_format="json"))
    try:
        with progress("starting the local stack", plain=True) as step:
            stack.on_progress = step
            stack.__enter__()
        click.echo(f"local stack up (logs in {stack.workdir / 'logs'})")
        sys.stdout.flush()
        live = sys.stdout.isatty() and not plain
        narration = RichNarration() if live else PlainNarration()
        if pace is None:
            pace = 1.5 if live else 0.0
        scenario = Scenario(stack, narration, step_timeout=step_timeout, poll=poll, pace=pace)
        if stack.simulator is not None:
            stack.simulator.on_event = scenario.on_sim_event
        try:
            result = scenario.run()
        finally:
            narration.close()
        print_summary(result, rich=live)
        if report is not None:
            report.write_text(json.dumps(result.to_json(), indent=2))
        if keep:
            kubeconfig = stack.kubeconfig
            click.echo("")
            click.echo(f"the stack stays up (Ctrl-C to stop); everything lives in {stack.workdir}")
            click.echo(f"  kubeconfig: {kubeconfig}")
            click.echo(f"  kubectl --kubeconfig {kubeconfig} get cocoonsets -A")
            click.echo(f"  kubectl --kubeconfig {kubeconfig} get pods -A -o wide")
            click.echo(
                f"  source {stack.workdir / 'env.sh'}   # KUBECONFIG, COCOON_REGISTRY_BASE, ..."
            )
            # Runnable as printed: `uv run …` in a clone where the script is not on PATH.
            cli = invocation()
            click.echo(f"  {cli} status")
            click.echo(f"  {cli} status -w    # a line per change; Ctrl-C ends it")
            click.echo(f"  {cli} suspend demo/a --wait 30s")
            click.echo(f"  {cli} wake demo/a --wait 30s")
            click.echo(f"  logs of every part: {stack.workdir / 'logs'}")
            stay_up(stack)
        ok = result.ok
    except (Interrupted, KeyboardInterrupt):
        click.echo("interrupted: stopping the local stack", err=True)
        sys.exit(130)
    except StackError as err:
        fail(str(err))
    finally:
        stack.stop()
        restore()
    sys.exit(0 if ok else 1)
