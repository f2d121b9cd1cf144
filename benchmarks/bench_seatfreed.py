"""Seat freed after vk-cocoon reports `hibernated`, per trigger configuration, in the real order.

vk-cocoon hibernates Save -> Push `<vm>:hibernate` -> remove the VM ->
report `hibernated` (its `provider/cocoon/update.go` `hibernate`), so the
registry's push event reaches the functions *before* the report. Each run
starts where the functions' release reconcile leaves a set (`Suspending`, the
main pod asked to hibernate at the current generation) and the simulator's
vk-cocoon (devstack/vkorder.py) does the rest in that order, with a gap of
`GAP_S` between push and report. The clock starts when vk-cocoon's
`hibernated` patch is answered and stops when the main pod's DELETE reaches
the API (a pod watch; its own delivery adds about a millisecond here).

Configurations (devstack/triggerrig.py): `push` (Distribution's notifications
-> `ingest /registry` only), `audit` (the API server's audit webhook ->
`ingest /kubernetes/audit` only), `both`. No sweep runs: a release the event
path did not complete counts as `left_to_sweep` (and is not in p50/p99). The
first release of each rig warms `ingest` (its first relevant event loads the
Kubernetes client) and is not counted. Both backends in one run: the embedded
API, then a real kube-apiserver + etcd when its binaries are built
(`make controlplane`); on the real one the audit webhook reaches a local TLS
sink that forwards each batch to `ingest` (`--audit-webhook-batch-max-wait`
200 ms), on the embedded one the emulator's webhook posts directly (200 ms).

No comparison with cocoon-operator here: it does not poll, it reconciles on the
pod's annotation change (its 5 s requeue is a fallback). The functions beside
it and alone, side by side with it, are `bench_operator.py`.

Run: `uv run python -m benchmarks.bench_seatfreed` (`--quick`: 5 runs, embedded only).
"""

from __future__ import annotations

import json
import statistics
import sys
from typing import Any

from benchmarks._util import fig as figure
from benchmarks._util import percentile

GAP_S = 0.5  # devstack.vkorder.DEFAULT_REPORT_GAP_S: a forced `cocoon vm rm` and its patch
RUN_TIMEOUT_S = 15.0


def _waits(log_lines: list[str]) -> list[float]:
    """The seconds each push invocation waited for the report (ingest's own log)."""
    out = []
    for line in log_lines:
        try:
            rec = json.loads(line)
        except ValueError:
            continue
        if isinstance(rec, dict) and rec.get("message") == (
            "vk-cocoon reported after the push; reconciling again"
        ):
            out.append(float(rec.get("waited_s") or 0.0))
    return out


def _measure(backend: str, mode: str, runs: int, real: Any) -> dict[str, Any]:
    from devstack.triggerrig import TriggerRig

    latencies: list[float] = []
    gaps: list[float] = []
    left: list[str] = []
    with TriggerRig(backend, mode, gap=GAP_S, real=real) as rig:
        rig.warm_up()
        skip = len(rig.log_path.read_text(errors="replace").splitlines())
        for _ in range(runs):
            r = rig.release(RUN_TIMEOUT_S)
            gaps.append((r.reported - r.pushed) * 1000.0)
            ms = r.freed_after_report_ms
            if ms is None:
                left.append(r.name)
            else:
                latencies.append(ms)
        waits = _waits(rig.log_path.read_text(errors="replace").splitlines()[skip:])
    return {"lat": latencies, "gaps": gaps, "left": left, "waits": waits}


def run(*, quick: bool = False) -> dict[str, Any]:
    from benchmarks.bench_release import real_available
    from devstack.triggerrig import MODES

    runs = 5 if quick else 100
    backends = ["embedded"] if quick else ["embedded", "real"]
    figures: dict[str, Any] = {}
    samples: dict[str, list[float]] = {}
    p99s: dict[tuple[str, str], float] = {}
    for backend in backends:
        real: Any = None
        if backend == "real":
            if not real_available():
                figures["seat_freed_real"] = figure(
                    0, "skipped", "real kube-apiserver not built here (`make controlplane`)"
                )
                continue
            from devstack.realkube import RealKube

            real = RealKube()
            real.start()
        try:
            for mode in MODES:
                m = _measure(backend, mode, runs, real)
                if real is not None:
                    real.reset()
                lat = m["lat"]
                tag = f"{mode}{'' if backend == 'embedded' else '_real'}"
                where = (
                    "embedded Kubernetes API" if backend == "embedded" else "real kube-apiserver"
                )
                figures[f"seat_freed_left_to_sweep_{tag}"] = figure(
                    len(m["left"]),
                    "runs",
                    f"of {runs}: the event path did not free the seat within "
                    f"{RUN_TIMEOUT_S:.0f}s of the push (no sweep running); {mode}, {where}",
                )
                if not lat:
                    continue
                samples[f"seat_freed_after_report_ms_{tag}"] = lat
                p50, p99 = statistics.median(lat), percentile(lat, 99)
                p99s[(backend, mode)] = p99
                figures[f"seat_freed_after_report_p50_{tag}"] = figure(
                    p50,
                    "ms",
                    f"vk-cocoon's `hibernated` patch answered -> main pod DELETE at the API, "
                    f"trigger configuration `{mode}`, {where}; vk-cocoon pushed "
                    f"{GAP_S * 1000:.0f} ms before its report (real order); {len(lat)} runs, "
                    f"warm",
                )
                figures[f"seat_freed_after_report_p99_{tag}"] = figure(
                    p99, "ms", f"as above, p99 over {len(lat)} runs (max {max(lat):.0f} ms)"
                )
                if m["waits"]:
                    figures[f"seat_freed_push_wait_s_{tag}"] = figure(
                        statistics.fmean(m["waits"]),
                        "s",
                        f"mean time a push invocation waited for the report "
                        f"({len(m['waits'])} waits; the push -> report gap was "
                        f"{statistics.median(m['gaps']):.0f} ms p50): the extra seconds billed "
                        f"per release",
                    )
        finally:
            if real is not None:
                real.stop()
    if ("embedded", "both") in p99s and ("real", "both") in p99s:
        figures["seat_freed_p99_both_real_over_embedded"] = figure(
            p99s[("real", "both")] / p99s[("embedded", "both")],
            "x",
            f"real {p99s[('real', 'both')]:.0f} ms vs embedded "
            f"{p99s[('embedded', 'both')]:.0f} ms, same run",
        )
    return {"figures": figures, "samples": samples}


if __name__ == "__main__":
    print(json.dumps(run(quick="--quick" in sys.argv)["figures"], indent=2))
