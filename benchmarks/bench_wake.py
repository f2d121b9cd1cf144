"""Figures for the wake (docs/design.md#wake): request counts and warm latency.

- API requests for a wake start (a wake request on a released, suspended set:
  unsuspend, Waking, create) and for a completion (the restored VM is live:
  drop the tag, clear the hint, count, event, phase);
- registry requests for each;
- warm latency, wake request delivered → main pod created, p50/p99.

Run: `uv run python -m benchmarks.bench_wake` (`--quick` for 20 runs).
"""

from __future__ import annotations

import json
import statistics
import sys
import time
from typing import Any

from benchmarks._util import fig as figure
from benchmarks._util import percentile
from benchmarks.bench_release import (
    NS,
    Stack,
    function_client,
    post_event,
    quiet_logs,
    real_available,
    stack,
)
from shared import constants as k
from shared.names import SetRef, vm_name


def released(st: Stack, name: str) -> None:
    st.create_set(
        name,
        suspend=True,
        phase="Suspended",
        annotations={
            k.ANN_HIBERNATED_ON_NODE: "node-a",
            k.ANN_DELETE_VM_NAMES: vm_name(NS, name, 0),
        },
    )
    st.push(vm_name(NS, name, 0))


def report_live(st: Stack, name: str) -> None:
    pod = f"{name}-0"
    st.core.patch_namespaced_pod(
        pod,
        NS,
        {"metadata": {"annotations": {k.ANN_VM_ID: "vm-1"}}},
        _content_type="application/merge-patch+json",
    )
    st.core.create_namespaced_pod_binding(
        pod,
        NS,
        {
            "apiVersion": "v1",
            "kind": "Binding",
            "metadata": {"name": pod},
            "target": {"apiVersion": "v1", "kind": "Node", "name": "node-a"},
        },
        _preload_content=False,
    )
    st.core.patch_namespaced_pod_status(
        pod,
        NS,
        {
            "status": {
                "phase": "Running",
                "conditions": [{"type": "Ready", "status": "True"}],
                "containerStatuses": [
                    {
                        "name": k.MAIN_CONTAINER,
                        "ready": True,
                        "image": k.PLACEHOLDER_IMAGE,
                        "imageID": "",
                        "restartCount": 0,
                        "state": {"running": {"startedAt": "2026-01-01T00:00:00Z"}},
                    }
                ],
            }
        },
        _content_type="application/merge-patch+json",
    )


def _bind(st: Stack, pod: str) -> None:
    st.core.create_namespaced_pod_binding(
        pod,
        NS,
        {
            "apiVersion": "v1",
            "kind": "Binding",
            "metadata": {"name": pod},
            "target": {"apiVersion": "v1", "kind": "Node", "name": "node-a"},
        },
        _preload_content=False,
    )


def _listing(reqs: list[dict[str, Any]]) -> str:
    return "; ".join(
        f"{i + 1}. {r['method']} {r['path'].replace(f'/namespaces/{NS}', '/ns/' + NS)}"
        f" -> {r['status']}"
        for i, r in enumerate(reqs)
    )


def run(*, quick: bool) -> dict[str, Any]:
    """Both backends side by side in one run (real figures suffixed `_real`)."""
    figures: dict[str, Any] = {}
    samples: dict[str, list[float]] = {}
    for backend in ("embedded", "real"):
        if backend == "real" and not real_available():
            figures["wake_real"] = figure(
                0, "skipped", "real kube-apiserver not built here (`make controlplane`)"
            )
            continue
        f, s_ = _run_backend(backend, quick=quick)
        suffix = "" if backend == "embedded" else "_real"
        figures.update({key + suffix: v for key, v in f.items()})
        samples.update({key + suffix: v for key, v in s_.items()})
    if "wake_latency_ms_real" in samples:
        real, emb = (statistics.median(samples[f"wake_latency_ms{s}"]) for s in ("_real", ""))
        figures["wake_latency_p50_real_over_embedded"] = figure(
            real / emb,
            "x",
            f"wake start p50 {real:.1f} ms on the real kube-apiserver vs {emb:.1f} ms embedded, "
            "same run (target <= 1.5x, docs/reads.md)",
        )
    return {"figures": figures, "samples": samples}


def _requests(st: Stack, backend: str) -> tuple[int, str]:
    """(count, listing): the client's own count; the emulator's log lists them too."""
    if backend != "embedded":
        return st.client.requests, f"{st.client.requests} on a real kube-apiserver"
    reqs = st.api_requests()
    assert len(reqs) == st.client.requests, (reqs, st.client.requests)
    return len(reqs), _listing(reqs)


