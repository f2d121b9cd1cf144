"""`cocoon-hibernation`: the command line of the project.

Every subcommand lives in its own module, `cocoon_hibernation/cmd_<name>.py`, which defines a
click command named `command`. The group below imports a module only when its
command runs (or its own `--help` is asked for): `cocoon-hibernation --help`
reads the one-line summaries from :data:`COMMANDS` and imports nothing but
click, so it stays fast however heavy a command's imports are (the local
stack, the kubernetes client, ...).

Adding a command is one line in :data:`COMMANDS`:

    "status": ("cocoon_hibernation.cmd_status", "Show a set's hibernation state."),

plus the module `cocoon_hibernation/cmd_status.py` with `command = click.Command(...)` (or a
`@click.command()` function named `command`).

Exit codes, for every command: 0 success, 1 the command ran and found a
problem (an invalid manifest, ...), 2 bad usage or unreadable input. Errors are
one line on stderr.
"""

from __future__ import annotations

import importlib
from typing import Final

import click

_CMD: Final = "cocoon_hibernation."

# name -> (module defining `command`, summary shown by `cocoon-hibernation --help`)
COMMANDS: Final[dict[str, tuple[str, str]]] = {
    "validate": (_CMD + "cmd_validate", "Check CocoonSet manifests as kube-apiserver would."),
    "crd": (_CMD + "cmd_crd", "Print the CocoonSet CRD generated from the models."),
    "status": (_CMD + "cmd_status", "Release-policy sets: phase, hint node, snapshot presence."),
    "wake": (_CMD + "cmd_wake", "Wake a release-policy set (suspend=false, then the wake)."),
    "suspend": (_CMD + "cmd_suspend", "Suspend a set (spec.suspend=true)."),
    "serve": (_CMD + "cmd_serve", "Serve every target in one process (Deployment, Knative)."),
    "devstack": (_CMD + "cmd_devstack", "The local stack: embedded API, registry, functions."),
    "demo": (_CMD + "cmd_demo", "Run the slot-release story end to end on a local stack."),
    "sweep": (_CMD + "cmd_sweep", "Suspend idle sets, converge lost events (--dry-run: report)."),
    "deploy-check": (_CMD + "cmd_deploy_check", "What would fail before terraform apply."),
}


class LazyGroup(click.Group):
    """A group whose subcommands are imported on first use, from :data:`COMMANDS`."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(COMMANDS)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        entry = COMMANDS.get(cmd_name)
        if entry is None:
            return None
        module = importlib.import_module(entry[0])
        command = getattr(module, "command", None)
        if not isinstance(command, click.Command):
            raise click.ClickException(f"{entry[0]} defines no click command named `command`")
        return command

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        # The summaries come from the table so listing them imports no command module.
        rows = [(name, COMMANDS[name][1]) for name in self.list_commands(ctx)]
        if rows:
            with formatter.section("Commands"):
                formatter.write_dl(rows)


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
def main() -> None:
    """Slot-release hibernation for cocoonstack.

    A CocoonSet with `spec.hibernatePolicy: release` frees its node seat while
    suspended: its VM is snapshotted to the registry, its pods deleted, and a
    wake recreates it from the snapshot.
    """
