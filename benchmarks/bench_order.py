"""Fair order among waiting wakes on the local stack: who gets a freed seat, and how fast.

The whole local stack, as `make demo` runs it (embedded API with its audit
webhook to `ingest`, a real Distribution registry, the four targets as
functions-framework processes, the simulator's vk-cocoon with the demo's
timings), with the simulator's scheduler in NEWEST_FIRST order: when a seat
frees, the pod that entered its queue last is tried first (kube-scheduler's
per-pod backoff at its least kind).

One node, one seat. A rolling line: one set holds the seat and three released
sets wait for it, woken one after another. Each cycle releases the holder
(`suspend: true`); the set whose restored pod is bound next takes the seat and
becomes the holder, and the released one is woken again at the end of the
line. Per cycle: whether the seat went to the wake that had waited longest,
and the time from the holder's pod gone (the seat free) to the next restored
pod bound. Both with `COCOON_SEAT_ORDER=gate` and `=off`, in the same run.

Run: `uv run python -m benchmarks.bench_order` (`--quick` for 3 cycles each).
"""

from __future__ import annotations

import json
import statistics
import sys
import time
from typing import Any

from benchmarks._util import fig as figure
from devstack.kubehttp import KubeHTTP, pod_path, set_path
from devstack.sim_scheduler import NEWEST_FIRST
from devstack.simulator import NodeSpec
from devstack.stack import Stack, StackConfig
from shared import constants as k
from shared.constants import GATE_SEAT_ORDER as GATE

NS = "bench"
NAMES = ["a", "b", "c", "d"]


def _set(name: str) -> dict[str, Any]:
    return {
        "apiVersion": k.API_VERSION,
        "kind": k.KIND,
        "metadata": {"name": name, "namespace": NS},
        "spec": {"hibernatePolicy": "release", "agent": {"image": f"ghcr.io/acme/{name}:1"}},
    }


def _phase(api: KubeHTTP, name: str) -> str:
    return str((api.get(set_path(NS, name)).get("status") or {}).get("phase") or "")


def _main(api: KubeHTTP, name: str) -> dict[str, Any] | None:
    pods = api.list_items(pod_path(NS), {"labelSelector": f"{k.LABEL_SET_NAME}={name}"})
    live = [p for p in pods if not (p.get("metadata") or {}).get("deletionTimestamp")]
    return live[0] if live else None


def _bound(api: KubeHTTP, name: str) -> bool:
    pod = _main(api, name)
    return pod is not None and bool((pod.get("spec") or {}).get("nodeName"))


def _waiting(api: KubeHTTP, name: str) -> bool:
    """Its restore pod exists and waits: judged unschedulable, or gated in line."""
    pod = _main(api, name)
    if pod is None or (pod.get("spec") or {}).get("nodeName"):
        return False
    gates = [g.get("name") for g in (pod.get("spec") or {}).get("schedulingGates") or []]
    judged = any(
        c.get("type") == "PodScheduled" and c.get("reason") == "Unschedulable"
        for c in (pod.get("status") or {}).get("conditions") or []
    )
    return GATE in gates or judged


def _request(stack: Stack, name: str) -> None:
    # Delivered as Eventarc/Knative would: a non-2xx is redelivered with backoff.
    for attempt in range(1, 10):
        if stack.request_wake(NS, name) < 300:
            return
        time.sleep(0.1 * attempt)
    raise RuntimeError(f"the wake of {name} kept failing")


def _wake(stack: Stack, api: KubeHTTP, name: str) -> None:
    """Wake into the full pool: returns once the wake is known to wait."""
    _request(stack, name)
    stack.wait_for(f"{name} waiting", lambda: _waiting(api, name), 60)


def _cycles(order: str, cycles: int) -> tuple[list[bool], list[float]]:
    config = StackConfig(
        nodes=[NodeSpec("node-1", seats=1)],
        tick_seconds=1.0,
        sim_interval=0.05,
        seat_reclaim_grace="off",
        scheduler_order=NEWEST_FIRST,
        extra_env={"COCOON_SEAT_ORDER": order},
    )
    fair: list[bool] = []
    handover: list[float] = []
    with Stack(config) as stack:
        api = KubeHTTP(stack.kube_url)
        api.post(
            "/api/v1/namespaces",
            {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}},
        )
        stack.request_wake(NS, "warm-up")  # the wake target's first relevant event is cold
        # Every set runs once and is released, one at a time (one seat).
        for name in NAMES:
            api.post(set_path(NS), _set(name))
            stack.wait_for(f"{name} Running", lambda n=name: _phase(api, n) == "Running", 60)
            api.merge_patch(set_path(NS, name), {"spec": {"suspend": True}})
            stack.wait_for(f"{name} Suspended", lambda n=name: _phase(api, n) == "Suspended", 60)
        holder, line = NAMES[0], list(NAMES[1:])
        _request(stack, holder)  # into the free seat
        stack.wait_for("holder Running", lambda: _phase(api, holder) == "Running", 60)
        for name in line:
            _wake(stack, api, name)
        for _ in range(cycles):
            # Let the last wake's invocations finish: the figure is the hand-over, not
            # a machine busy with the previous step.
            time.sleep(0.5)
            api.merge_patch(set_path(NS, holder), {"spec": {"suspend": True}})
            stack.wait_for("seat free", lambda h=holder: _main(api, h) is None, 60)
            freed = time.perf_counter()
            while not (winners := [n for n in line if _bound(api, n)]):
                if time.perf_counter() - freed > 60:
                    raise TimeoutError("no waiting wake got the freed seat")
                time.sleep(0.01)
            handover.append((time.perf_counter() - freed) * 1000)
            [winner] = winners
            fair.append(winner == line[0])
            stack.wait_for(f"{winner} Running", lambda w=winner: _phase(api, w) == "Running", 60)
            stack.wait_for(
                f"{holder} Suspended", lambda h=holder: _phase(api, h) == "Suspended", 60
            )
            line.remove(winner)
            line.append(holder)
            holder = winner
            _wake(stack, api, line[-1])
        api.close()
    return fair, handover


def run(*, quick: bool = False) -> dict[str, Any]:
    cycles = 3 if quick else 10
    fair_gate, hand_gate = _cycles("gate", cycles)
    fair_off, hand_off = _cycles("off", cycles)
    share_gate = sum(fair_gate) / len(fair_gate)
    share_off = sum(fair_off) / len(fair_off)
    p50_gate, p50_off = statistics.median(hand_gate), statistics.median(hand_off)
    note = (
        f"local stack, 1 node x 1 seat, 3 waiting wakes, simulator scheduler NEWEST_FIRST, "
        f"{cycles} freed seats per setting"
    )
    return {
        "figures": {
            "fair_share_gate": figure(
                share_gate * 100, "%", f"freed seats taken by the longest waiter, gate: {note}"
            ),
            "fair_share_off": figure(
                share_off * 100, "%", f"the same, COCOON_SEAT_ORDER=off: {note}"
            ),
            "seat_to_bound_p50_gate": figure(p50_gate, "ms", "seat free -> next pod bound, gate"),
            "seat_to_bound_p50_off": figure(p50_off, "ms", "seat free -> next pod bound, off"),
            "seat_to_bound_gate_over_off": figure(
                p50_gate / p50_off, "x", f"p50 {p50_gate:.0f} ms vs {p50_off:.0f} ms"
            ),
        },
        "samples": {"gate seat->bound": hand_gate, "off seat->bound": hand_off},
    }


if __name__ == "__main__":
    print(json.dumps(run(quick="--quick" in sys.argv), indent=2))
