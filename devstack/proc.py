"""Process helpers shared by the local stack's parts (registry, embedded API, functions).

Every child process the local stack, the tests or the benchmarks start must die with its
parent, so a killed run never leaves a registry or a function listening on 127.0.0.1.
"""

from __future__ import annotations

import contextlib
import ctypes
import signal
import socket
import sys

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
