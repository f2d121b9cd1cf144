"""What every command shares: exit codes (docs/cli.md), one-line errors prefixed `error: `,
progress on a TTY, and the kubectl-style options of the commands that talk to a cluster."""

from __future__ import annotations

import functools
import os
import shutil
import sys
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from datetime import timedelta
from pathlib import Path
from typing import Any, Final, NoReturn, TypeVar

import click

from shared.errors import InvalidName
from shared.names import SetRef

EXIT_FINDING: Final = 1  # a finding, a failure, or something not checked
EXIT_USAGE: Final = 2

ERROR_PREFIX: Final = "error: "

# Appended to every command's --help (click keeps a paragraph starting with \b as is).
EXIT_CODES_HELP: Final = (
    "\b\nExit codes: 0 checked and fine; 1 a finding or a failure (something not\n"
    "checked counts, unless --allow-unchecked where offered); 2 bad usage or\n"
    "unreadable input (a file, a variable with a bad value)."
)


def fail(message: str, code: int = EXIT_FINDING) -> NoReturn:
    """An expected error: one clear line on stderr, a non-zero exit, no traceback."""
    first = message.strip().splitlines()[0] if message.strip() else "failed"
    click.echo(f"{ERROR_PREFIX}{first}", err=True)
    sys.exit(code)


def parse_ref(text: str, namespace: str | None = None) -> SetRef:
    """`NS/NAME`, or `NAME` with `-n NS`; a malformed one is bad usage (exit 2, one line)."""
    if "/" not in text:
        if namespace is None:
            fail(f"{text!r}: give NS/NAME, or NAME with -n NS", code=EXIT_USAGE)
        text = f"{namespace}/{text}"
    elif namespace is not None and text.split("/", 1)[0] != namespace:
        fail(f"{text!r} is not in namespace {namespace} (-n)", code=EXIT_USAGE)
    try:
        return SetRef.parse(text)
    except InvalidName as err:
        fail(str(err), code=EXIT_USAGE)


def invocation() -> str:
    """This command line as the user can type it again (the script or the kubectl plugin
    when on PATH, `uv run [--project DIR]` in a clone, else `python -m`), for next steps."""
    argv0 = sys.argv[0] if sys.argv else ""
    name = os.path.basename(argv0)
    if name in (PROG, PLUGIN):
        found = shutil.which(name)
        if found and os.path.realpath(found) == os.path.realpath(argv0):
            return "kubectl hibernation" if name == PLUGIN else PROG
    # A venv inside a project (a clone after `uv sync`): `uv run` finds both.
    project = Path(sys.prefix).parent
    if (project / "pyproject.toml").is_file() and shutil.which("uv"):
        if Path.cwd().resolve().is_relative_to(project.resolve()):
            return f"uv run {PROG}"
        return f"uv run --project {project} {PROG}"
    return f"{sys.executable} -m cocoon_hibernation"


PROG: Final = "cocoon-hibernation"
PLUGIN: Final = "kubectl-hibernation"


@contextmanager
def progress(message: str, *, plain: bool = False) -> Iterator[Callable[[str], None]]:
    """A spinner on a TTY (updated through the yielded callback); without one, plain lines
    on stderr when `plain` (long commands), else nothing (a failure stays one line)."""
    if sys.stdout.isatty():
        from rich.console import Console  # noqa: PLC0415 - `--help` must stay light

        console = Console(stderr=True)
        with console.status(message) as status:
            yield lambda text: status.update(f"{message}: {text}")
    elif plain:
        click.echo(f"{message}...", err=True)
        yield lambda text: click.echo(f"  {text}", err=True)
    else:
        yield lambda _text: None


F = TypeVar("F", bound=Callable[..., Any])


def options(*decorators: Callable[[Any], Any]) -> Callable[[F], F]:
    """Several click options as one decorator, listed by --help in the order given."""
    return lambda func: functools.reduce(
        lambda f, decorate: decorate(f), reversed(decorators), func
    )


def set_verbosity(verbose: int, quiet: bool) -> None:
    """The library's log lines on stderr: warnings by default, -v info, -vv debug, -q errors."""
    from shared import log  # noqa: PLC0415 - the log module is light, but only when asked
    from shared.clients.kube import observe_requests  # noqa: PLC0415
    from shared.config import LogFormat  # noqa: PLC0415

    level = "ERROR" if quiet else ("WARNING", "INFO", "DEBUG")[min(verbose, 2)]
    # stdout carries the command's answer (a table, JSON); logs must not mix into it.
    log.configure(LogFormat.TEXT, stream=sys.stderr, level=level)
    # -v shows each API call as kubectl -v=6 does: method, URL, status, time.
    observe_requests(_echo_request if verbose and not quiet else None)


