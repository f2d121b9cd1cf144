"""Child processes of the local stack: started in their own process group, torn down for sure.

Invariants:
- every child runs in a new session (its own process group), so a terminal's
  Ctrl-C reaches only the stack's owner, which then stops the children in
  order (the functions before the API they talk to) instead of all of them
  dying at once mid-request;
- stopping sends SIGTERM to the whole group, waits, then SIGKILLs the group:
  grandchildren (gunicorn workers, a registry) go with their parent;
- on Linux each child also gets PR_SET_PDEATHSIG=SIGTERM, so even a SIGKILLed
  owner leaves no orphan behind (:func:`die_with_parent`, also used by the
  registry, the real control plane, the tests and the benchmarks for every
  child they start: a killed run never leaves a registry or a function
  listening on 127.0.0.1);
- each child's stdout and stderr go to one log file in the stack's directory.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from types import FrameType

import requests

PR_SET_PDEATHSIG = 1  # <linux/prctl.h>


def free_port() -> int:
    """A TCP port free on 127.0.0.1 right now (the tiny race with its next user is accepted)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def die_with_parent() -> None:  # runs in the child between fork and exec
    """Linux only: the kernel sends SIGTERM to this child when its parent dies."""
    if sys.platform.startswith("linux"):
        with contextlib.suppress(OSError, AttributeError):
            libc = ctypes.CDLL("libc.so.6", use_errno=True)
            libc.prctl(PR_SET_PDEATHSIG, signal.SIGTERM)


class StackError(Exception):
    """The local stack could not start or a part of it died (one clear line for the CLI)."""


class ManagedProcess:
    """One child process with a log file, a readiness check and a sure stop."""

    def __init__(
        self,
        name: str,
        argv: Sequence[str],
        *,
        log_path: Path,
        env: Mapping[str, str] | None = None,
        cwd: Path | None = None,
    ) -> None:
        self.name = name
        self.argv = list(argv)
        self.log_path = log_path
        self.env = dict(env) if env is not None else None
        self.cwd = cwd
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc is not None else None

    def start(self) -> None:
        log = self.log_path.open("ab")
        try:
            self.proc = subprocess.Popen(
                self.argv,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                env=self.env,
                cwd=self.cwd,
                start_new_session=True,
                # The parent is the main thread that owns the stack; PDEATHSIG fires
                # when that thread exits, which is exactly when the stack is gone.
                preexec_fn=die_with_parent,  # noqa: PLW1509 - only a prctl call, no locks
            )
        finally:
            log.close()

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def log_tail(self, lines: int = 15) -> str:
        try:
            text = self.log_path.read_text(errors="replace")
        except OSError:
            return ""
        return "\n".join(text.splitlines()[-lines:])

    def wait_http(
        self,
        url: str,
        *,
        timeout: float = 30.0,
        ok: Callable[[requests.Response], bool] | None = None,
    ) -> None:
        """Poll `url` until it answers (any HTTP status unless `ok` says otherwise)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if not self.alive():
                code = self.proc.returncode if self.proc is not None else None
                raise StackError(
                    f"{self.name} exited with code {code} while starting; "
                    f"log {self.log_path}:\n{self.log_tail()}"
                )
            try:
                resp = requests.get(url, timeout=1.0)
                if ok is None or ok(resp):
                    return
            except requests.RequestException:
                pass
            time.sleep(0.05)
        raise StackError(
            f"{self.name} did not answer {url} within {timeout:.0f}s; log {self.log_path}"
        )

    def terminate(self) -> None:
        """Ask the whole group to stop (SIGTERM); :meth:`stop` then waits and makes sure."""
        if self.proc is not None and self.proc.poll() is None:
            _signal_group(self.proc.pid, signal.SIGTERM)

    def stop(self, grace: float = 5.0) -> None:
        proc = self.proc
        if proc is None:
            return
        if proc.poll() is None:
            _signal_group(proc.pid, signal.SIGTERM)
            try:
                proc.wait(timeout=grace)
            except subprocess.TimeoutExpired:
                _signal_group(proc.pid, signal.SIGKILL)
                proc.wait(timeout=grace)
        # The leader may be gone while a grandchild lingers in its group: finish them too.
        _signal_group(proc.pid, signal.SIGKILL)


def stop_all(processes: Sequence[ManagedProcess], grace: float = 5.0) -> None:
    """Stop several at once: SIGTERM to every group first, then wait for each."""
    for proc in processes:
        proc.terminate()
    for proc in processes:
        proc.stop(grace)


def _signal_group(pgid: int, sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)


class Interrupted(KeyboardInterrupt):
    """SIGINT or SIGTERM reached the stack's owner: unwind and tear down."""


_installed_lock = threading.Lock()


def install_signal_handlers() -> Callable[[], None]:
    """Turn SIGINT and SIGTERM into :class:`Interrupted` in the main thread.

    Returns a function that restores the previous handlers. Only the CLI calls
    this (tests drive the stack as a context manager and keep their own).
    """

    def handler(signum: int, _frame: FrameType | None) -> None:
        raise Interrupted(signal.Signals(signum).name)

    with _installed_lock:
        previous = {sig: signal.signal(sig, handler) for sig in (signal.SIGINT, signal.SIGTERM)}

    def restore() -> None:
        for sig, old in previous.items():
            signal.signal(sig, old)

    return restore
