"""Releases in vk-cocoon's real order, through one trigger configuration, on either backend.

The e2e tests of docs/triggers.md and `benchmarks/bench_seatfreed.py` share
this rig. Each release starts where the functions' own release reconcile
leaves a set: phase `Suspending`, its main pod running a VM and asked to
hibernate at the set's current generation. From there nothing is played by
hand: the simulator's vk-cocoon (:mod:`devstack.vkorder`) writes
`hibernating`, pushes `<vm>:hibernate` to a real Distribution registry,
removes the VM (`gap` seconds) and reports `hibernated`; the functions learn
of it only through the configured triggers:

- ``push``: Distribution's notifications -> `ingest /registry` (no audit);
- ``audit``: the API server's audit webhook -> `ingest /kubernetes/audit`
  (the registry notifies nobody);
- ``both``.

No sweep runs: a seat the event path did not free stays held, and the run
times out. `ingest` is a real functions-framework process.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import sys
import tempfile
import threading
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import requests

from devstack.kubeapi import EmbeddedKube
from devstack.kubehttp import KubeHTTP, pod_path, set_path
from devstack.processes import ManagedProcess, free_port
from devstack.registry import DistributionServer
from devstack.sim_pods import operator_main_pod
from devstack.simulator import NodeSpec, Simulator
from devstack.vkorder import DEFAULT_REPORT_GAP_S
from functions.serve import default_source
from shared import constants as k
from shared.names import vm_name

MODES = ("push", "audit", "both")
NS = "trig"
# Distribution's endpoint timeout as deployed (infra/registry-config/config.yml).
NOTIFY_TIMEOUT = "5s"


@dataclass
class DeleteWatch:
    """A pod watch in a thread: when each pod's DELETE (or deletion stamp) became visible."""

    api: KubeHTTP
    base_url: str
    token: str | None = None
    ca_file: str | None = None
    seen: dict[str, float] = field(default_factory=dict)
    cond: threading.Condition = field(default_factory=threading.Condition)
    stop_flag: threading.Event = field(default_factory=threading.Event)
    error: BaseException | None = None
    thread: threading.Thread | None = None

    def start(self) -> None:
        listing = self.api.get(pod_path(NS))
        rv = str((listing.get("metadata") or {}).get("resourceVersion") or "")
        self.thread = threading.Thread(target=self._loop, args=(rv,), daemon=True)
        self.thread.start()

    def _loop(self, rv: str) -> None:
        session = requests.Session()
        if self.token:
            session.headers["Authorization"] = f"Bearer {self.token}"
        try:
            while not self.stop_flag.is_set():
                # Short server-side timeouts keep the thread stoppable; each new stream
                # resumes from the last resourceVersion seen.
                resp = session.get(
                    self.base_url + pod_path(NS),
                    params={"watch": "true", "resourceVersion": rv, "timeoutSeconds": "2"},
                    stream=True,
                    timeout=(5, 10),
                    verify=self.ca_file or True,
                )
                resp.raise_for_status()
                with contextlib.closing(resp):
                    for line in resp.iter_lines():
                        if not line:
                            continue
                        now = time.perf_counter()
                        ev = json.loads(line)
                        meta = (ev.get("object") or {}).get("metadata") or {}
                        rv = meta.get("resourceVersion") or rv
                        if ev.get("type") == "DELETED" or meta.get("deletionTimestamp"):
                            with self.cond:
                                self.seen.setdefault(meta["name"], now)
                                self.cond.notify_all()
                        if self.stop_flag.is_set():
                            break
        except Exception as err:  # noqa: BLE001 - reported by wait(), not lost in a thread
            if not self.stop_flag.is_set():
                self.error = err
                with self.cond:
                    self.cond.notify_all()
        finally:
            session.close()

    def wait(self, pod: str, timeout: float) -> float | None:
        with self.cond:
            self.cond.wait_for(lambda: pod in self.seen or self.error is not None, timeout)
        if self.error is not None:
            raise RuntimeError(f"the pod watch failed: {self.error!r}") from self.error
        return self.seen.get(pod)

    def stop(self) -> None:
        self.stop_flag.set()
        if self.thread is not None:
            self.thread.join(timeout=10)


