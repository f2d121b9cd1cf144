"""Three ways side by side in one run: cocoon-operator alone, with the functions, functions alone.

Two figures per way and backend:
- **seat freed**: vk-cocoon reports `hibernated` (after its push of `:hibernate`) ->
  the main pod's DELETE is seen (deletionTimestamp or gone);
- **wake**: the user's `spec.suspend=false` -> the restored VM is up (vk-cocoon booted
  the restore pod).

The operator is `devstack.sim_operator.UpstreamOperator` (cocoon-operator's own
reconcile, slot release and wake included), the scheduler and vk-cocoon the
simulator's; the registry a real Distribution server. For the operator to finish its
wakes here it plays a registry that deletes tags (`registry_deletes_tags=True`, the
OCI spec's optional DELETE by tag; Distribution refuses its DELETE by tag and its wake
arm would stop there, leaving the functions to complete it). "Functions alone" runs the simulator's
normal-flow operator (it never releases) and `COCOON_OPERATOR=absent`.

Delivery is the same for everyone, so what differs is the controllers' work: the
operator's informers and the functions' events are both played by a 20 ms poll
that reacts to any change of the set or its pods (an informer's watch reacts in
milliseconds; the functions' real path, a registry notification or an audit event
through `ingest`, is measured by `bench_seatfreed.py`). So these figures say how
the three compare, not how fast a production event reaches either.

Run: `uv run python -m benchmarks.bench_operator` (`--quick`: 3 runs, embedded only).
"""

from __future__ import annotations

import contextlib
import json
import statistics
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from benchmarks._util import percentile

NS = "bench-op"
SET = "op"
TICK = 0.02
WAYS = ("operator", "operator+functions", "functions")


def figure(value: float, unit: str, note: str) -> dict[str, Any]:
    return {"value": round(value, 3), "unit": unit, "note": note}


