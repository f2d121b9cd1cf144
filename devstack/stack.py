"""The local stack: the whole system on one machine, as it runs in production.

Parts, all on 127.0.0.1 with free ports, each readiness-checked:

- the embedded Kubernetes API in **its own process**
  (``cocoon-hibernation devstack kube``): it is the state every other part
  hits concurrently, so it gets its own interpreter (no GIL contention with
  the simulator and the narration), it dies cleanly as a unit, and it is the
  same command a user runs by hand. Its audit webhook posts to ``ingest``
  (``/kubernetes/audit``, bearer token);
- a real CNCF Distribution registry (``devstack.registry.DistributionServer``)
  in a temporary directory, notifying ``ingest`` (``/registry``, bearer);
- the four targets, each its own ``functions-framework --source <functions/entrypoints.py>
  --target X`` process with the environment of docs/design.md#configuration, exactly as deployed;
- the cluster simulator (:mod:`devstack.simulator`) in a thread;
- a scheduler tick: every ``tick_seconds`` a CloudEvent
  ``io.cocoonstack.sweep.requested`` to ``sweep``.

Every process logs to a file in the stack's directory. ``stop()`` (and leaving
the ``with`` block, and Ctrl-C in the CLI) tears everything down: children
live in their own process groups and are stopped group-wide.
"""

from __future__ import annotations

import contextlib
import os
import re
import secrets
import shutil
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import requests
from cloudevents.http import CloudEvent, to_binary

from devstack.extra import require_local_extra
from devstack.kubehttp import ConflictError, KubeHTTP
from devstack.processes import ManagedProcess, StackError, free_port, stop_all
from devstack.registry import DistributionServer, RegistryBinaryMissing, RegistryStartError
from devstack.simulator import LOCAL_CPU_CLASS, NodeSpec, SimEvent, Simulator
from devstack.upstream import Upstream
from devstack.vkorder import DEFAULT_REPORT_GAP_S
from functions.serve import default_source
from shared import constants as k

TARGETS = ("release", "wake", "sweep", "ingest")


# Combined log format: "METHOD /v2/... HTTP/1.1" STATUS SIZE "REFERER" "USER-AGENT"
_ACCESS_LINE = re.compile(r'"(GET|HEAD|PUT|POST|PATCH|DELETE) /v2/[^"]*" \d+ \S+ "[^"]*" "([^"]*)"')
# shared.clients.registry identifies itself; everything else here is the simulator or the demo.
FUNCTIONS_USER_AGENT = "cocoon-hibernation"


class _CountedRegistry(DistributionServer):
    """The shared test registry with its access log on, so the demo can count requests."""

    def config(self) -> dict[str, Any]:
        cfg = super().config()
        cfg["log"] = {**cfg.get("log", {}), "accesslog": {"disabled": False}}
        return cfg

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc is not None else None

    def request_counts(self) -> dict[str, int]:
        counts: dict[str, int] = {}
        try:
            text = self.log_path.read_text(errors="replace")
        except (OSError, AssertionError):
            return counts
        for match in _ACCESS_LINE.finditer(text):
            method, agent = match.group(1), match.group(2)
            who = "functions" if agent.startswith(FUNCTIONS_USER_AGENT) else "simulator+demo"
            key = f"{who} {method}"
            counts[key] = counts.get(key, 0) + 1
        counts["total"] = sum(counts.values())
        return dict(sorted(counts.items()))


def default_nodes() -> list[NodeSpec]:
    # Pool `default` and the class the shipped examples ask for: they run unchanged here.
    return [
        NodeSpec("node-1", seats=1, cpu_class=LOCAL_CPU_CLASS),
        NodeSpec("node-2", seats=1, cpu_class=LOCAL_CPU_CLASS),
    ]


