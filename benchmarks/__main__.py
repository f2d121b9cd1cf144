"""Run every benchmark, write results/latest.json, PNG plots and a markdown table.

uv run python -m benchmarks            # full run (what docs/performance.md quotes)
uv run python -m benchmarks --quick    # CI-sized smoke run of the harness
uv run python -m benchmarks --only coldstart ingest
uv run python -m benchmarks --only workload   # merged into an existing latest.json
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import platform
import subprocess
import sys
import time
import traceback
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

ORDER = [
    "kubeapi",
    "reads",
    "coldstart",
    "firstevent",
    "ingest",
    "release",
    "wake",
    "seatfreed",
    "sweep",
    "reclaim",
    "order",
    "operator",
    "workload",
]
RESULTS = Path(__file__).resolve().parent / "results"


def machine_info() -> dict[str, Any]:
    cpu = platform.processor() or ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    mem_gib = 0.0
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal"):
                mem_gib = round(int(line.split()[1]) / 1024 / 1024, 1)
    except OSError:
        pass
    try:
        commit = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, check=False
        ).stdout.strip()
    except OSError:
        commit = ""
    return {
        "date": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "cpu": cpu,
        "cores": os.cpu_count(),
        "memory_gib": mem_gib,
        "python": platform.python_version(),
        "platform": platform.platform(),
        "commit": commit,
    }


def _plot(results: dict[str, Any], out_dir: Path) -> list[str]:
    """Latency distributions and sweep cost against set count, as PNG files."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return []
    written: list[str] = []
    samples = {
        f"{bench}: {name}": values
        for bench, res in results.items()
        for name, values in (res.get("samples") or {}).items()
        if values
    }
    if samples:
        fig, ax = plt.subplots(figsize=(10, 0.6 * len(samples) + 1.5))
        names = list(samples)
        ax.boxplot([samples[n] for n in names], orientation="horizontal", showfliers=True)
        ax.set_yticks(range(1, len(names) + 1), names, fontsize=8)
        ax.set_xscale("log")
        ax.set_xlabel("milliseconds (log scale)")
        ax.set_title("Latency distributions")
        fig.tight_layout()
        path = out_dir / "latency.png"
        fig.savefig(path, dpi=110)
        plt.close(fig)
        written.append(path.name)
    sweep = results.get("sweep", {}).get("series") or {}
    if sweep.get("sets"):
        fig, ax1 = plt.subplots(figsize=(7, 4))
        ax1.plot(sweep["sets"], sweep["seconds"], "o-", label="wall time (s)")
        ax1.set_xlabel("CocoonSets")
        ax1.set_ylabel("seconds")
        ax2 = ax1.twinx()
        ax2.plot(sweep["sets"], sweep["requests"], "s--", color="tab:orange", label="API requests")
        ax2.set_ylabel("API requests")
        ax1.set_title("Sweep cost against set count")
        fig.legend(loc="upper left")
        fig.tight_layout()
        path = out_dir / "sweep.png"
        fig.savefig(path, dpi=110)
        plt.close(fig)
        written.append(path.name)
    workload = results.get("workload") or {}
    if workload.get("series"):
        written.append(_plot_workload(plt, workload, out_dir))
    return written


def _plot_workload(plt: Any, res: dict[str, Any], out_dir: Path) -> str:
    """Seats in use and waiting wakes over the trace per configuration, and the waits."""
    series: dict[str, Any] = res["series"]
    configs = list(series)
    seats = int((res.get("params") or {}).get("seats") or 0)
    fig = plt.figure(figsize=(11, 2.4 * len(configs) + 0.6))
    grid = fig.add_gridspec(len(configs), 2, width_ratios=[2.2, 1])
    top = None
    for row, name in enumerate(configs):
        s = series[name]
        ax = fig.add_subplot(grid[row, 0], sharex=top)
        top = top or ax
        ax.plot(s["t"], s["seats_in_use"], color="tab:blue", label="seats in use")
        ax.plot(s["t"], s["idle_seats"], color="tab:gray", lw=1, label="of them idle VMs")
        ax.plot(s["t"], s["waiting_wakes"], color="tab:red", label="waiting wakes")
        if seats:
            ax.axhline(seats, color="black", lw=0.8, ls=":", label=f"{seats} seats")
        ax.set_ylabel(name)
        ax.grid(alpha=0.3)
        if row == 0:
            ax.set_title("over the trace, embedded API (compressed: 1 s = 1 min)")
            ax.legend(fontsize=8, loc="upper left", ncols=4)
        if row == len(configs) - 1:
            ax.set_xlabel("trace time (s)")
    ax = fig.add_subplot(grid[:, 1])
    for name, waits in (res.get("wait_samples_s") or {}).items():
        if waits:
            xs = sorted(waits)
            ys = [(i + 1) / len(xs) for i in range(len(xs))]
            ax.step(xs, ys, where="post", label=f"{name} ({len(xs)} wakes)")
    ax.set_xlabel("wake wait (s); a timed-out wake at the timeout")
    ax.set_ylabel("share of wakes served within")
    ax.set_title("wake-wait distribution")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, loc="lower right")
    fig.tight_layout()
    path = out_dir / "workload.png"
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path.name