class Marks:
    """When vk-cocoon reported `hibernated` and booted a VM (its own events, timed)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.hibernated: dict[str, float] = {}
        self.booted: dict[str, float] = {}

    def on_event(self, ev: Any) -> None:
        with self.lock:
            if ev.kind == "hibernated":
                self.hibernated.setdefault(ev.name, ev.at)
            elif ev.kind == "booted":
                self.booted.setdefault(ev.name, ev.at)

    def reset(self) -> None:
        with self.lock:
            self.hibernated.clear()
            self.booted.clear()


@contextlib.contextmanager
def rig(backend: str) -> Iterator[tuple[Any, Any, Path]]:
    from devstack.kubeapi import EmbeddedKube
    from devstack.realkube import RealKube
    from devstack.registry import DistributionServer

    server: Any = RealKube() if backend == "real" else EmbeddedKube()
    with tempfile.TemporaryDirectory() as tmp, server as kube, DistributionServer() as registry:
        kubeconfig = Path(kube.write_kubeconfig(Path(tmp) / "kubeconfig"))
        yield kube, registry, kubeconfig


def _http(kube: Any) -> Any:
    from devstack.kubehttp import KubeHTTP

    tokens = getattr(kube, "tokens", None)
    if tokens:
        return KubeHTTP(kube.url, token=tokens["admin"], ca_file=str(kube.dir / "ca.crt"))
    return KubeHTTP(kube.url)


def _measure(
    backend: str, way: str, runs: int, kube: Any, registry: Any, kubeconfig: Path
) -> dict[str, list[float]]:
    from devstack.kubehttp import ConflictError, pod_path, set_path
    from devstack.sim_operator import UpstreamOperator
    from devstack.simulator import NodeSpec, Simulator
    from shared import constants as k
    from shared.clients.kube import KubeClient
    from shared.clients.registry import RegistryClient
    from shared.config import OperatorMode, Settings, parse_registry_base
    from shared.names import SetRef
    from shared.reconcile import reconcile_set

    prefix = f"o{uuid.uuid4().hex[:8]}"
    ns = f"{NS}-{WAYS.index(way)}"
    api = _http(kube)
    if backend == "real":
        kube.ensure_namespace(ns)
    else:
        with contextlib.suppress(ConflictError):
            api.post(
                "/api/v1/namespaces",
                {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}},
            )
    marks = Marks()
    operator = way != "functions"
    sim = Simulator(
        api=_http(kube),
        registry_url=registry.url,
        registry_prefix=prefix,
        nodes=[NodeSpec(f"{ns}-node", seats=2)],
        interval=TICK,
        on_event=marks.on_event,
        play_operator=not operator,
    )
    op = UpstreamOperator(
        api=_http(kube),
        registry_url=registry.url,
        registry_prefix=prefix,
        interval=TICK,
        registry_deletes_tags=True,
    )
    settings = Settings(
        kubeconfig=str(kubeconfig),
        registry_base=parse_registry_base(f"{registry.host}/{prefix}"),
        registry_insecure=True,
        operator=OperatorMode.PRESENT if operator else OperatorMode.ABSENT,
    )
    client = KubeClient.from_kubeconfig(str(kubeconfig))
    snapshots = RegistryClient(settings)
    stop = threading.Event()

    def functions() -> None:
        seen: Any = None
        while not stop.is_set():
            try:
                now = (
                    api.get(set_path(ns, SET))["metadata"]["resourceVersion"],
                    tuple(p["metadata"]["resourceVersion"] for p in api.list_items(pod_path(ns))),
                )
                if now != seen:  # an event: something about the set or its pods changed
                    seen = now
                    reconcile_set(
                        SetRef(ns, SET),
                        kube=client,
                        registry=snapshots,
                        settings=settings,
                        publisher=None,
                    )
            except Exception:
                seen = None
            stop.wait(TICK)

    def wait(what: str, check: Callable[[], float | None], timeout: float = 30.0) -> float:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            got = check()
            if got is not None:
                return got
            time.sleep(0.002)
        raise TimeoutError(f"{backend}/{way}: {what} not within {timeout:.0f}s")

    def pod_gone() -> float | None:
        pods = [
            p for p in api.list_items(pod_path(ns)) if not p["metadata"].get("deletionTimestamp")
        ]
        return time.monotonic() if not pods else None

    def phase() -> str:
        return str((api.get(set_path(ns, SET)).get("status") or {}).get("phase") or "")

    sim.register_nodes()
    sim.start()
    if operator:
        op.start()
    threads = [threading.Thread(target=functions, daemon=True)] if way != "operator" else []
    for t in threads:
        t.start()
    out: dict[str, list[float]] = {"seat": [], "wake": []}
    try:
        api.post(
            set_path(ns),
            {
                "apiVersion": k.API_VERSION,
                "kind": k.KIND,
                "metadata": {"name": SET, "namespace": ns},
                "spec": {"agent": {"image": "ghcr.io/acme/agent:1"}, "hibernatePolicy": "release"},
            },
        )
        wait("first boot", lambda: time.monotonic() if phase() == "Running" else None)
        for i in range(runs + 1):  # the first cycle warms every path, not counted
            marks.reset()
            api.merge_patch(set_path(ns, SET), {"spec": {"suspend": True}})
            gone = wait("seat freed", pod_gone)
            wait("settled Suspended", lambda: time.monotonic() if phase() == "Suspended" else None)
            hib = wait(
                "the hibernated report",
                lambda: min(marks.hibernated.values()) if marks.hibernated else None,
                timeout=5.0,
            )
            marks.reset()
            t0 = time.monotonic()
            api.merge_patch(set_path(ns, SET), {"spec": {"suspend": False}})
            up = wait(
                "restored VM up", lambda: min(marks.booted.values()) if marks.booted else None
            )
            wait(
                "woken",
                lambda: (
                    time.monotonic()
                    if phase() == "Running"
                    and not (api.get(set_path(ns, SET))["metadata"].get("annotations") or {}).get(
                        k.ANN_HIBERNATED_ON_NODE
                    )
                    else None
                ),
            )
            if i:
                out["seat"].append((gone - hib) * 1000.0)
                out["wake"].append((up - t0) * 1000.0)
    finally:
        stop.set()
        for t in threads:
            t.join(timeout=10)
        op.stop()
        sim.stop()
        snapshots.close()
    return out


def run(*, quick: bool = False) -> dict[str, Any]:
    from benchmarks.bench_release import real_available

    runs = 3 if quick else 15
    backends = ["embedded"] if quick else ["embedded", "real"]
    figures: dict[str, Any] = {}
    samples: dict[str, list[float]] = {}
    for backend in backends:
        if backend == "real" and not real_available():
            figures["operator_real"] = figure(0, "skipped", "real kube-apiserver not built here")
            continue
        suffix = "" if backend == "embedded" else "_real"
        where = "embedded API" if backend == "embedded" else "real kube-apiserver+etcd"
        p50: dict[tuple[str, str], float] = {}
        with rig(backend) as (kube, registry, kubeconfig):
            for way in WAYS:
                res = _measure(backend, way, runs, kube, registry, kubeconfig)
                for what, label in (
                    ("seat", "hibernated -> pod DELETE"),
                    ("wake", "suspend=false -> restored VM up"),
                ):
                    lat = res[what]
                    p50[(way, what)] = statistics.median(lat)
                    name = f"{what}_{way.replace('+', '_and_')}{suffix}"
                    samples[f"{name}_ms"] = lat
                    figures[f"{name}_p50"] = figure(
                        statistics.median(lat),
                        "ms",
                        f"{way}: {label}; {where}; {len(lat)} runs "
                        f"(p99 {percentile(lat, 99):.0f} ms); "
                        f"delivery a {TICK * 1000:.0f} ms poll for both controllers",
                    )
        for what in ("seat", "wake"):
            base = p50[("operator", what)]
            for way in WAYS[1:]:
                figures[f"{what}_{way.replace('+', '_and_')}_over_operator{suffix}"] = figure(
                    p50[(way, what)] / base,
                    "x",
                    f"p50 {p50[(way, what)]:.0f} ms vs the operator alone {base:.0f} ms, same run",
                )
    return {"figures": figures, "samples": samples}


if __name__ == "__main__":
    print(json.dumps(run(quick="--quick" in sys.argv)["figures"], indent=2))
