"""Throughput and latency of the embedded Kubernetes API through the official client.

Seeds N pods (10,000; 500 with quick=True) in one namespace, then measures
single-object GETs, strategic-merge PATCHes and full paged LISTs (limit 500).
LIST is measured twice: as callers see it (the client deserialises every pod
into models) and with `_preload_content=False` (raw bytes: the server's share).
Run: `uv run python -m benchmarks.bench_kubeapi [--quick]`.
"""

from __future__ import annotations

import random
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from benchmarks._util import fig, percentile


def _timed(fn: Callable[[], Any], n: int) -> tuple[list[float], float]:
    """(per-call latencies in ms, wall seconds) for n sequential calls."""
    lat: list[float] = []
    start = time.perf_counter()
    for _ in range(n):
        t0 = time.perf_counter()
        fn()
        lat.append((time.perf_counter() - t0) * 1000.0)
    return lat, time.perf_counter() - start


def _server_share(
    kube: Any, label: str, figures: dict[str, Any], samples: dict[str, list[float]]
) -> None:
    """Server-side time of the requests since the last log reset (the request log's duration_ms)."""
    server = [float(r["duration_ms"]) for r in kube.requests()]
    samples[f"{label}_server_ms"] = server
    for q, name in ((50, "p50"), (99, "p99")):
        figures[f"{label}_server_{name}"] = fig(
            percentile(server, q),
            "ms",
            f"{label.upper()} time inside the server (request log), {name}",
        )


def _pod(name: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": {"app": "bench", "shard": name[-1]}},
        "spec": {
            "containers": [{"name": "main", "image": "registry.local/agent:1"}],
            "nodeName": "node-1",
        },
    }


def run(*, quick: bool) -> dict[str, Any]:
    from kubernetes import client, config

    from devstack.kubeapi import EmbeddedKube

    n_pods = 500 if quick else 10_000
    n_get = 200 if quick else 2_000
    n_patch = 100 if quick else 1_000
    n_list = 2 if quick else 5
    rng = random.Random(7)
    figures: dict[str, dict[str, Any]] = {}
    samples: dict[str, list[float]] = {}
    with EmbeddedKube() as kube, tempfile.TemporaryDirectory() as tmp:
        path = kube.write_kubeconfig(Path(tmp) / "kubeconfig")
        configuration = client.Configuration()
        config.load_kube_config(config_file=str(path), client_configuration=configuration)
        api = client.ApiClient(configuration)
        core = client.CoreV1Api(api)
        names = [f"pod-{i:05d}" for i in range(n_pods)]

        it = iter(names)
        create_lat, create_wall = _timed(
            lambda: core.create_namespaced_pod("default", _pod(next(it))), n_pods
        )
        samples["create_ms"] = create_lat
        figures["create_rps"] = {
            "value": n_pods / create_wall,
            "unit": "req/s",
            "note": f"sequential POST of {n_pods} pods",
        }

        kube.reset_requests()
        get_lat, get_wall = _timed(
            lambda: core.read_namespaced_pod(rng.choice(names), "default"), n_get
        )
        samples["get_ms"] = get_lat
        figures["get_rps"] = {
            "value": n_get / get_wall,
            "unit": "req/s",
            "note": f"sequential GET, {n_pods} pods stored",
        }
        figures["get_p50"] = {
            "value": percentile(get_lat, 50),
            "unit": "ms",
            "note": "GET latency p50",
        }
        figures["get_p99"] = {
            "value": percentile(get_lat, 99),
            "unit": "ms",
            "note": "GET latency p99",
        }
        _server_share(kube, "get", figures, samples)
        kube.reset_requests()

        counter = iter(range(n_patch))
        patch_lat, patch_wall = _timed(
            lambda: core.patch_namespaced_pod(
                rng.choice(names),
                "default",
                {"metadata": {"labels": {"round": str(next(counter))}}},
            ),
            n_patch,
        )
        samples["patch_ms"] = patch_lat
        figures["patch_rps"] = {
            "value": n_patch / patch_wall,
            "unit": "req/s",
            "note": "sequential strategic-merge PATCH of labels",
        }
        figures["patch_p50"] = {
            "value": percentile(patch_lat, 50),
            "unit": "ms",
            "note": "PATCH latency p50",
        }
        figures["patch_p99"] = {
            "value": percentile(patch_lat, 99),
            "unit": "ms",
            "note": "PATCH latency p99",
        }
        _server_share(kube, "patch", figures, samples)

        def full_list(raw: bool) -> tuple[int, list[float]]:
            token: str | None = None
            total = 0
            pages: list[float] = []
            while True:
                t0 = time.perf_counter()
                kwargs: dict[str, Any] = {"limit": 500}
                if token:
                    kwargs["_continue"] = token
                if raw:
                    import json

                    resp = core.list_namespaced_pod("default", _preload_content=False, **kwargs)
                    body = json.loads(resp.data)
                    total += len(body["items"])
                    token = body["metadata"].get("continue")
                else:
                    page = core.list_namespaced_pod("default", **kwargs)
                    total += len(page.items)
                    token = page.metadata._continue
                pages.append((time.perf_counter() - t0) * 1000.0)
                if not token:
                    return total, pages

        kube.reset_requests()
        for raw, label in ((False, "list"), (True, "list_raw")):
            lists: list[float] = []
            page_lat: list[float] = []
            for _ in range(n_list):
                t0 = time.perf_counter()
                total, pages = full_list(raw)
                lists.append((time.perf_counter() - t0) * 1000.0)
                page_lat += pages
                assert total == n_pods, (total, n_pods)
            samples[f"{label}_full_ms"] = lists
            samples[f"{label}_page_ms"] = page_lat
            how = "client-deserialised models" if not raw else "raw JSON (_preload_content=False)"
            figures[f"{label}_full_p50"] = {
                "value": statistics.median(lists),
                "unit": "ms",
                "note": f"full paged LIST of {n_pods} pods, limit 500, {how}",
            }
            figures[f"{label}_pods_per_s"] = {
                "value": n_pods / (statistics.median(lists) / 1000.0),
                "unit": "pods/s",
                "note": f"LIST throughput, {how}",
            }
            figures[f"{label}_page_p50"] = {
                "value": percentile(page_lat, 50),
                "unit": "ms",
                "note": f"one 500-pod page, {how}, p50",
            }
            figures[f"{label}_page_p99"] = {
                "value": percentile(page_lat, 99),
                "unit": "ms",
                "note": f"one 500-pod page, {how}, p99",
            }
        _server_share(kube, "list_page", figures, samples)
        api.close()
    return {"figures": figures, "samples": samples}


def main(argv: list[str] | None = None) -> None:
    args = sys.argv[1:] if argv is None else argv
    result = run(quick="--quick" in args)
    width = max(len(k) for k in result["figures"])
    for name, figure in result["figures"].items():
        print(f"{name:<{width}}  {figure['value']:>12.2f} {figure['unit']:<7} {figure['note']}")


if __name__ == "__main__":
    main()