def table(results: dict[str, Any]) -> str:
    lines = ["| benchmark | figure | value | unit | note |", "|---|---|---|---|---|"]
    for bench, res in results.items():
        if "error" in res:
            lines.append(f"| {bench} | (failed) | | | {res['error'].splitlines()[-1]} |")
            continue
        for name, fig in res.get("figures", {}).items():
            value = fig.get("value")
            shown = f"{value:.3g}" if isinstance(value, float) else str(value)
            note = str(fig.get("note", "")).replace("|", "/").replace("\n", " ")
            lines.append(f"| {bench} | {name} | {shown} | {fig.get('unit', '')} | {note} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks")
    parser.add_argument("--quick", action="store_true", help="small N: prove the harness works")
    parser.add_argument("--only", nargs="*", choices=ORDER, help="run only these")
    parser.add_argument("--out", type=Path, default=RESULTS, help="results folder")
    args = parser.parse_args(argv)
    out: Path = args.out
    out.mkdir(parents=True, exist_ok=True)
    results: dict[str, Any] = {}
    failed = False
    for name in args.only or ORDER:
        started = time.perf_counter()
        print(f"== {name} ...", file=sys.stderr, flush=True)
        try:
            module = importlib.import_module(f"benchmarks.bench_{name}")
            results[name] = module.run(quick=args.quick)
        except Exception:  # one broken benchmark must not hide the others
            failed = True
            results[name] = {"error": traceback.format_exc()}
            print(results[name]["error"], file=sys.stderr)
        results[name]["seconds"] = round(time.perf_counter() - started, 2)
    doc: dict[str, Any] = {"machine": machine_info(), "quick": args.quick, "results": results}
    previous = out / "latest.json"
    if args.only and previous.exists():
        # A partial run updates its benchmarks in the last full run's file, each stamped
        # with its own machine line; the other benchmarks' results stay as they were.
        try:
            old = json.loads(previous.read_text())
        except ValueError:
            old = {}
        if isinstance(old, dict) and isinstance(old.get("results"), dict):
            for res in results.values():
                res["machine"] = doc["machine"]
            doc = {**old, "results": {**old["results"], **results}}
            results = doc["results"]
    workload = results.get("workload") or {}
    if workload.get("figures"):
        # The headline figures where a reader looks first; the rest under results.workload.
        doc["workload"] = {name: f["value"] for name, f in workload["figures"].items()} | {
            key: workload[key]
            for key in ("configurations", "configurations_real")
            if key in workload
        }
    doc["plots"] = sorted(set(_plot(results, out)) | set(doc.get("plots") or []))
    (out / "latest.json").write_text(json.dumps(doc, indent=2, default=str) + "\n")
    md = table(results)
    sections = [str(r["markdown"]) for r in results.values() if r.get("markdown")]
    if sections:
        md += "\n\n" + "\n".join(sections)
    (out / "latest.md").write_text(
        f"Measured {doc['machine']['date']} on {doc['machine']['cpu']} "
        f"({doc['machine']['cores']} cores, {doc['machine']['memory_gib']} GiB), "
        f"Python {doc['machine']['python']}, commit {doc['machine']['commit']}"
        f"{' (quick run)' if args.quick else ''}.\n\n{md}\n"
    )
    print(md)
    print(f"\nwritten: {out / 'latest.json'}, {out / 'latest.md'}, plots: {doc['plots']}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