@dataclass
class StackConfig:
    nodes: list[NodeSpec] = field(default_factory=default_nodes)
    tick_seconds: float = 5.0  # sweep tick; 0 disables it
    sim_interval: float = 0.1
    registry_prefix: str = "snapshots"
    log_format: str = "json"
    wake_deadline: str = "10m"
    # A waiting wake reclaims an idle seat after this (production default 30s; the
    # local stack's scheduler never is merely slow, and a demo should not wait).
    seat_reclaim_grace: str = "2s"
    # The simulated scheduler's pick among pending pods (devstack.sim_scheduler.FIFO or
    # NEWEST_FIRST, kube-scheduler's backoff at its least kind).
    scheduler_order: str = "fifo"
    # vk-cocoon's gap between its push and its `hibernated` report (devstack.vkorder).
    report_gap: float = DEFAULT_REPORT_GAP_S
    # vk-cocoon's restore time, warm and cold (the simulator's; 0 = at once).
    warm_restore_s: float = 0.0
    cold_restore_s: float = 0.0
    # "embedded" (its own process), or "real": kube-apiserver + etcd (devstack.realkube,
    # `make controlplane`), admin over https, its audit webhook forwarded to `ingest`. The
    # real one serves no metrics.k8s.io, so the simulator writes no PodMetrics there.
    backend: str = "embedded"
    workdir: Path | None = None
    keep_workdir: bool = False
    start_timeout: float = 60.0
    extra_env: dict[str, str] = field(default_factory=dict)
    # Which cocoonstack the simulated operator and vk-cocoon play (devstack.upstream).
    upstream: Upstream = Upstream.TODAY


def _console_script(name: str) -> list[str]:
    """The venv's console script beside this interpreter (the same one that runs us)."""
    candidate = Path(sys.executable).parent / name
    if candidate.exists():
        return [str(candidate)]
    found = shutil.which(name)
    if found:
        return [found]
    raise StackError(f"{name} is not installed in this environment (run `uv sync`)")


