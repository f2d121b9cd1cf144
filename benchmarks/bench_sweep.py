"""Sweep cost against set count: wall time, API requests, peak RSS (docs/design.md#sweep-cost).

For each size N the embedded Kubernetes API runs in its own process, seeded
in-process (fast) with N CocoonSets of which a few percent need action:

* 2 % Running retain sets idle past their `idle-timeout` (suspends, capped at
  COCOON_SWEEP_MAX_SUSPENDS=50 per run: the rest are deferred);
* 1 % release sets stuck in `Suspending` without pods (the safety net settles them);
* 1 % `Suspended` release sets with a pod left (found by the label-selected pod list);
* 0.5 % `Waking` sets past the wake deadline (reconciled, then one `WakeTimedOut`);
* the rest need nothing: Running sets with and without an idle timeout but
  recent activity, and `Suspended` release sets without pods (the steady state).

The sweep itself runs in a third process (so neither the emulator's memory nor
the benchmark's counts in its peak RSS, read from /proc/self/status VmHWM)
against a real Distribution registry (the reconciles need one). API requests
come from the emulator's request log and are split into list pages (set
pages, label-selected pod lists) and requests that touch a set needing action;
anything else is `extra` (target 0).

    uv run python -m benchmarks.bench_sweep [--quick]
"""

from __future__ import annotations

import json
import math
import multiprocessing as mp
import re
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, unquote

import requests

from benchmarks._util import fig

PAGE = 500
NS_COUNT = 10  # sets spread over a few namespaces, listed cluster-wide
# The sweep's clock: a day after seeding, so creation times count as old and the
# "active" sets carry a last-activity just before it.
AHEAD = timedelta(days=1)
MAX_SUSPENDS = 50
RSS_TARGET_MB = 200.0


def _kind_of(i: int) -> str:
    """Deterministic mix: per 200 sets, 4 idle, 2 stuck, 2 suspended-with-pods, 1 waking."""
    r = i % 200
    if r < 4:
        return "idle"
    if r < 6:
        return "suspending"
    if r < 8:
        return "suspended-pods"
    if r < 9:
        return "waking"
    if r < 60:
        return "active"
    if r < 120:
        return "running"
    return "suspended"


ACTION_KINDS = frozenset({"idle", "suspending", "suspended-pods", "waking"})


def _set_name(i: int) -> str:
    return f"s{i:06d}"


def _ns_of(i: int) -> str:
    return f"bench-{i % NS_COUNT}"


def _manifests(i: int, sweep_now: datetime) -> tuple[dict[str, Any], dict[str, Any], bool]:
    """(set body, status, has_pod) of set i."""
    from shared import constants as k

    kind = _kind_of(i)
    ann: dict[str, str] = {}
    spec: dict[str, Any] = {"agent": {"image": "ghcr.io/cocoonstack/agent:1"}}
    status: dict[str, Any] = {"phase": "Running"}
    has_pod = False
    iso = "%Y-%m-%dT%H:%M:%SZ"
    if kind == "idle":
        ann[k.ANN_IDLE_TIMEOUT] = "30m"
        ann[k.ANN_LAST_ACTIVITY] = (sweep_now - timedelta(hours=2, minutes=i % 97)).strftime(iso)
        spec["hibernatePolicy"] = "retain"
    elif kind == "active":
        ann[k.ANN_IDLE_TIMEOUT] = "30m"
        ann[k.ANN_LAST_ACTIVITY] = (sweep_now - timedelta(minutes=5)).strftime(iso)
    elif kind == "suspending":
        spec.update(hibernatePolicy="release", suspend=True)
        status = {"phase": "Suspending"}
    elif kind == "suspended-pods":
        spec.update(hibernatePolicy="release", suspend=True)
        status = {"phase": "Suspended"}
        has_pod = True
    elif kind == "waking":
        spec.update(hibernatePolicy="release", suspend=False)
        status = {"phase": "Waking"}
        ann[k.ANN_HIBERNATED_ON_NODE] = "node-a"
        ann[k.ANN_WAKE_STARTED] = (sweep_now - timedelta(minutes=30)).strftime(iso)
        has_pod = True
    elif kind == "suspended":
        spec.update(hibernatePolicy="release", suspend=True)
        status = {"phase": "Suspended"}
    body = {
        "apiVersion": k.API_VERSION,
        "kind": k.KIND,
        "metadata": {"name": _set_name(i), "namespace": _ns_of(i), "annotations": ann},
        "spec": spec,
    }
    return body, status, has_pod


