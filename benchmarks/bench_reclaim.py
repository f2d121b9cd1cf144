"""Seat reclaim on the local stack: wake request -> restored pod bound, in a full pool.

The whole local stack, as `make demo` runs it (embedded API with its audit
webhook to `ingest`, a real Distribution registry notifying `ingest`, the four
targets as functions-framework processes, the simulator's scheduler and
vk-cocoon with the demo's timings, a sweep tick every second). One node with
one seat; two release sets take turns: the one holding the seat has been idle
past its `reclaimable-after`, the other is woken. Measured from the wake
request CloudEvent delivered to `wake` until the restored main pod is bound.

The time is mostly the grace (COCOON_SEAT_RECLAIM_GRACE, the stack's 2 s) plus
the wait for the next reconcile after it (the sweep tick), then the victim's
release (hibernate, push, verify, delete) and the restore. The same wake into
a pool with a free seat is measured alongside, as the ratio's denominator.

Run: `uv run python -m benchmarks.bench_reclaim` (`--quick` for 2 runs each).
"""

from __future__ import annotations

import json
import statistics
import sys
import time
from typing import Any

from benchmarks._util import fig as figure
from benchmarks._util import percentile
from devstack.kubehttp import KubeHTTP, pod_path, set_path
from devstack.simulator import NodeSpec
from devstack.stack import Stack, StackConfig
from shared import constants as k
from shared.constants import ANN_RECLAIMABLE_AFTER

NS = "bench"
TICK = 1.0


def _set(name: str) -> dict[str, Any]:
    return {
        "apiVersion": k.API_VERSION,
        "kind": k.KIND,
        "metadata": {
            "name": name,
            "namespace": NS,
            "annotations": {ANN_RECLAIMABLE_AFTER: "1s"},
        },
        "spec": {"hibernatePolicy": "release", "agent": {"image": f"ghcr.io/acme/{name}:1"}},
    }


def _phase(api: KubeHTTP, name: str) -> str:
    return str((api.get(set_path(NS, name)).get("status") or {}).get("phase") or "")


def _bound(api: KubeHTTP, name: str) -> bool:
    pods = api.list_items(pod_path(NS), {"labelSelector": f"{k.LABEL_SET_NAME}={name}"})
    return any(
        (p.get("spec") or {}).get("nodeName")
        and not (p.get("metadata") or {}).get("deletionTimestamp")
        and ((p.get("metadata") or {}).get("annotations") or {}).get(k.ANN_RESTORE) == k.TRUE
        for p in pods
    )


def _wait(stack: Stack, what: str, check: Any, timeout: float = 60.0) -> None:
    stack.wait_for(what, check, timeout)


def _suspend(api: KubeHTTP, stack: Stack, name: str) -> None:
    api.merge_patch(set_path(NS, name), {"spec": {"suspend": True}})
    _wait(stack, f"{name} Suspended", lambda: _phase(api, name) == "Suspended")


def _wake_until_bound(api: KubeHTTP, stack: Stack, name: str) -> float:
    start = time.perf_counter()
    # Delivered as Eventarc/Knative would: a non-2xx (the old main pod still
    # terminating) is redelivered with backoff; the clock runs from the first delivery.
    for attempt in range(1, 8):
        status = stack.request_wake(NS, name)
        if status < 300:
            break
        time.sleep(0.1 * attempt)
    else:
        raise RuntimeError(f"wake kept answering HTTP {status}")
    while not _bound(api, name):
        if time.perf_counter() - start > 90:
            raise TimeoutError(f"{name}'s restored pod was never bound")
        time.sleep(0.02)
    elapsed = (time.perf_counter() - start) * 1000
    _wait(stack, f"{name} Running", lambda: _phase(api, name) == "Running")
    return elapsed


def run(*, quick: bool = False) -> dict[str, Any]:
    runs = 2 if quick else 8
    config = StackConfig(nodes=[NodeSpec("node-1", seats=1)], tick_seconds=TICK, sim_interval=0.05)
    reclaim: list[float] = []
    free: list[float] = []
    with Stack(config) as stack:
        api = KubeHTTP(stack.kube_url)
        api.post(
            "/api/v1/namespaces",
            {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}},
        )
        # Warm the wake instance (its first relevant event loads the Kubernetes client,
        # seconds on a busy machine): the figure is the reclaim, not a cold start.
        stack.request_wake(NS, "warm-up")
        # "x" runs and is released once; then the loop alternates roles.
        api.post(set_path(NS), _set("x"))
        _wait(stack, "x Running", lambda: _phase(api, "x") == "Running")
        _suspend(api, stack, "x")
        api.post(set_path(NS), _set("y"))
        _wait(stack, "y Running", lambda: _phase(api, "y") == "Running")
        holder, waker = "y", "x"
        for _ in range(runs):
            # The holder has been idle past reclaimable-after (1 s since its last wake).
            time.sleep(1.2)
            reclaim.append(_wake_until_bound(api, stack, waker))
            _wait(stack, f"{holder} Suspended", lambda h=holder: _phase(api, h) == "Suspended")
            holder, waker = waker, holder
        # The baseline: the same wake with the seat free (the holder released by hand).
        for _ in range(runs):
            _suspend(api, stack, holder)
            free.append(_wake_until_bound(api, stack, holder))
        api.close()
    p50, p50_free = statistics.median(reclaim), statistics.median(free)
    note = (
        f"local stack (embedded API, real registry, functions-framework targets, simulator "
        f"vk-cocoon as in the demo), 1 node x 1 seat, sweep tick {TICK:g}s, reclaim grace 2s; "
        f"{runs} runs"
    )
    return {
        "figures": {
            "reclaim_wake_to_bound_p50": figure(
                p50, "ms", f"full pool, idle reclaimable set: {note}"
            ),
            "reclaim_wake_to_bound_max": figure(max(reclaim), "ms", "as above, slowest run"),
            "free_wake_to_bound_p50": figure(p50_free, "ms", f"a free seat, no reclaim: {note}"),
            "reclaim_over_free": figure(
                p50 / p50_free,
                "x",
                f"p50 {p50:.0f} ms vs {p50_free:.0f} ms; p90 reclaim "
                f"{percentile(reclaim, 90):.0f} ms (the grace and the tick are most of it)",
            ),
        },
        "samples": {"reclaim wake->bound": reclaim, "free-seat wake->bound": free},
    }


if __name__ == "__main__":
    print(json.dumps(run(quick="--quick" in sys.argv), indent=2))