class Stack:
    """The local stack; use as a context manager, or `start()` / `stop()`."""

    def __init__(
        self,
        config: StackConfig | None = None,
        *,
        on_event: Callable[[SimEvent], None] | None = None,
        on_progress: Callable[[str], None] | None = None,
    ) -> None:
        self.config = config or StackConfig()
        self.on_event = on_event
        self.on_progress = on_progress or (lambda _msg: None)
        # One secret per door, as in production (functions.doors): the registry's
        # notifications, the audit webhook, wake requests and sweep ticks.
        self.token = secrets.token_urlsafe(24)
        self.audit_token = secrets.token_urlsafe(24)
        self.wake_token = secrets.token_urlsafe(24)
        self.sweep_token = secrets.token_urlsafe(24)
        self.workdir = Path(".")
        self.kube_port = 0
        self.real: Any = None  # devstack.realkube.RealKube with backend="real"
        self.ports: dict[str, int] = {}
        self.processes: list[ManagedProcess] = []
        self.registry: _CountedRegistry | None = None
        self.simulator: Simulator | None = None
        self.api: KubeHTTP | None = None
        self._tick_stop = threading.Event()
        self._tick_thread: threading.Thread | None = None
        self.ticks_sent = 0
        self._made_workdir = False
        self.started = False

    # -- addresses --
    @property
    def kube_url(self) -> str:
        if self.real is not None:
            return str(self.real.url)
        return f"http://127.0.0.1:{self.kube_port}"

    def kube_http(self) -> KubeHTTP:
        """A JSON client of the stack's API server as admin (token and CA on the real one)."""
        if self.real is None:
            return KubeHTTP(self.kube_url)
        ca = str(self.real.dir / "ca.crt")
        return KubeHTTP(self.kube_url, token=self.real.tokens["admin"], ca_file=ca)

    def ensure_namespace(self, name: str) -> None:
        """A namespace and its `default` ServiceAccount (no controller-manager on the real one)."""
        if self.real is not None:
            self.real.ensure_namespace(name)
            return
        body = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}
        api = self.kube_http()
        try:
            with contextlib.suppress(ConflictError):
                api.post("/api/v1/namespaces", body)
        finally:
            api.close()

    @property
    def kubeconfig(self) -> Path:
        return self.workdir / "kubeconfig"

    def target_url(self, target: str) -> str:
        return f"http://127.0.0.1:{self.ports[target]}"

    def _registry(self) -> _CountedRegistry:
        if self.registry is None:
            raise StackError("the registry is not running")
        return self.registry

    @property
    def registry_url(self) -> str:
        return self._registry().url

    @property
    def registry_base(self) -> str:
        host = self._registry().host
        prefix = self.config.registry_prefix.strip("/")
        return f"{host}/{prefix}" if prefix else host

    def function_env(self) -> dict[str, str]:
        """The targets' environment (docs/design.md#configuration; what a CLI user exports too)."""
        return {
            "KUBECONFIG": str(self.kubeconfig),
            "COCOON_REGISTRY_BASE": self.registry_base,
            "COCOON_REGISTRY_INSECURE": "true",
            "COCOON_INGEST_TOKEN": self.token,
            "COCOON_AUDIT_TOKEN": self.audit_token,
            "COCOON_WAKE_TOKEN": self.wake_token,
            "COCOON_SWEEP_TOKEN": self.sweep_token,
            "COCOON_LOG_FORMAT": self.config.log_format,
            "COCOON_WAKE_DEADLINE": self.config.wake_deadline,
            "COCOON_SEAT_RECLAIM_GRACE": self.config.seat_reclaim_grace,
            # The simulator's operator plays the normal flow only (never a slot release
            # or a wake): the functions act alone here (docs/operator.md).
            "COCOON_OPERATOR": "absent",
            **self.config.extra_env,
        }

    def pids(self) -> list[int]:
        out = [p.pid for p in self.processes if p.pid is not None]
        if self.registry is not None and self.registry.pid is not None:
            out.append(self.registry.pid)
        return out

    # -- lifecycle --
    def __enter__(self) -> Stack:
        try:
            self.start()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def start(self) -> None:
        require_local_extra()  # before any process starts: one line, nothing to tear down
        cfg = self.config
        if cfg.workdir is not None:
            cfg.workdir.mkdir(parents=True, exist_ok=True)
            self.workdir = cfg.workdir
        else:
            self.workdir = Path(tempfile.mkdtemp(prefix="cocoon-devstack-"))
            self._made_workdir = True
        (self.workdir / "logs").mkdir(exist_ok=True)
        self.kube_port = free_port()
        self.ports = {t: free_port() for t in TARGETS}
        ingest = self.target_url("ingest")

        if cfg.backend == "real":
            kube = None
            self._start_real(ingest)
        else:
            kube = self._start_embedded(ingest)

        self.on_progress("starting the Distribution registry")
        registry = _CountedRegistry(notify_url=f"{ingest}/registry", notify_token=self.token)
        self.registry = registry
        try:
            registry.start()
        except (RegistryBinaryMissing, RegistryStartError) as err:
            raise StackError(str(err)) from err

        if kube is not None:
            kube.wait_http(
                f"{self.kube_url}/version",
                timeout=cfg.start_timeout,
                ok=lambda r: r.status_code == 200 and self.kubeconfig.exists(),
            )
        self._start_rest()

    def _start_real(self, ingest: str) -> None:
        # Only here: the certificate code stays out of the demo's start.
        from devstack.realkube import ControlPlaneUnavailable, RealKube  # noqa: PLC0415

        self.on_progress("starting kube-apiserver + etcd")
        try:
            self.real = RealKube()
        except ControlPlaneUnavailable as err:
            raise StackError(str(err)) from err
        self.real.start()
        self.real.write_kubeconfig(self.kubeconfig)
        headers = {"Authorization": f"Bearer {self.token}", "Content-Type": "application/json"}

        def forward(body: bytes, _sent: dict[str, str]) -> None:
            # The real server authenticates to its sink; `ingest` wants the stack's token.
            with contextlib.suppress(requests.RequestException):
                requests.post(f"{ingest}/kubernetes/audit", data=body, headers=headers, timeout=30)

        self.real.audit_sink.forward = forward

    def _start_embedded(self, ingest: str) -> ManagedProcess:
        self.on_progress("starting the embedded Kubernetes API")
        return self._spawn(
            "kube",
            [
                sys.executable,
                "-m",
                "cocoon_hibernation",
                "devstack",
                "kube",
                "--port",
                str(self.kube_port),
                "--kubeconfig",
                str(self.kubeconfig),
                "--audit-webhook",
                f"{ingest}/kubernetes/audit",
            ],
            env={**os.environ, "COCOON_AUDIT_TOKEN": self.audit_token},
        )

    def _start_rest(self) -> None:
        cfg = self.config
        self.on_progress("starting the functions (release, wake, sweep, ingest)")
        env = {**os.environ, **self.function_env(), "PYTHONUNBUFFERED": "1"}
        ff = _console_script("functions-framework")
        procs = {
            t: self._spawn(
                t,
                [
                    *ff,
                    "--source",
                    str(default_source()),
                    "--target",
                    t,
                    "--host",
                    "127.0.0.1",
                    "--port",
                    str(self.ports[t]),
                ],
                env=env,
                cwd=self.workdir,
            )
            for t in TARGETS
        }
        for t, proc in procs.items():
            proc.wait_http(self.target_url(t) + "/", timeout=cfg.start_timeout)

        self.on_progress("starting the cluster simulator")
        self.api = self.kube_http()
        self.simulator = Simulator(
            api=self.api,
            registry_url=self.registry_url,
            registry_prefix=cfg.registry_prefix.strip("/"),
            nodes=list(cfg.nodes),
            interval=cfg.sim_interval,
            on_event=self.on_event,
            scheduler_order=cfg.scheduler_order,
            report_gap=cfg.report_gap,
            upstream=cfg.upstream,
            warm_restore_s=cfg.warm_restore_s,
            cold_restore_s=cfg.cold_restore_s,
            metrics_interval=0 if self.real is not None else 1.0,
        )
        self.simulator.start()
        if cfg.tick_seconds > 0:
            self._tick_thread = threading.Thread(
                target=self._tick_loop, name="sweep-tick", daemon=True
            )
            self._tick_thread.start()
        self._write_env_file()
        self.started = True

    def stop(self) -> None:
        self._tick_stop.set()
        if self._tick_thread is not None:
            # Do not wait out a tick in flight (a cold sweep takes a second or two): the
            # thread is a daemon and its request fails as soon as `sweep` is stopped.
            self._tick_thread.join(timeout=0.2)
        if self.simulator is not None:
            self.simulator.stop()
            self.simulator = None
        # Functions first (they talk to the API and the registry), the API last.
        processes, self.processes = self.processes, []
        stop_all([p for p in processes if p.name != "kube"])
        stop_all([p for p in processes if p.name == "kube"])
        if self.real is not None:
            with contextlib.suppress(Exception):
                self.real.stop()
            self.real = None
        if self.registry is not None:
            with contextlib.suppress(Exception):
                self.registry.stop()
            self.registry = None
        if self.api is not None:
            self.api.close()
            self.api = None
        if self._made_workdir and not self.config.keep_workdir:
            shutil.rmtree(self.workdir, ignore_errors=True)
        self.started = False

    def check_alive(self) -> None:
        for proc in self.processes:
            if not proc.alive():
                # The exit code (negative: the signal) says who ended it: a crash writes
                # its traceback to the log, a signal from outside writes nothing there.
                code = proc.proc.returncode if proc.proc is not None else None
                raise StackError(
                    f"{proc.name} exited unexpectedly (exit code {code}); "
                    f"log {proc.log_path}:\n{proc.log_tail()}"
                )

    def _spawn(
        self, name: str, argv: list[str], *, env: Mapping[str, str], cwd: Path | None = None
    ) -> ManagedProcess:
        proc = ManagedProcess(
            name, argv, log_path=self.workdir / "logs" / f"{name}.log", env=env, cwd=cwd
        )
        self.processes.append(proc)
        proc.start()
        return proc

    def _write_env_file(self) -> None:
        lines = [f"export {key}={value}" for key, value in self.function_env().items()]
        (self.workdir / "env.sh").write_text("\n".join(lines) + "\n")

    # -- talking to the stack --
    def post_cloudevent(self, target: str, ce_type: str, data: Mapping[str, Any]) -> int:
        """Deliver a binary-mode CloudEvent to a target, as Eventarc/Knative would."""
        event = CloudEvent(
            {
                "type": ce_type,
                "source": "//cocoon-hibernation/devstack",
                "id": str(uuid.uuid4()),
            },
            dict(data),
        )
        headers, body = to_binary(event)
        resp = requests.post(self.target_url(target) + "/", headers=headers, data=body, timeout=30)
        return resp.status_code

    def request_wake(self, namespace: str, name: str) -> int:
        return self.post_cloudevent(
            "wake", k.CE_WAKE_REQUESTED, {"namespace": namespace, "name": name}
        )

    def _tick_loop(self) -> None:
        while not self._tick_stop.wait(self.config.tick_seconds):
            with contextlib.suppress(requests.RequestException):
                self.post_cloudevent("sweep", k.CE_SWEEP_REQUESTED, {"dryRun": False})
                self.ticks_sent += 1

    def api_request_log(self) -> list[dict[str, Any]]:
        resp = requests.get(f"{self.kube_url}/_emulator/requests", timeout=5)
        resp.raise_for_status()
        body = resp.json()
        items = body.get("requests", body.get("items", [])) if isinstance(body, dict) else body
        return list(items or [])

    def registry_request_counts(self) -> dict[str, int]:
        """Requests the registry served, per method (from its access log)."""
        return self.registry.request_counts() if self.registry is not None else {}

    def wait_for(self, what: str, check: Callable[[], bool], timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if check():
                return
            time.sleep(0.05)
        raise StackError(f"timed out waiting for {what}")
