"""Throughput of `ingest` for irrelevant events against a no-op HTTP function.

Both run as real functions-framework servers (gunicorn, as in production) on
127.0.0.1 and are driven by the same keep-alive client threads, alternating
rounds so machine noise hits both alike. The irrelevant event is a blob push
from a Distribution registry: the most common notification a registry sends.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import requests

from benchmarks._util import fig, free_port, median, percentile, spawn_function, wait_port
from benchmarks.bench_coldstart import ENV, NOOP, ROOT, irrelevant_request


def _serve(source: Path, target: str) -> tuple[subprocess.Popen[bytes], int]:
    port = free_port()
    proc = spawn_function(source, target, port, env=ENV, cwd=ROOT)
    wait_port(port)
    return proc, port


def _drive(
    port: int, n: int, threads: int, headers: dict[str, str], body: bytes, latencies: list[float]
) -> float:
    """Requests per second for n requests spread over `threads` keep-alive clients."""
    url = f"http://127.0.0.1:{port}/registry"
    per = n // threads
    errors: list[str] = []

    def worker() -> None:
        with requests.Session() as s:
            for _ in range(per):
                t0 = time.perf_counter()
                r = s.post(url, headers=headers, data=body, timeout=10)
                latencies.append((time.perf_counter() - t0) * 1000)
                if r.status_code >= 300:
                    errors.append(f"{r.status_code} {r.text[:100]}")

    started = time.perf_counter()
    pool = [threading.Thread(target=worker) for _ in range(threads)]
    for t in pool:
        t.start()
    for t in pool:
        t.join()
    elapsed = time.perf_counter() - started
    if errors:
        raise RuntimeError(f"port {port} answered errors: {errors[:3]}")
    return per * threads / elapsed


def run(*, quick: bool) -> dict[str, Any]:
    n, rounds, threads = (200, 2, 4) if quick else (2000, 5, 4)
    _, headers, body = irrelevant_request("ingest")
    with tempfile.TemporaryDirectory() as tmp:
        noop_src = Path(tmp) / "noop_main.py"
        noop_src.write_text(NOOP)
        noop, noop_port = _serve(noop_src, "noop_http")
        ours, ours_port = _serve(ROOT / "main.py", "ingest")
        try:
            lat_noop: list[float] = []
            lat_ours: list[float] = []
            rps_noop, rps_ours = [], []
            _drive(noop_port, 50, 2, headers, body, [])  # warm both before measuring
            _drive(ours_port, 50, 2, headers, body, [])
            for _ in range(rounds):
                rps_noop.append(_drive(noop_port, n, threads, headers, body, lat_noop))
                rps_ours.append(_drive(ours_port, n, threads, headers, body, lat_ours))
        finally:
            for p in (noop, ours):
                p.terminate()
                p.wait(timeout=10)
    ratio = median(rps_ours) / median(rps_noop)
    return {
        "figures": {
            "ingest throughput / no-op": fig(
                ratio,
                "x",
                f"{median(rps_ours):.0f} vs {median(rps_noop):.0f} req/s, median of {rounds} "
                f"alternating rounds of {n} requests, {threads} keep-alive clients "
                "(target >= 0.8x)",
            ),
            "ingest p50 / p99": fig(
                percentile(lat_ours, 50),
                "ms",
                f"p99 {percentile(lat_ours, 99):.2f} ms; no-op p50 {percentile(lat_noop, 50):.2f} "
                f"ms, p99 {percentile(lat_noop, 99):.2f} ms",
            ),
        },
        "samples": {"ingest irrelevant event": lat_ours, "no-op http": lat_noop},
    }


if __name__ == "__main__":
    print(json.dumps(run(quick="--quick" in sys.argv)["figures"], indent=2))
