"""Seat freed after the snapshot lands: vk-cocoon's push -> the pod DELETE at the API.

The figure a user feels after a release. The clock starts when the push of
`<vm>:hibernate` completes at a real Distribution registry (`push_image`
returned: the manifest PUT answered 201) and stops when the main pod's DELETE
reaches the Kubernetes API, seen by a pod watch (the watch's own delivery adds
about a millisecond on 127.0.0.1). In between, nothing is short-circuited:

    Distribution notification (its own queue, after the blob events of the same push)
      -> `ingest` (functions-framework process, POST /registry, bearer token)
      -> the release reconcile (fresh GET, gate LIST, stash PATCH, HEAD <vm>:hibernate)
      -> DELETE pod

The registry's notification endpoint uses the deployed timeout (5 s, as in
infra/registry-config). Each run is a fresh release set `Suspending` with a
hibernated main pod, as the operator and vk-cocoon leave it. The first run
warms `ingest` (its first relevant event loads the Kubernetes client) and is
not counted. Both backends side by side in one run: the embedded API, then a
real kube-apiserver when its binaries are built (`make controlplane`).

No comparison with cocoon-operator here: it does not poll, it reconciles on the
pod's annotation change (its 5 s requeue is a fallback). The functions beside
it and alone, side by side with it, are `bench_operator.py`.

Run: `uv run python -m benchmarks.bench_seatfreed` (`--quick`: 5 runs, embedded only).
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import statistics
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from benchmarks._util import fig as figure
from benchmarks._util import free_port, percentile
from shared import constants as k
from shared.names import vm_name

NS = "bench"
NOTIFY_TIMEOUT = "5s"  # infra/registry-config/config.yml
RUN_TIMEOUT_S = 30.0


@dataclass
class DeleteWatch:
    """A pod watch in a thread: when each pod's DELETE became visible (perf_counter)."""

    core: Any
    seen: dict[str, float] = field(default_factory=dict)
    cond: threading.Condition = field(default_factory=threading.Condition)
    stop_flag: threading.Event = field(default_factory=threading.Event)
    error: BaseException | None = None
    thread: threading.Thread | None = None

    def start(self) -> None:
        # Start from the current list's resourceVersion, so nothing after it is missed.
        rv = self.core.list_namespaced_pod(NS).metadata.resource_version
        self.thread = threading.Thread(target=self._loop, args=(rv,), daemon=True)
        self.thread.start()

    def _loop(self, rv: str) -> None:
        from kubernetes import watch

        try:
            while not self.stop_flag.is_set():
                w = watch.Watch()
                # Short server-side timeouts keep the thread stoppable; each new
                # stream resumes from the last resourceVersion seen.
                for ev in w.stream(
                    self.core.list_namespaced_pod,
                    NS,
                    resource_version=rv,
                    timeout_seconds=5,
                    deserialize=False,  # the raw dict is enough; no model building per event
                ):
                    now = time.perf_counter()
                    obj = ev["object"]  # a plain dict (deserialize=False)
                    meta = obj.get("metadata") or {}
                    rv = meta.get("resourceVersion") or rv
                    if ev["type"] == "DELETED" or meta.get("deletionTimestamp"):
                        with self.cond:
                            self.seen.setdefault(meta["name"], now)
                            self.cond.notify_all()
                    if self.stop_flag.is_set():
                        w.stop()
        except BaseException as err:  # reported by wait(), not lost in a thread
            if not self.stop_flag.is_set():
                self.error = err
                with self.cond:
                    self.cond.notify_all()

    def wait(self, pod: str, timeout: float) -> float:
        with self.cond:
            ok = self.cond.wait_for(lambda: pod in self.seen or self.error is not None, timeout)
        if self.error is not None:
            raise RuntimeError(f"the pod watch failed: {self.error!r}") from self.error
        if not ok:
            raise TimeoutError(f"pod {pod} was not deleted within {timeout:.0f}s of the push")
        return self.seen[pod]

    def stop(self) -> None:
        self.stop_flag.set()
        if self.thread is not None:
            self.thread.join(timeout=10)