def _pod(i: int, cs: dict[str, Any], waking: bool) -> dict[str, Any]:
    from shared import constants as k

    name, ns = cs["metadata"]["name"], cs["metadata"]["namespace"]
    ann = {k.ANN_VM_NAME: f"vk-{ns}-{name}-0"}
    if waking:
        ann[k.ANN_RESTORE] = k.TRUE
    else:
        ann.update({k.ANN_HIBERNATE: k.TRUE, k.ANN_LIFECYCLE_STATE: "hibernating"})
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": f"{name}-0",
            "namespace": ns,
            "labels": {k.LABEL_SET_NAME: name, k.LABEL_ROLE: k.ROLE_MAIN, k.LABEL_SLOT: "0"},
            "annotations": ann,
            "ownerReferences": [
                {
                    "apiVersion": k.API_VERSION,
                    "kind": k.KIND,
                    "name": name,
                    "uid": cs["metadata"]["uid"],
                    "controller": True,
                    "blockOwnerDeletion": True,
                }
            ],
        },
        "spec": {"containers": [{"name": k.MAIN_CONTAINER, "image": k.PLACEHOLDER_IMAGE}]},
    }


# --- the emulator process ---------------------------------------------------------


def _emulator(n: int, sweep_now_iso: str, kubeconfig: str, conn: Connection) -> None:
    """Seed N sets straight into the store, serve over HTTP until told to stop."""
    from devstack.kubeapi import EmbeddedKube
    from shared import constants as k

    sweep_now = datetime.fromisoformat(sweep_now_iso)
    kube = EmbeddedKube()
    kube.start()
    api, reg = kube.api, kube.registry
    ns_rt = reg.lookup("", "v1", "namespaces")
    set_rt = reg.lookup(k.GROUP, k.VERSION, k.PLURAL)
    pod_rt = reg.lookup("", "v1", "pods")
    assert ns_rt and set_rt and pod_rt
    for j in range(NS_COUNT):
        api.create(ns_rt, "v1", None, {"metadata": {"name": f"bench-{j}"}})
    merge = "application/merge-patch+json"
    for i in range(n):
        body, status, has_pod = _manifests(i, sweep_now)
        ns = body["metadata"]["namespace"]
        created = api.create(set_rt, k.VERSION, ns, body).obj
        api.patch(
            set_rt,
            k.VERSION,
            ns,
            body["metadata"]["name"],
            json.dumps({"status": status}).encode(),
            merge,
            subresource="status",
        )
        if has_pod:
            api.create(pod_rt, "v1", ns, _pod(i, created, _kind_of(i) == "waking"))
    kube.write_kubeconfig(kubeconfig)
    kube.reset_requests()
    conn.send(kube.url)
    conn.recv()  # stop
    kube.stop()


# --- the sweep process ------------------------------------------------------------


def _proc_status_mb(field: str) -> float:
    """VmRSS / VmHWM of this process, in MB.

    VmHWM is this process image's own peak: unlike `ru_maxrss`, which Linux keeps
    across fork+exec (a spawned child would inherit the parent's peak), it
    starts afresh with the child's interpreter.
    """
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) / 1024.0
    raise RuntimeError(f"{field} not in /proc/self/status")


