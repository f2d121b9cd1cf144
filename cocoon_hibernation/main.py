"""`cocoon-hibernation`: the command line. Each command is imported only when it runs, so
`--help` imports nothing but click. The version is the installed distribution's."""

from __future__ import annotations

import importlib
import sys
from typing import Any, Final, NoReturn

import click

from cocoon_hibernation._common import ERROR_PREFIX, verbosity_options

DIST: Final = "cocoon-hibernation"

# name -> summary shown by `cocoon-hibernation --help`; the command is `command` in
# cocoon_hibernation.cmd_<name> (dashes as underscores).
COMMANDS: Final[dict[str, str]] = {
    "validate": "Check CocoonSet manifests as kube-apiserver would.",
    "crd": "Print the CocoonSet CRD generated from the models.",
    "status": "Every set (phase, hint, snapshot), then seats per pool.",
    "wake": "Wake a release-policy set (suspend=false, then the wake).",
    "suspend": "Suspend a set (spec.suspend=true).",
    "serve": "Serve every target in one process (Deployment, Knative).",
    "devstack": "The local stack: embedded API, registry, functions.",
    "demo": "Run the slot-release story end to end on a local stack.",
    "sweep": "Suspend idle sets, converge lost events (--dry-run: report).",
    "deploy-check": "What would fail before terraform apply.",
}


class LazyGroup(click.Group):
    """A group whose subcommands are imported on first use, from :data:`COMMANDS`."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(COMMANDS)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name not in COMMANDS:
            return None
        name = f"cocoon_hibernation.cmd_{cmd_name.replace('-', '_')}"
        try:
            module = importlib.import_module(name)
        except ModuleNotFoundError as err:
            if (err.name or "").split(".")[0] != "devstack":
                raise
            # The wheel and the image leave the local stack out (pyproject.toml).
            raise click.ClickException(
                f"`{cmd_name}` needs the local stack, which is not installed here: "
                "it runs from a clone: uv sync --extra local, "
                f"then uv run cocoon-hibernation {cmd_name}"
            ) from None
        command: click.Command = module.command
        return command

    def main(self, *args: Any, **kwargs: Any) -> NoReturn:
        """click's own errors with the one prefix every command uses (`error: `)."""
        kwargs["standalone_mode"] = False
        try:
            rv = super().main(*args, **kwargs)
        except click.exceptions.NoArgsIsHelpError as err:
            # No arguments at all is a request for help, as kubectl answers it: the help
            # on stdout, exit 0 (a sub-group's bare name too: `devstack`).
            click.echo(err.ctx.get_help() if err.ctx is not None else "", color=None)
            sys.exit(0)
        except click.ClickException as err:  # a UsageError's exit code is 2 (EXIT_USAGE)
            ctx = err.ctx if isinstance(err, click.UsageError) else None
            hint = f" (see {ctx.command_path} --help)" if ctx is not None else ""
            click.echo(f"{ERROR_PREFIX}{err.format_message()}{hint}", err=True)
            sys.exit(err.exit_code)
        except click.Abort:
            click.echo(f"{ERROR_PREFIX}aborted", err=True)
            sys.exit(1)
        sys.exit(rv if isinstance(rv, int) else 0)

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        # The summaries come from the table so listing them imports no command module.
        with formatter.section("Commands"):
            formatter.write_dl([(name, COMMANDS[name]) for name in self.list_commands(ctx)])


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name=DIST, prog_name=DIST, message="%(prog)s %(version)s")
@verbosity_options
def main() -> None:
    """Slot-release hibernation for cocoonstack.

    A CocoonSet with `spec.hibernatePolicy: release` frees its node seat while
    suspended: its VM is snapshotted to the registry, its pods deleted, and a
    wake recreates it from the snapshot.
    """


def kubectl_plugin() -> None:
    """`kubectl hibernation …` (`kubectl-hibernation` on PATH): help and errors name it so."""
    main(prog_name="kubectl hibernation")


def kubectl_complete() -> None:
    """`kubectl_complete-hibernation` (kubectl's `kubectl hibernation <TAB>`): cobra's answer, a
    candidate a line (`value<TAB>help`), then `:4` (no file names) or `:0` (paths, or none)."""
    from click.shell_completion import ShellComplete  # noqa: PLC0415 - only when completing

    args = sys.argv[1:]
    incomplete = args[-1] if args else ""
    complete = ShellComplete(main, {}, "kubectl hibernation", "_KUBECTL_HIBERNATION_COMPLETE")
    items = complete.get_completions(args[:-1], incomplete)
    if not items or any(item.type in ("file", "dir") for item in items):
        click.echo(":0")
        return
    for item in items:
        click.echo(f"{item.value}\t{item.help}" if item.help else item.value)
    click.echo(":4")