@contextlib.contextmanager
def rig(backend: str) -> Iterator[tuple[Any, Any, str, Path]]:
    """(bench_release Stack helpers, registry, prefix, ingest log) with `ingest` live."""
    from kubernetes import client, config

    from benchmarks.bench_release import Stack
    from devstack.kubeapi import EmbeddedKube
    from devstack.processes import ManagedProcess
    from devstack.realkube import RealKube
    from devstack.registry import DistributionServer
    from functions.serve import default_source
    from shared.clients.kube import KubeClient
    from shared.clients.registry import RegistryClient
    from shared.config import OperatorMode, Settings, parse_registry_base

    token = secrets.token_urlsafe(24)
    port = free_port()
    server: Any = RealKube() if backend == "real" else EmbeddedKube()
    with (
        tempfile.TemporaryDirectory() as tmp,
        server as kube,
        DistributionServer(
            notify_url=f"http://127.0.0.1:{port}/registry",
            notify_token=token,
            notify_timeout=NOTIFY_TIMEOUT,
        ) as registry,
    ):
        kubeconfig = Path(kube.write_kubeconfig(Path(tmp) / "kubeconfig"))
        prefix = f"b{uuid.uuid4().hex[:8]}"
        settings = Settings(
            kubeconfig=str(kubeconfig),
            registry_base=parse_registry_base(f"{registry.host}/{prefix}"),
            registry_insecure=True,
            operator=OperatorMode.ABSENT,  # no operator here: the functions alone
        )
        conf = client.Configuration()
        config.load_kube_config(config_file=str(kubeconfig), client_configuration=conf)
        api = client.ApiClient(conf)
        core = client.CoreV1Api(api)
        if backend == "real":
            kube.ensure_namespace(NS)
        else:
            core.create_namespace({"metadata": {"name": NS}})
        log_path = Path(tmp) / "ingest.log"
        ingest = ManagedProcess(
            "ingest",
            [
                sys.executable,
                "-m",
                "functions_framework",
                "--source",
                str(default_source()),
                "--target",
                "ingest",
                "--host",
                "127.0.0.1",
                "--port",
                str(port),
            ],
            log_path=log_path,
            env={
                **os.environ,
                "KUBECONFIG": str(kubeconfig),
                "COCOON_REGISTRY_BASE": f"{registry.host}/{prefix}",
                "COCOON_REGISTRY_INSECURE": "true",
                "COCOON_INGEST_TOKEN": token,
                "COCOON_LOG_FORMAT": "json",
                "COCOON_OPERATOR": "absent",
            },
            cwd=Path(tmp),
        )
        snapshots = RegistryClient(settings)
        ingest.start()
        try:
            ingest.wait_http(f"http://127.0.0.1:{port}/", timeout=60)
            st = Stack(
                kube=kube,
                registry=registry,
                kubeconfig=kubeconfig,
                prefix=prefix,
                settings=settings,
                client=KubeClient.from_kubeconfig(str(kubeconfig)),
                snapshots=snapshots,
                custom=client.CustomObjectsApi(api),
                core=core,
            )
            yield st, registry, prefix, log_path
        finally:
            ingest.stop()
            snapshots.close()
            api.close()


