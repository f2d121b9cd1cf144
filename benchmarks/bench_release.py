"""Figures for the release (docs/design.md#release): request counts and warm latency.

Everything is real but local: the embedded Kubernetes API (real HTTP, the
official client), a real Distribution registry, the `release` target through
functions-framework with real CloudEvents.

- API requests for one complete release of a main-only set whose VM already
  hibernated (events included) — target ≤ 8 (7 actions + the durable "reported"
  mark of the crash-safe SeatReleased); the note lists each request;
- registry requests for it — target one HEAD per VM;
- warm latency, push notification delivered → pods deleted (the invocation
  returns after the DELETE), p50/p99.

Run: `uv run python -m benchmarks.bench_release` (`--quick` for 20 runs).
"""

from __future__ import annotations

import json
import os
import statistics
import sys
import tempfile
import time
import uuid
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchmarks._util import fig as figure
from benchmarks._util import percentile
from shared import constants as k
from shared.config import OperatorMode, Settings, parse_registry_base
from shared.names import SetRef, vm_name

REPO_ROOT = Path(__file__).resolve().parent.parent
NS = "bench"


@dataclass
class Stack:
    kube: Any
    registry: Any
    kubeconfig: Path
    prefix: str
    settings: Settings
    client: Any
    snapshots: Any
    custom: Any
    core: Any

    def env(self) -> dict[str, str]:
        return {
            "KUBECONFIG": str(self.kubeconfig),
            "COCOON_REGISTRY_BASE": f"{self.registry.host}/{self.prefix}",
            "COCOON_REGISTRY_INSECURE": "true",
            "COCOON_LOG_FORMAT": "json",
            "COCOON_OPERATOR": "absent",  # no operator here: the functions alone
        }

    # --- actors -------------------------------------------------------------------

    def create_set(
        self, name: str, *, suspend: bool, phase: str, annotations: dict[str, str]
    ) -> dict[str, Any]:
        body = {
            "apiVersion": k.API_VERSION,
            "kind": k.KIND,
            "metadata": {"name": name, "namespace": NS, "annotations": annotations},
            "spec": {
                "agent": {"image": "ghcr.io/acme/agent:1"},
                "hibernatePolicy": "release",
                "suspend": suspend,
            },
        }
        self.custom.create_namespaced_custom_object(k.GROUP, k.VERSION, NS, k.PLURAL, body)
        out: dict[str, Any] = self.custom.patch_namespaced_custom_object_status(
            k.GROUP,
            k.VERSION,
            NS,
            k.PLURAL,
            name,
            {"status": {"phase": phase}},
            _content_type="application/merge-patch+json",
        )
        return out

    def hibernated_main(self, cs: dict[str, Any]) -> None:
        from devstack.sim_pods import operator_main_pod

        name = cs["metadata"]["name"]
        # As the operator builds it: controlled by the set, managed, stamped.
        annotations = {
            k.ANN_VM_NAME: vm_name(NS, name, 0),
            k.ANN_MANAGED: k.TRUE,
            k.ANN_GENERATION: str(cs["metadata"]["generation"]),
            k.ANN_HIBERNATE: k.TRUE,
            k.ANN_LIFECYCLE_STATE: "hibernated",
            k.ANN_LIFECYCLE_GENERATION: str(cs["metadata"]["generation"]),
        }
        self.core.create_namespaced_pod(NS, operator_main_pod(cs, annotations, node="node-a"))

    def push(self, vm: str) -> str:
        from devstack.registry import push_image

        assert self.settings.registry_base is not None
        digest: str = push_image(
            self.registry.url, self.settings.registry_base.repository(vm), k.TAG_HIBERNATE
        )
        return digest

    def reset_requests(self) -> None:
        self.kube.reset_requests()

    def api_requests(self) -> list[dict[str, Any]]:
        return [r for r in self.kube.requests() if not r["path"].startswith("/_")]


def real_available() -> bool:
    """The real kube-apiserver binaries are built here (`make controlplane`)."""
    from devstack.realkube import ControlPlaneUnavailable, find_binaries

    try:
        find_binaries()
    except ControlPlaneUnavailable:
        return False
    return True