@dataclass(frozen=True)
class Release:
    name: str
    vm: str
    pushed: float  # perf_counter: vk-cocoon's push answered
    reported: float  # perf_counter: vk-cocoon's `hibernated` patch answered
    deleted: float | None  # perf_counter: the main pod's DELETE seen by the watch

    @property
    def freed_after_report_ms(self) -> float | None:
        return None if self.deleted is None else (self.deleted - self.reported) * 1000.0


class TriggerRig:
    """The rig; a context manager. `real` is a started RealKube for backend "real"."""

    def __init__(
        self,
        backend: str,
        mode: str,
        *,
        gap: float = DEFAULT_REPORT_GAP_S,
        real: Any = None,
        report_wait: str = "4s",
        extra_env: dict[str, str] | None = None,
    ) -> None:
        if mode not in MODES:
            raise ValueError(f"mode {mode!r} is not one of {MODES}")
        if backend == "real" and real is None:
            raise ValueError("backend real needs a started RealKube")
        self.backend, self.mode, self.gap = backend, mode, gap
        self.real = real
        self.report_wait = report_wait
        self.extra_env = dict(extra_env or {})
        # One secret per door (functions.doors): registry, audit webhook, sweep ticks.
        self.token = secrets.token_urlsafe(24)
        self.audit_token = secrets.token_urlsafe(24)
        self.sweep_token = secrets.token_urlsafe(24)
        self.port = free_port()
        self.prefix = f"r{uuid.uuid4().hex[:8]}"
        self._stack = contextlib.ExitStack()
        self.kube: Any = None
        self.api: KubeHTTP | None = None
        self.sim: Simulator | None = None
        self.watch: DeleteWatch | None = None
        self.registry: Any = None
        self.ingest: Any = None
        self.log_path = Path()
        self.count = 0

    @property
    def ingest_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def __enter__(self) -> TriggerRig:
        try:
            self._start()
        except BaseException:
            self._stack.close()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self._stack.close()

    def _start(self) -> None:
        tmp = Path(self._stack.enter_context(tempfile.TemporaryDirectory()))
        audit = self.mode in ("audit", "both")
        token: str | None = None
        ca: str | None = None
        if self.backend == "embedded":
            kube = EmbeddedKube(
                audit_webhook=f"{self.ingest_url}/kubernetes/audit" if audit else None,
                audit_token=self.audit_token,
            )
            kube.start()
            self._stack.callback(kube.stop)
            self.kube = kube
            self.api = KubeHTTP(kube.url)
            self.api.post("/api/v1/namespaces", {"metadata": {"name": NS}})
        else:
            kube = self.real
            self.kube = kube
            kube.ensure_namespace(NS)
            token, ca = kube.tokens["admin"], str(kube.dir / "ca.crt")
            self.api = KubeHTTP(kube.url, token=token, ca_file=ca)
            if audit:
                kube.audit_sink.forward = self._forward_audit
                self._stack.callback(setattr, kube.audit_sink, "forward", None)
        self._stack.callback(self.api.close)
        kubeconfig = Path(kube.write_kubeconfig(tmp / "kubeconfig"))

        push = self.mode in ("push", "both")
        registry = DistributionServer(
            notify_url=f"{self.ingest_url}/registry" if push else None,
            notify_token=self.token if push else None,
            notify_timeout=NOTIFY_TIMEOUT,
        )
        self._stack.enter_context(registry)
        self.registry = registry

        self.log_path = tmp / "ingest.log"
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
                str(self.port),
            ],
            log_path=self.log_path,
            env={
                **os.environ,
                "KUBECONFIG": str(kubeconfig),
                "COCOON_REGISTRY_BASE": f"{registry.host}/{self.prefix}",
                "COCOON_REGISTRY_INSECURE": "true",
                "COCOON_INGEST_TOKEN": self.token,
                "COCOON_AUDIT_TOKEN": self.audit_token,
                "COCOON_SWEEP_TOKEN": self.sweep_token,
                "COCOON_LOG_FORMAT": "json",
                "COCOON_REPORT_WAIT": self.report_wait,
                # The functions alone: the rig plays no cocoon-operator (docs/operator.md).
                "COCOON_OPERATOR": "absent",
                **self.extra_env,
            },
            cwd=tmp,
        )
        ingest.start()
        self._stack.callback(ingest.stop)
        ingest.wait_http(f"{self.ingest_url}/", timeout=60)
        self.ingest = ingest

        self.sim = Simulator(
            api=self.api,
            registry_url=registry.url,
            registry_prefix=self.prefix,
            nodes=[NodeSpec("node-1", seats=100_000)],
            interval=0.05,
            report_gap=self.gap,
            metrics_interval=0,
        )
        self.sim.start()
        self._stack.callback(self.sim.stop)
        self.watch = DeleteWatch(self.api, kube.url, token, ca)
        self.watch.start()
        self._stack.callback(self.watch.stop)

    def _forward_audit(self, body: bytes, headers: dict[str, str]) -> None:
        # The real server's audit webhook reaches the test's TLS sink; `ingest` gets it
        # as the webhook would post it (same body, bearer token of the webhook kubeconfig).
        requests.post(
            f"{self.ingest_url}/kubernetes/audit",
            data=body,
            headers={
                "Authorization": f"Bearer {self.audit_token}",
                "Content-Type": "application/json",
            },
            timeout=10,
        )

    # -- one release ------------------------------------------------------------------

    def begin(self) -> tuple[str, str]:
        """A set as the release reconcile leaves it; vk-cocoon takes it from there."""
        assert self.api is not None
        self.count += 1
        name = f"s{self.count:04d}-{uuid.uuid4().hex[:4]}"
        vm = vm_name(NS, name, 0)
        body = {
            "apiVersion": k.API_VERSION,
            "kind": k.KIND,
            "metadata": {"name": name, "namespace": NS},
            "spec": {
                "agent": {"image": "ghcr.io/acme/agent:1"},
                "hibernatePolicy": "release",
                "suspend": True,
            },
        }
        cs = self.api.post(set_path(NS), body)
        gen = int(cs["metadata"].get("generation") or 1)
        self.api.merge_patch(set_path(NS, name) + "/status", {"status": {"phase": "Suspending"}})
        pod = operator_main_pod(
            cs,
            # Running a VM, asked to hibernate for this round (the reconcile's patch).
            {
                k.ANN_VM_NAME: vm,
                k.ANN_MANAGED: k.TRUE,
                k.ANN_GENERATION: str(gen),
                k.ANN_HIBERNATE: k.TRUE,
                k.ANN_VM_ID: f"vm-{uuid.uuid4().hex[:12]}",
                k.ANN_LIFECYCLE_STATE: "ready",
            },
            node="node-1",
            namespace=NS,
        )
        self.api.post(pod_path(NS), pod)
        return name, vm

    def finish(self, name: str, vm: str, timeout: float) -> Release:
        """Wait for vk-cocoon's report, then for the seat (no sweep: it may never come)."""
        assert self.sim is not None and self.watch is not None
        deadline = time.monotonic() + timeout
        key = (NS, f"{name}-0")
        while True:
            vk = self.sim.vk
            stamp = vk.times.get(key) if vk is not None else None
            if stamp is not None and stamp.reported:
                break
            if time.monotonic() > deadline:
                raise TimeoutError(f"vk-cocoon never reported {name}: {self.sim.errors[-3:]}")
            time.sleep(0.01)
        left = max(0.0, deadline - time.monotonic())
        deleted = self.watch.wait(f"{name}-0", left)
        return Release(name, vm, stamp.pushed, stamp.reported, deleted)

    def set_gap(self, gap: float) -> None:
        """vk-cocoon's push -> report gap from the next hibernation on."""
        assert self.sim is not None
        self.gap = self.sim.report_gap = gap
        if self.sim.vk is not None:
            self.sim.vk.gap = gap

    def warm_up(self, timeout: float = 30.0) -> Release:
        """One release with no gap: `ingest` loads its clients on its first relevant event."""
        gap = self.gap
        self.set_gap(0.0)
        try:
            return self.release(timeout)
        finally:
            self.set_gap(gap)

    def release(self, timeout: float = 15.0) -> Release:
        name, vm = self.begin()
        return self.finish(name, vm, timeout)

    def phase(self, name: str) -> str | None:
        assert self.api is not None
        got: str | None = self.api.get(set_path(NS, name)).get("status", {}).get("phase")
        return got

    def log_tail(self, lines: int = 20) -> str:
        return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
