"""Each read the release and the wake make, timed on both backends (docs/reads.md).

Every read is timed right after a write to a CocoonSet (a resource other than pods), as
in a release or a wake: the write moves etcd's revision past anything the pods' watch
cache has heard of, which is what a consistent LIST then waits for on a real
kube-apiserver (a progress notification, requested every 100 ms while a read waits).
Each sample is its own write + read, so no read warms the cache for the next one.

- `GET set` (quorum read of etcd): every reconcile's first read;
- `LIST pods, consistent`: the pods read as it was before docs/reads.md (the baseline);
- `LIST pods, NotOlderThan the set`: the pods read of the release and the wake now;
- `GET pod`: the ghost-main re-read and a lost create's read;
- `LIST line, from cache`: the pool's line of waiting wakes (`resourceVersion=0`,
  cluster-wide, field selector `spec.nodeName=`).

Beside them, three requests are timed twice, through `shared.clients.kube` and as bare
HTTP (`http.client`, one kept-alive connection, the same token): the bare figure is
what the server takes (plus loopback), the difference is the client's own cost, which
is the same on both backends. That split says where a release's real/embedded ratio
comes from (docs/reads.md).

Run: `uv run python -m benchmarks.bench_reads` (`--quick` for 20 samples per read).
"""

from __future__ import annotations

import json
import statistics
import sys
import time
from collections.abc import Callable
from typing import Any

from benchmarks._util import fig as figure
from benchmarks._util import percentile
from benchmarks.bench_release import NS, quiet_logs, real_available, stack
from shared import constants as k
from shared.names import SetRef

# (figure key, what the note says)
READS: tuple[tuple[str, str], ...] = (
    ("get_set", "GET set by name (a quorum read of etcd): every reconcile's first read"),
    (
        "list_pods_consistent",
        "LIST a set's pods by label, resourceVersion unset (a consistent read: the pods read "
        "before docs/reads.md, the baseline)",
    ),
    (
        "list_pods_not_older_than_set",
        "LIST a set's pods by label, resourceVersion=<the set's>&resourceVersionMatch="
        "NotOlderThan (the release's and the wake's pods read)",
    ),
    ("get_pod", "GET the main pod by name (ghost-main re-read; a lost create's read)"),
    (
        "list_line_from_cache",
        "LIST the pool's line of unbound restore pods, all namespaces, resourceVersion=0 "
        "(the fair order's read)",
    ),
)

WRITE = "patch_set"

# (figure key, what the note says): each timed bare and through the client.
SPLIT: tuple[tuple[str, str], ...] = (
    ("get_set", "GET a CocoonSet by name"),
    ("patch_set", "merge PATCH of a CocoonSet's annotations"),
    ("patch_pod", "merge PATCH of a pod's annotations (as the keep-snapshot flag)"),
)