@contextmanager
def stack(backend: str = "embedded") -> Iterator[Stack]:
    """The stack on the embedded API, or on a real kube-apiserver + etcd (`real`)."""
    from kubernetes import client, config

    from devstack.kubeapi import EmbeddedKube
    from devstack.realkube import RealKube
    from devstack.registry import DistributionServer
    from shared.clients.kube import KubeClient
    from shared.clients.registry import RegistryClient

    server: Any = RealKube() if backend == "real" else EmbeddedKube()
    with (
        tempfile.TemporaryDirectory() as tmp,
        server as kube,
        DistributionServer() as registry,
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
            kube.ensure_namespace(NS)  # and its default ServiceAccount (no controller-manager)
        else:
            core.create_namespace({"metadata": {"name": NS}})
        snapshots = RegistryClient(settings)
        try:
            yield Stack(
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
        finally:
            snapshots.close()
            api.close()


@contextmanager
def function_client(st: Stack, target: str, env: dict[str, str] | None = None) -> Iterator[Any]:
    """A warm functions-framework client of `target` configured for the stack (plus `env`)."""
    import functions_framework

    from functions import process

    wanted = {**st.env(), **(env or {})}
    saved = {key: os.environ.get(key) for key in wanted}
    os.environ.update(wanted)
    process.reset()
    try:
        app = functions_framework.create_app(target=target, source=str(REPO_ROOT / "main.py"))
        yield app.test_client()
    finally:
        process.reset()
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def post_event(client: Any, ce_type: str, data: dict[str, Any]) -> int:
    from cloudevents.http import CloudEvent, to_binary

    headers, body = to_binary(
        CloudEvent({"type": ce_type, "source": "//bench", "id": uuid.uuid4().hex}, data)
    )
    status: int = client.post("/", headers=headers, data=body).status_code
    return status


@contextmanager
def quiet_logs() -> Iterator[None]:
    """The functions log one JSON line per trigger; keep the figures readable."""
    from shared import log

    warnings.filterwarnings("ignore", category=DeprecationWarning)
    with open(os.devnull, "w") as sink:
        log.configure(log.LogFormat.JSON, sink)
        old = sys.stdout
        sys.stdout = sink
        try:
            yield
        finally:
            sys.stdout = old
            log.configure(log.LogFormat.JSON, None)


def run(*, quick: bool) -> dict[str, Any]:
    """Both backends side by side in one run: the embedded API, then (when its binaries
    are built) a real kube-apiserver (figures suffixed `_real`)."""
    figures: dict[str, Any] = {}
    samples: dict[str, list[float]] = {}
    for backend in ("embedded", "real"):
        if backend == "real" and not real_available():
            figures["release_real"] = figure(
                0, "skipped", "real kube-apiserver not built here (`make controlplane`)"
            )
            continue
        f, s_ = _run_backend(backend, quick=quick)
        suffix = "" if backend == "embedded" else "_real"
        figures.update({key + suffix: v for key, v in f.items()})
        samples.update({key + suffix: v for key, v in s_.items()})
    if "release_latency_ms_real" in samples:
        real, emb = (statistics.median(samples[f"release_latency_ms{s}"]) for s in ("_real", ""))
        figures["release_latency_p50_real_over_embedded"] = figure(
            real / emb,
            "x",
            f"release p50 {real:.1f} ms on the real kube-apiserver vs {emb:.1f} ms embedded, "
            "same run (target <= 1.5x, docs/reads.md)",
        )
    return {"figures": figures, "samples": samples}


def _run_backend(backend: str, *, quick: bool) -> tuple[dict[str, Any], dict[str, list[float]]]:
    from shared.reconcile import reconcile_set

    runs = 20 if quick else 200
    figures: dict[str, Any] = {}
    samples: dict[str, list[float]] = {}
    with stack(backend) as st, quiet_logs():
        # --- request counts for one complete release ---------------------------
        cs = st.create_set("counted", suspend=True, phase="Suspending", annotations={})
        st.hibernated_main(cs)
        st.push(vm_name(NS, "counted", 0))
        if backend == "embedded":
            st.reset_requests()
        st.client.reset_requests()
        registry_before = st.snapshots.requests_made
        out = reconcile_set(
            SetRef(NS, "counted"), kube=st.client, registry=st.snapshots, settings=st.settings
        )
        assert out.deleted_pods == 1, out
        # The client's own count (either backend); the emulator's log lists them too.
        sent = st.client.requests
        reqs = st.api_requests() if backend == "embedded" else []
        listed = "; ".join(
            f"{i + 1}. {r['method']} {r['path'].replace(f'/namespaces/{NS}', '/ns/' + NS)}"
            f"{'?' + r['query'] if r['query'] else ''} -> {r['status']}"
            for i, r in enumerate(reqs)
        )
        figures["release_api_requests"] = figure(
            sent,
            "requests",
            "one complete release of a main-only set whose VM already hibernated "
            "(target <= 8): GET set (fresh read), LIST pods (gate), PATCH set (stash: "
            "delete-vm-names + hint + release round, CAS) beside PATCH pod (keep-snapshot "
            "flag), DELETE pod (UID precondition), PATCH status (Suspended, CAS) beside POST "
            "event (SeatReleased, named by the round), PATCH set (release-reported): 6 round "
            "trips (docs/reads.md#writes-sent-at-once). "
            + (f"Measured: {listed}" if listed else f"Measured on a real kube-apiserver: {sent}"),
        )
        figures["release_registry_requests"] = figure(
            st.snapshots.requests_made - registry_before,
            "requests",
            "registry requests for that release: one HEAD <vm>:hibernate per VM (target 1 for a "
            "main-only set); the release never deletes a tag",
        )

        # --- warm latency: push notification -> pods deleted --------------------
        names = [f"r{i}" for i in range(runs + 1)]
        for name in names:
            c = st.create_set(name, suspend=True, phase="Suspending", annotations={})
            st.hibernated_main(c)
            st.push(vm_name(NS, name, 0))
        latencies: list[float] = []
        with function_client(st, "release") as release:
            for i, name in enumerate(names):
                data = {
                    "repository": f"{st.prefix}/{vm_name(NS, name, 0)}",
                    "tag": k.TAG_HIBERNATE,
                    "digest": "sha256:" + "0" * 64,
                }
                t0 = time.perf_counter()
                status = post_event(release, k.CE_SNAPSHOT_PUSHED, data)
                elapsed = (time.perf_counter() - t0) * 1000.0
                assert status == 200, status
                if i > 0:  # the first is the cold start of the clients
                    latencies.append(elapsed)
        samples["release_latency_ms"] = latencies
        figures["release_latency_p50"] = figure(
            statistics.median(latencies),
            "ms",
            f"warm: snapshot-pushed CloudEvent delivered to the release target -> pod deleted "
            f"and set Suspended (invocation returns after the DELETE); {len(latencies)} runs, "
            f"{backend} Kubernetes API + real registry on 127.0.0.1",
        )
        figures["release_latency_p99"] = figure(
            percentile(latencies, 99), "ms", f"as above, p99 over {len(latencies)} runs"
        )
    return figures, samples


def main() -> None:
    result = run(quick="--quick" in sys.argv)
    print(json.dumps(result["figures"], indent=2))


if __name__ == "__main__":
    main()