def _sweeper(
    url: str, kubeconfig: str, registry_host: str, sweep_now_iso: str, conn: Connection
) -> None:
    from functions.sweep import run_sweep
    from shared import log
    from shared.clients.kube import KubeClient
    from shared.config import LogFormat, OperatorMode, Settings, parse_registry_base
    from shared.names import SetRef

    log.configure(LogFormat.JSON, stream=open("/dev/null", "w"))  # noqa: SIM115 - lives as long as the process
    settings = Settings(
        kubeconfig=kubeconfig,
        registry_base=parse_registry_base(f"{registry_host}/bench"),
        registry_insecure=True,
        sweep_max_suspends=MAX_SUSPENDS,
        wake_deadline=timedelta(minutes=10),
        operator=OperatorMode.ABSENT,  # no operator here: the functions alone
    )
    kube = KubeClient.from_kubeconfig(kubeconfig)
    kube.get_set(SetRef("default", "warm-up"))  # load the kubernetes package before measuring
    requests.delete(f"{url}/_emulator/requests", timeout=10)  # count the sweep's requests only
    before_mb = _proc_status_mb("VmRSS")
    started = time.perf_counter()
    summary = run_sweep(
        settings=settings,
        dry_run=False,
        kube=kube,
        now=datetime.fromisoformat(sweep_now_iso),
    )
    wall = time.perf_counter() - started
    peak_mb = _proc_status_mb("VmHWM")
    conn.send(
        {
            "wall_s": wall,
            "peak_rss_mb": peak_mb,
            "rss_before_mb": before_mb,
            "counts": summary.counts(),
            "set_pages": summary.set_pages,
            "pod_lists": summary.pod_lists,
            "deferred": summary.deferred,
            "errors": summary.errors,
            "client_requests": kube.requests,
        }
    )


# --- request accounting -----------------------------------------------------------

_SET_PATH = re.compile(r"/namespaces/([^/]+)/cocoonsets/([^/]+)")
_POD_PATH = re.compile(r"/namespaces/([^/]+)/pods/([^/]+)")


def classify(entry: dict[str, Any], action_sets: set[tuple[str, str]]) -> str:
    """`list` (a set page or a label-selected pod list), `action` or `extra`."""
    path = entry["path"]
    query = parse_qs(entry.get("query") or "")
    selector = unquote((query.get("labelSelector") or [""])[0])
    if m := _SET_PATH.search(path):
        return "action" if (m.group(1), m.group(2)) in action_sets else "extra"
    if entry["method"] == "GET" and path.endswith("/cocoonsets"):
        return "list"
    if path.endswith("/pods") and entry["method"] == "GET":
        if " in (" in selector:
            return "list"
        ns = path.split("/namespaces/")[1].split("/")[0] if "/namespaces/" in path else ""
        name = selector.partition("=")[2]
        return "action" if (ns, name) in action_sets else "extra"
    if m := _POD_PATH.search(path):
        set_name = m.group(2).rsplit("-", 1)[0]
        return "action" if (m.group(1), set_name) in action_sets else "extra"
    if path.endswith("/events") and entry["method"] == "POST":
        return "action"  # an event reports an action (its body names the set)
    return "extra"