class IngestLog:
    """The outcome `ingest` logged per VM (its JSON lines), read incrementally."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.offset = 0
        self.outcome: dict[str, str] = {}

    def poll(self) -> None:
        with self.path.open("rb") as fh:
            fh.seek(self.offset)
            chunk = fh.read()
        end = chunk.rfind(b"\n") + 1  # a line still being written waits for the next poll
        self.offset += end
        for line in chunk[:end].splitlines():
            with contextlib.suppress(ValueError):
                rec = json.loads(line)
                if rec.get("message") == "trigger handled" and rec.get("vm"):
                    outs = rec.get("outcome") or []
                    self.outcome[rec["vm"]] = "; ".join(
                        f"{o.get('result', '')}: {o.get('reason', '')}" for o in outs
                    )

    def tail(self) -> str:
        return "\n".join(self.path.read_text(errors="replace").splitlines()[-15:])


def _measure(backend: str, runs: int) -> tuple[list[float], list[str]]:
    """Latencies of `runs` runs whose DELETE came, and the VMs whose release waited instead.

    Pushes continue until `runs` releases were measured (at most 3x as many pushes):
    a push whose notification beat its tag is counted apart, not retried.
    """
    from kubernetes import client, config

    from devstack.registry import wait_until

    latencies: list[float] = []
    waited: list[str] = []
    with rig(backend) as (st, _registry, _prefix, log_path):
        # The watch has its own connection: a DELETE is seen as soon as the API commits it.
        conf = client.Configuration()
        config.load_kube_config(config_file=str(st.kubeconfig), client_configuration=conf)
        watch_api = client.ApiClient(conf)
        watcher = DeleteWatch(core=client.CoreV1Api(watch_api))
        watcher.start()
        log = IngestLog(log_path)
        try:
            i = -1
            while len(latencies) < runs:
                i += 1  # push 0 warms `ingest`
                if i > 3 * runs:
                    raise RuntimeError(
                        f"only {len(latencies)} of {i} pushes freed the seat by their event; "
                        f"{len(waited)} notifications beat their tag"
                    )
                name = f"f{i:04d}"
                vm = vm_name(NS, name, 0)
                cs = st.create_set(name, suspend=True, phase="Suspending", annotations={})
                st.hibernated_main(cs)
                st.push(vm)
                pushed = time.perf_counter()
                deadline = pushed + RUN_TIMEOUT_S
                deleted = None
                while deleted is None:
                    with contextlib.suppress(TimeoutError):
                        deleted = watcher.wait(f"{name}-0", 0.05)
                    if deleted is not None:
                        break
                    log.poll()
                    outcome = log.outcome.get(vm, "done")
                    if not outcome.startswith("done"):
                        if "not in the registry" not in outcome:
                            raise RuntimeError(f"the release of {vm} ended: {outcome}")
                        # Distribution notified before `<vm>:hibernate` resolved: the
                        # reconcile's HEAD found no tag and the set keeps waiting. The tag
                        # resolving now shows the order (the push had completed before).
                        repo = f"{st.prefix}/{vm}"
                        if not wait_until(
                            lambda r=repo: (
                                st.snapshots.head_manifest(r, k.TAG_HIBERNATE) is not None
                            ),
                            timeout=5,
                        ):
                            raise RuntimeError(f"{repo}:hibernate never resolved after its push")
                        if i > 0:
                            waited.append(vm)
                        break
                    if time.perf_counter() > deadline:
                        raise TimeoutError(
                            f"pod {name}-0 was not deleted within {RUN_TIMEOUT_S:.0f}s of "
                            f"the push; ingest log:\n{log.tail()}"
                        )
                if deleted is not None and i > 0:
                    latencies.append((deleted - pushed) * 1000.0)
        finally:
            watcher.stop()
            watch_api.close()
    return latencies, waited


def run(*, quick: bool = False) -> dict[str, Any]:
    from benchmarks.bench_release import real_available

    runs = 5 if quick else 110
    backends = ["embedded"] if quick else ["embedded", "real"]
    figures: dict[str, Any] = {}
    samples: dict[str, list[float]] = {}
    p: dict[str, tuple[float, float, float]] = {}
    for backend in backends:
        if backend == "real" and not real_available():
            figures["seat_freed_real"] = figure(
                0, "skipped", "real kube-apiserver not built here (`make controlplane`)"
            )
            continue
        lat, waited = _measure(backend, runs)
        suffix = "" if backend == "embedded" else "_real"
        p50, p99, mean = statistics.median(lat), percentile(lat, 99), statistics.fmean(lat)
        p[backend] = (p50, p99, mean)
        samples[f"seat_freed_ms{suffix}"] = lat
        where = "embedded Kubernetes API" if backend == "embedded" else "real kube-apiserver+etcd"
        figures[f"seat_freed_p50{suffix}"] = figure(
            p50,
            "ms",
            f"push of <vm>:hibernate completed at a real Distribution registry -> main pod "
            f"DELETE at the API (pod watch), through Distribution's notification -> `ingest` "
            f"(functions-framework) -> release reconcile; {where}; {len(lat)} runs, warm; "
            f"the functions alone (no operator)",
        )
        figures[f"seat_freed_p99{suffix}"] = figure(
            p99, "ms", f"as above, p99 over {len(lat)} runs (max {max(lat):.0f} ms)"
        )
        figures[f"seat_freed_notified_before_tag{suffix}"] = figure(
            len(waited),
            "runs",
            f"of {len(lat) + len(waited)} measured pushes "
            f"({100 * len(waited) / (len(lat) + len(waited)):.0f} %), the notification "
            f"reached `ingest` before "
            f"<vm>:hibernate resolved (Distribution emits the manifest event before it links "
            f"the tag): the reconcile's HEAD found nothing, the set stayed Suspending and the "
            f"seat stays held until the next sweep; not in p50/p99 (which are over the "
            f"{len(lat)} pushes the event path released). VMs: {', '.join(waited)}",
        )
    if "embedded" in p and "real" in p:
        for i, q in enumerate(("p50", "p99")):
            figures[f"seat_freed_{q}_real_over_embedded"] = figure(
                p["real"][i] / p["embedded"][i],
                "x",
                f"real {p['real'][i]:.0f} ms vs embedded {p['embedded'][i]:.0f} ms, same run",
            )
    return {"figures": figures, "samples": samples}


if __name__ == "__main__":
    print(json.dumps(run(quick="--quick" in sys.argv)["figures"], indent=2))
