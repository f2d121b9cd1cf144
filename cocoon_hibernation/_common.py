"""What every command shares: one-line errors, progress on a TTY, the kubeconfig option."""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, NoReturn, TypeVar

import click
from rich.console import Console

from shared.errors import InvalidName
from shared.names import SetRef


def fail(message: str, code: int = 1) -> NoReturn:
    """An expected error: one clear line on stderr, a non-zero exit, no traceback."""
    click.echo(f"error: {message}", err=True)
    sys.exit(code)


def parse_ref(text: str) -> SetRef:
    """`NS/NAME`; a malformed one is bad usage (exit 2, one line)."""
    try:
        return SetRef.parse(text)
    except InvalidName as err:
        fail(str(err), code=2)


def is_tty() -> bool:
    return sys.stdout.isatty()


@contextmanager
def progress(message: str, *, plain: bool = False) -> Iterator[Callable[[str], None]]:
    """A spinner on a TTY (updated through the yielded callback).

    Without a TTY: plain lines on stderr when `plain` (long-running commands,
    whose log should show where the time went), else nothing, so a failing
    short command prints exactly one line.
    """
    if is_tty():
        console = Console(stderr=True)
        with console.status(message) as status:
            yield lambda text: status.update(f"{message}: {text}")
    elif plain:
        click.echo(f"{message}...", err=True)
        yield lambda text: click.echo(f"  {text}", err=True)
    else:
        yield lambda _text: None


F = TypeVar("F", bound=Callable[..., Any])


def kube_options(func: F) -> F:
    """`--kubeconfig PATH` (else $KUBECONFIG, else in-cluster / ~/.kube/config)."""
    option = click.option(
        "--kubeconfig",
        type=click.Path(dir_okay=False, path_type=Path),
        envvar="KUBECONFIG",
        show_envvar=True,
        default=None,
        help="kubeconfig of the cluster (the local stack's works too).",
    )
    return option(func)