def run(*, quick: bool) -> dict[str, Any]:
    """Both backends in one run (real figures suffixed `_real`), plus real/embedded ratios."""
    figures: dict[str, Any] = {}
    samples: dict[str, list[float]] = {}
    p50: dict[str, dict[str, float]] = {}
    for backend in ("embedded", "real"):
        if backend == "real" and not real_available():
            figures["reads_real"] = figure(
                0, "skipped", "real kube-apiserver not built here (`make controlplane`)"
            )
            continue
        timed = _run_backend(backend, runs=20 if quick else 100)
        suffix = "" if backend == "embedded" else "_real"
        p50[backend] = {}
        for key, note in READS:
            xs = timed[key]
            samples[f"read_{key}_ms{suffix}"] = xs
            p50[backend][key] = statistics.median(xs)
            figures[f"read_{key}_p50{suffix}"] = figure(
                statistics.median(xs),
                "ms",
                f"{note}; right after a write to a CocoonSet; {len(xs)} samples, {backend} "
                "Kubernetes API on 127.0.0.1, through shared.clients.kube",
            )
            figures[f"read_{key}_p99{suffix}"] = figure(
                percentile(xs, 99), "ms", f"as above, p99 over {len(xs)} samples"
            )
        w = timed[WRITE]
        samples[f"write_patch_set_ms{suffix}"] = w
        p50[backend][WRITE] = statistics.median(w)
        figures[f"write_patch_set_p50{suffix}"] = figure(
            statistics.median(w),
            "ms",
            "for comparison, the write before each read: a merge PATCH of a CocoonSet's "
            f"annotations (the official client); {len(w)} samples, {backend} Kubernetes API",
        )
        for key, note in SPLIT:
            for how in ("bare", "client"):
                xs = timed[f"split: {key} {how}"]
                name = f"{how}_{key}"
                samples[f"{name}_ms{suffix}"] = xs
                p50[backend][name] = statistics.median(xs)
                figures[f"{name}_p50{suffix}"] = figure(
                    statistics.median(xs),
                    "ms",
                    f"{note}, "
                    + (
                        "bare HTTP (http.client, kept-alive): the server's own time"
                        if how == "bare"
                        else "through shared.clients.kube (the official client + parsing)"
                    )
                    + f"; {len(xs)} samples, {backend}",
                )
        for key in sorted(k_ for k_ in timed if k_.startswith("release: ")):
            xs = timed[key]
            name = "release_request_" + key.removeprefix("release: ").replace(" ", "_").replace(
                "/", "_"
            )
            samples[f"{name}_ms{suffix}"] = xs
            p50[backend][name] = statistics.median(xs)
            figures[f"{name}_p50{suffix}"] = figure(
                statistics.median(xs),
                "ms",
                f"{key.removeprefix('release: ')} inside complete releases (reconcile_set of a "
                f"main-only set, as bench_release counts them); {len(xs)} requests, {backend}",
            )
    if "embedded" in p50 and "real" in p50:
        for name in sorted(k_ for k_ in p50["real"] if k_.startswith("release_request_")):
            if name in p50["embedded"]:
                figures[f"{name}_real_over_embedded"] = figure(
                    p50["real"][name] / p50["embedded"][name],
                    "x",
                    f"p50 {p50['real'][name]:.2f} ms real vs {p50['embedded'][name]:.2f} ms "
                    "embedded, same run",
                )
        for key, _ in SPLIT:
            for how in ("bare", "client"):
                name = f"{how}_{key}"
                figures[f"{name}_real_over_embedded"] = figure(
                    p50["real"][name] / p50["embedded"][name],
                    "x",
                    f"p50 {p50['real'][name]:.2f} ms real vs {p50['embedded'][name]:.2f} ms "
                    "embedded, same run",
                )
            client_cost = {
                b: p50[b][f"client_{key}"] - p50[b][f"bare_{key}"] for b in ("embedded", "real")
            }
            figures[f"client_cost_{key}_real"] = figure(
                client_cost["real"],
                "ms",
                f"client p50 minus bare p50, {key}, real (embedded: "
                f"{client_cost['embedded']:.2f} ms): the client's own cost per request",
            )
        for key in (*(key for key, _ in READS), WRITE):
            name = "write_patch_set" if key == WRITE else f"read_{key}"
            figures[f"{name}_real_over_embedded"] = figure(
                p50["real"][key] / p50["embedded"][key],
                "x",
                f"p50 {p50['real'][key]:.2f} ms real vs {p50['embedded'][key]:.2f} ms embedded, "
                "same run",
            )
    return {"figures": figures, "samples": samples}