def _reset(st: Stack, backend: str) -> None:
    if backend == "embedded":
        st.reset_requests()
    st.client.reset_requests()


def _run_backend(backend: str, *, quick: bool) -> tuple[dict[str, Any], dict[str, list[float]]]:
    from shared.reconcile import reconcile_set, request_wake

    runs = 20 if quick else 200
    figures: dict[str, Any] = {}
    samples: dict[str, list[float]] = {}
    with stack(backend) as st, quiet_logs():
        ref = SetRef(NS, "counted")
        released(st, "counted")
        _reset(st, backend)
        reg0 = st.snapshots.requests_made
        out = request_wake(ref, kube=st.client, registry=st.snapshots, settings=st.settings)
        assert out.created_main, out
        start_n, start_listing = _requests(st, backend)
        figures["wake_start_api_requests"] = figure(
            start_n,
            "requests",
            "wake request on a released, suspended set. Minimum 6: GET set, PATCH "
            "spec.suspend=false (the desired state first), LIST pods, PATCH status Waking "
            "(CAS; durable before the create), PATCH set wake-started stamp (the sweep's "
            "deadline clock; metadata cannot "
            "ride on a status write), POST pod. 5 when the set is already unsuspended. "
            "Plus one LIST of the pool's line of waiting wakes (the fair order; none with "
            f"COCOON_SEAT_ORDER=off). Measured: {start_listing}",
        )
        figures["wake_start_registry_requests"] = figure(
            st.snapshots.requests_made - reg0, "requests", "one HEAD <vm0>:hibernate (the probe)"
        )

        report_live(st, "counted")
        _reset(st, backend)
        reg0 = st.snapshots.requests_made
        out = reconcile_set(ref, kube=st.client, registry=st.snapshots, settings=st.settings)
        done_n, done_listing = _requests(st, backend)
        figures["wake_completion_api_requests"] = figure(
            done_n,
            "requests",
            "the restored VM is live. Minimum 6: GET set, LIST pods, PATCH set (clear the hint + "
            "last-wake + the owed report, CAS), POST event (WakeCompleted, named by the wake: "
            "its create decides the count), PATCH set (owed marker removed, CAS), PATCH status "
            "(Running). Plus one LIST of the pool's line (the hand-off to the next waiting wake). "
            f"Measured: {done_listing}",
        )
        figures["wake_completion_registry_requests"] = figure(
            st.snapshots.requests_made - reg0,
            "requests",
            "drop <vm0>:hibernate on Distribution: HEAD (resolve the digest), tags/list (never "
            "delete a manifest another tag shares), DELETE by digest",
        )

        def series(prefix: str, env: dict[str, str] | None = None) -> list[float]:
            names = [f"{prefix}{i}" for i in range(runs + 1)]
            for name in names:
                released(st, name)
            out: list[float] = []
            with function_client(st, "wake", env) as wake:
                for i, name in enumerate(names):
                    t0 = time.perf_counter()
                    status = post_event(wake, k.CE_WAKE_REQUESTED, {"namespace": NS, "name": name})
                    elapsed = (time.perf_counter() - t0) * 1000.0
                    assert status == 200, status
                    if i > 0:  # the first is the instance's cold start
                        out.append(elapsed)
                    # Scheduled, as in a pool with room: it leaves the line (which lists
                    # unbound restore pods), so the next wake's line is not this run's
                    # every earlier wake. Untimed.
                    _bind(st, f"{name}-0")
            return out

        latencies = series("w")
        # The same wakes with the fair order off, right after: what its LIST costs.
        without = series("x", {"COCOON_SEAT_ORDER": "off"})
        samples["wake_latency_ms"] = latencies
        samples["wake_latency_order_off_ms"] = without
        figures["wake_latency_order_on_over_off"] = figure(
            statistics.median(latencies) / statistics.median(without),
            "x",
            f"p50 {statistics.median(latencies):.1f} ms with the seat line's LIST vs "
            f"{statistics.median(without):.1f} ms with COCOON_SEAT_ORDER=off, same run, "
            "a pool with room (no gate)",
        )
        figures["wake_latency_p50"] = figure(
            statistics.median(latencies),
            "ms",
            f"warm: wake-requested CloudEvent delivered to the wake target -> main pod created "
            f"(unsuspend, probe, Waking, create); {len(latencies)} runs, {backend} Kubernetes "
            "API + real registry on 127.0.0.1",
        )
        figures["wake_latency_p99"] = figure(
            percentile(latencies, 99), "ms", f"as above, p99 over {len(latencies)} runs"
        )
    return figures, samples


def main() -> None:
    result = run(quick="--quick" in sys.argv)
    print(json.dumps(result["figures"], indent=2))


if __name__ == "__main__":
    main()