def _echo_request(method: str, url: str, status: int | None, seconds: float) -> None:
    answer = str(status) if status is not None else "no answer"
    click.echo(f"{method} {url} {answer} in {seconds * 1000:.0f} milliseconds", err=True)


def _verbosity_callback(ctx: click.Context, param: click.Parameter, value: Any) -> Any:
    # On the root context (`-v status` and `status -v` agree); applied by the commands that log
    # through the library (apply_verbosity), never by `serve` (its logs: JSON on stdout).
    meta, key = ctx.find_root().meta, f"cocoon.{param.name}"
    meta[key] = max(meta.get(key, 0), int(value or 0))  # -v counts, -q is a flag
    return value


def apply_verbosity() -> None:
    """Point the library's log at stderr at the level -v/-q asked for (default warnings)."""
    ctx = click.get_current_context(silent=True)
    meta = ctx.find_root().meta if ctx is not None else {}
    set_verbosity(meta.get("cocoon.verbose", 0), bool(meta.get("cocoon.quiet", 0)))


_RECORDED: Final[dict[str, Any]] = {"expose_value": False, "callback": _verbosity_callback}
verbosity_options = options(
    click.option(
        "-v",
        "--verbose",
        count=True,
        **_RECORDED,
        help="More log lines on stderr (-v info, -vv debug; default: warnings).",
    ),
    click.option("-q", "--quiet", is_flag=True, **_RECORDED, help="Only errors on stderr."),
)

# `--kubeconfig PATH` and `--context NAME`, read as kubectl reads them.
kube_options = options(
    click.option(
        "--kubeconfig",
        type=click.Path(dir_okay=False, path_type=Path),
        help="kubeconfig file (default: $KUBECONFIG, a list merged as kubectl merges it; "
        "else ~/.kube/config; else the in-cluster service account).",
    ),
    click.option(
        "--context", metavar="NAME", help="The kubeconfig context (default: its current-context)."
    ),
    verbosity_options,
)

# The sets a command shows or acts on.
set_options = options(
    click.option("-n", "--namespace", metavar="NS", help="The namespace (default: all)."),
    click.option("-l", "--selector", metavar="SEL", help="Only sets matching this label selector."),
)


def output_choice(formats: Sequence[str], help_text: str = "Output format.") -> Callable[[F], F]:
    """`-o/--output`, the first of `formats` its default."""
    choice = click.Choice(formats)
    return click.option(
        "-o", "--output", type=choice, default=formats[0], show_default=True, help=help_text
    )


output_option = output_choice(
    ("table", "json", "yaml"), "Output format (json and yaml carry typed fields for scripts)."
)

allow_unchecked_option = click.option(
    "--allow-unchecked",
    is_flag=True,
    help="Exit 0 even when something could not be checked (it is still reported).",
)


class Duration(click.ParamType[timedelta, Any]):
    """`30s`, `5m`, `1h30m` (or plain seconds, `90`), as kubectl's --timeout reads them."""

    name = "DURATION"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        if isinstance(value, timedelta):
            return value
        text = str(value).strip()
        if text.replace(".", "", 1).isdigit():
            return timedelta(seconds=float(text))
        from shared.durations import parse_duration  # noqa: PLC0415

        try:
            return parse_duration(text)
        except ValueError as err:
            self.fail(f"{text!r} is not a duration like 30s or 5m ({err})", param, ctx)


def echo_table(headers: Sequence[str], rows: Sequence[Sequence[str]], gap: str = "   ") -> None:
    """kubectl's plain table (padded columns, no box): what a pipe or a file gets."""
    cells = [[str(c) for c in headers], *([str(c) for c in row] for row in rows)]
    widths = [max(len(row[i]) for row in cells) for i in range(len(headers))]
    for row in cells:
        click.echo(gap.join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip())


def emit_structured(data: Any, output: str) -> None:
    """`data` as JSON or YAML on stdout."""
    import json  # noqa: PLC0415

    if output == "yaml":
        import yaml  # noqa: PLC0415

        click.echo(yaml.safe_dump(data, sort_keys=False, allow_unicode=True), nl=False)
    else:
        click.echo(json.dumps(data, indent=2, ensure_ascii=False))