def _run_backend(backend: str, *, runs: int) -> dict[str, list[float]]:
    from shared.constants import LABEL_SEAT_LINE
    from shared.seats.line.executor import UNBOUND

    with stack(backend) as st, quiet_logs():
        cs = st.create_set("read", suspend=True, phase="Suspended", annotations={})
        st.hibernated_main(cs)
        st.create_set("written", suspend=True, phase="Suspended", annotations={})
        ref = SetRef(NS, "read")
        client = st.client
        set_rv = str(client.get_set(ref).metadata.resource_version)  # type: ignore[union-attr]
        reads: dict[str, Callable[[], Any]] = {
            "get_set": lambda: client.get_set(ref),
            "list_pods_consistent": lambda: client.list_pods(ref),
            "list_pods_not_older_than_set": lambda: client.list_pods(ref, not_older_than=set_rv),
            "get_pod": lambda: client.get_pod(NS, "read-0"),
            "list_line_from_cache": lambda: [
                page
                for page in client.list_pods_matching(
                    None,
                    f"{LABEL_SEAT_LINE}={k.DEFAULT_POOL}",
                    field_selector=UNBOUND,
                    from_cache=True,
                )
            ],
        }
        assert len(client.list_pods(ref, not_older_than=set_rv)) == 1
        timed: dict[str, list[float]] = {key: [] for key, _ in READS}
        writes: list[float] = []
        timed[WRITE] = writes
        n = 0
        for i in range(runs + 1):
            # Interleaved: each read meets the same machine and server state in turn.
            for key, _ in READS:
                n += 1
                w0 = time.perf_counter()
                st.custom.patch_namespaced_custom_object(
                    k.GROUP,
                    k.VERSION,
                    NS,
                    k.PLURAL,
                    "written",
                    {"metadata": {"annotations": {"bench/n": str(n)}}},
                    _content_type="application/merge-patch+json",
                )
                t0 = time.perf_counter()
                reads[key]()
                elapsed = (time.perf_counter() - t0) * 1000.0
                if i > 0:  # the first round warms the connections
                    timed[key].append(elapsed)
                    writes.append((t0 - w0) * 1000.0)
        timed.update(_split(st, runs=runs))
        timed.update(_release_requests(st, runs=max(10, runs // 3)))
        return timed


def _bare(kubeconfig: Any) -> tuple[Any, dict[str, str]]:
    """One kept-alive `http.client` connection to the kubeconfig's server, and its headers."""
    import base64
    import http.client
    import ssl
    from pathlib import Path
    from urllib.parse import urlsplit

    import yaml

    conf = yaml.safe_load(Path(kubeconfig).read_text(encoding="utf-8"))
    cluster = conf["clusters"][0]["cluster"]
    token = conf["users"][0]["user"]["token"]
    url = urlsplit(cluster["server"])
    conn: Any
    if url.scheme == "https":
        ca = base64.b64decode(cluster["certificate-authority-data"]).decode()
        ctx = ssl.create_default_context(cadata=ca)
        conn = http.client.HTTPSConnection(url.hostname or "", url.port, context=ctx)
    else:
        conn = http.client.HTTPConnection(url.hostname or "", url.port)
    return conn, {"Authorization": f"Bearer {token}", "Accept": "application/json"}


def _split(st: Any, *, runs: int) -> dict[str, list[float]]:
    """SPLIT's requests, bare and through the client, interleaved."""
    conn, headers = _bare(st.kubeconfig)
    patch_headers = {**headers, "Content-Type": "application/merge-patch+json"}
    set_path = f"/apis/{k.GROUP}/{k.VERSION}/namespaces/{NS}/{k.PLURAL}/written"
    pod_path = f"/api/v1/namespaces/{NS}/pods/read-0"
    client = st.client
    ref = SetRef(NS, "written")

    def bare(method: str, path: str, body: dict[str, Any] | None = None) -> None:
        data = json.dumps(body) if body is not None else None
        conn.request(method, path, data, patch_headers if body is not None else headers)
        resp = conn.getresponse()
        resp.read()
        assert resp.status == 200, (method, path, resp.status)

    def ann(i: int, how: str) -> dict[str, Any]:
        return {"metadata": {"annotations": {f"bench/{how}": str(i)}}}

    steps: dict[str, Callable[[int], Any]] = {
        "get_set bare": lambda i: bare("GET", set_path),
        "get_set client": lambda i: client.get_set(ref),
        "patch_set bare": lambda i: bare("PATCH", set_path, ann(i, "bare")),
        "patch_set client": lambda i: client.patch_set(ref, ann(i, "client")),
        "patch_pod bare": lambda i: bare("PATCH", pod_path, ann(i, "bare")),
        "patch_pod client": lambda i: client.patch_pod(NS, "read-0", ann(i, "client")),
    }
    out: dict[str, list[float]] = {f"split: {key}": [] for key in steps}
    try:
        for i in range(runs + 1):
            for key, fn in steps.items():
                t0 = time.perf_counter()
                fn(i)
                elapsed = (time.perf_counter() - t0) * 1000.0
                if i > 0:  # the first round opens the connections
                    out[f"split: {key}"].append(elapsed)
    finally:
        conn.close()
    return out


def _kind(what: str) -> str:
    """`PATCH cocoonset bench/r0/status` -> `PATCH cocoonset/status` (one figure per kind)."""
    verb, noun = what.split(" ")[:2]
    return f"{verb} {noun}" + ("/status" if what.endswith("/status") else "")


def _release_requests(st: Any, *, runs: int) -> dict[str, list[float]]:
    """Every request of `runs` complete releases (reconcile_set), timed by kind: where the
    release's time goes on each backend, reads and writes alike. Bench-only
    instrumentation: the client's single send path is wrapped for the measurement."""
    from shared.names import vm_name
    from shared.reconcile import reconcile_set

    names = [f"rel{i}" for i in range(runs + 1)]
    for name in names:
        cs = st.create_set(name, suspend=True, phase="Suspending", annotations={})
        st.hibernated_main(cs)
        st.push(vm_name(NS, name, 0))
    out: dict[str, list[float]] = {}
    client = st.client
    send = client._call
    record = False

    def timed_call(what: str, fn: Any, *args: Any, **kw: Any) -> Any:
        t0 = time.perf_counter()
        try:
            return send(what, fn, *args, **kw)
        finally:
            if record:
                out.setdefault(f"release: {_kind(what)}", []).append(
                    (time.perf_counter() - t0) * 1000.0
                )

    client._call = timed_call
    try:
        for i, name in enumerate(names):
            record = i > 0  # the first warms the registry client
            done = reconcile_set(
                SetRef(NS, name), kube=client, registry=st.snapshots, settings=st.settings
            )
            assert done.deleted_pods == 1, done
    finally:
        del client._call
    return out


def main() -> None:
    result = run(quick="--quick" in sys.argv)
    print(json.dumps(result["figures"], indent=2))


if __name__ == "__main__":
    main()