def _recv(conn: Connection, proc: Any, *, timeout: float) -> Any:
    """The child's answer; an error (not a hang) when the child died first."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if conn.poll(0.2):
            return conn.recv()
        if not proc.is_alive():
            raise RuntimeError(f"{proc.name} exited with {proc.exitcode} before answering")
    raise TimeoutError(f"{proc.name} did not answer in {timeout:.0f}s")


def measure(n: int, registry_host: str) -> dict[str, Any]:
    ctx = mp.get_context("spawn")
    sweep_now = datetime.now(UTC) + AHEAD
    with tempfile.TemporaryDirectory() as tmp:
        kubeconfig = str(Path(tmp) / "kubeconfig")
        parent, child = ctx.Pipe()
        emu = ctx.Process(
            target=_emulator, args=(n, sweep_now.isoformat(), kubeconfig, child), daemon=True
        )
        seed_started = time.perf_counter()
        emu.start()
        try:
            # Seeding runs at a few thousand sets a second: allow for 100,000 on a busy machine.
            url = _recv(parent, emu, timeout=max(600.0, n / 50))
            seed_s = time.perf_counter() - seed_started
            s_parent, s_child = ctx.Pipe()
            proc = ctx.Process(
                target=_sweeper,
                args=(url, kubeconfig, registry_host, sweep_now.isoformat(), s_child),
            )
            proc.start()
            result: dict[str, Any] = _recv(s_parent, proc, timeout=600)
            proc.join(timeout=60)
            log = requests.get(f"{url}/_emulator/requests", timeout=30).json()
        finally:
            if emu.is_alive():
                parent.send("stop")
                emu.join(timeout=30)
    action_sets = {(_ns_of(i), _set_name(i)) for i in range(n) if _kind_of(i) in ACTION_KINDS}
    # Only idle sets within the cap act; the deferred ones must cost nothing.
    entries = [e for e in log if not e["path"].startswith("/_")]
    split = {"list": 0, "action": 0, "extra": 0}
    for e in entries:
        split[classify(e, action_sets)] += 1
    result.update(
        requests=len(entries),
        list_requests=split["list"],
        action_requests=split["action"],
        extra_requests=split["extra"],
        set_pages_min=math.ceil(n / PAGE),
        seed_s=seed_s,
        methods=sorted({e["method"] for e in entries}),
    )
    return result


def run(*, quick: bool) -> dict[str, Any]:
    from devstack.registry import DistributionServer, find_registry_binary

    if find_registry_binary() is None:
        raise RuntimeError("docker-registry is not installed (make sysdeps)")
    # 100,000 only in the full run: seeding it takes minutes, the quick run proves the harness.
    sizes = [200, 1_000] if quick else [1_000, 10_000, 100_000]
    figures: dict[str, Any] = {}
    series: dict[str, list[float]] = {"sets": [], "seconds": [], "requests": []}
    with DistributionServer() as reg:
        for n in sizes:
            r = measure(n, reg.host)
            print(f"sweep N={n}: {json.dumps(r)}", file=sys.stderr, flush=True)
            target = r["set_pages"] + r["pod_lists"] + r["action_requests"]
            acted = sum(v for key, v in r["counts"].items() if key not in ("conflict", "error"))
            figures[f"wall_{n}"] = fig(
                r["wall_s"],
                "s",
                f"one sweep over {n} sets ({acted} actions), embedded API; the sets are "
                f"seeded straight into the emulator's store (not over HTTP), only the sweep "
                f"goes through HTTP (seeding took {r['seed_s']:.0f} s)",
            )
            figures[f"requests_{n}"] = fig(
                r["requests"],
                "requests",
                f"target {target} = {r['set_pages']} set pages + {r['pod_lists']} pod lists "
                f"+ {r['action_requests']} on sets needing action; extra {r['extra_requests']}",
            )
            figures[f"requests_target_{n}"] = fig(
                target, "requests", "list pages + actions, nothing else"
            )
            figures[f"extra_requests_{n}"] = fig(
                r["extra_requests"], "requests", "requests on sets needing nothing (target 0)"
            )
            figures[f"peak_rss_{n}"] = fig(
                r["peak_rss_mb"],
                "MB",
                f"sweep process peak RSS (after imports {r['rss_before_mb']:.0f} MB); "
                f"target <= {RSS_TARGET_MB:.0f} MB at 10,000 and 100,000",
            )
            series["sets"].append(n)
            series["seconds"].append(r["wall_s"])
            series["requests"].append(r["requests"])
    return {"figures": figures, "samples": {}, "series": series}


if __name__ == "__main__":
    out = run(quick="--quick" in sys.argv)
    for name, value in out["figures"].items():
        print(f"{name:>24}: {value['value']:>10.3f} {value['unit']:<9} {value['note']}")
