"""Small helpers shared by the benchmarks: percentiles, free ports, readiness."""

from __future__ import annotations

import math
import os
import socket
import statistics
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

from devstack.processes import free_port

__all__ = ["fig", "free_port", "median", "percentile", "spawn_function", "wait_port"]


def percentile(samples: Sequence[float], p: float) -> float:
    """Nearest-rank percentile (p in 0..100); NaN for no samples."""
    if not samples:
        return math.nan
    ordered = sorted(samples)
    rank = max(1, math.ceil(p / 100 * len(ordered)))
    return ordered[rank - 1]


def median(samples: Sequence[float]) -> float:
    return statistics.median(samples) if samples else math.nan


def wait_port(port: int, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                return
        except OSError:
            time.sleep(0.002)
    raise TimeoutError(f"nothing listening on 127.0.0.1:{port} after {timeout}s")


def fig(value: float, unit: str, note: str = "") -> dict[str, object]:
    return {"value": float(value), "unit": unit, "note": note}


def spawn_function(
    source: Path, target: str, port: int, *, env: Mapping[str, str], cwd: Path
) -> subprocess.Popen[bytes]:
    """A functions-framework server for `target` of `source` on 127.0.0.1, as in production."""
    argv = [sys.executable, "-m", "functions_framework", "--source", str(source)]
    argv += ["--target", target, "--host", "127.0.0.1", "--port", str(port)]
    return subprocess.Popen(
        argv,
        cwd=cwd,
        env={**os.environ, **env},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
