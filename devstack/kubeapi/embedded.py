"""`EmbeddedKube`: the emulated Kubernetes API as a context-managed test/demo service.

Starts a ThreadingHTTPServer on 127.0.0.1 (port 0 picks a free port), the
controller thread (GC, namespace and pod-termination), and the audit webhook
backend when asked. The CocoonSet CRD is installed at start and survives
`reset()`; CRDs installed through the API by a test do not.
"""

from __future__ import annotations

import json
import signal
import threading
from pathlib import Path
from types import FrameType, TracebackType
from typing import Any

import yaml

from devstack.extra import require_local_extra
from devstack.kubeapi.api import Api
from devstack.kubeapi.audit import AuditBackend
from devstack.kubeapi.controllers import Controllers
from devstack.kubeapi.core import CRD_STORAGE, SYSTEM_NAMESPACES
from devstack.kubeapi.faults import UNSET, Faults
from devstack.kubeapi.resources import Registry
from devstack.kubeapi.server import EmbeddedApp, KubeHTTPServer
from devstack.kubeapi.store import Store
from shared.crd import cocoonset_crd

ADMIN_TOKEN = "embedded-admin-token"  # noqa: S105 - a fixed local credential; the emulator checks none


class EmbeddedKube:
    def __init__(
        self,
        port: int = 0,
        audit_webhook: str | None = None,
        audit_token: str | None = None,
        *,
        host: str = "127.0.0.1",
        audit_batch_max_size: int = 50,
        audit_batch_max_wait: float = 0.2,
        audit_retries: int = 5,
        audit_backoff: float = 0.1,
        audit_level: str = "Request",
        watch_history: int = 100_000,
        watch_bookmark_interval: float = 60.0,
        event_ttl: float = 3600.0,
    ) -> None:
        self._host = host
        self._port = port
        self.store = Store(window=watch_history)
        self.registry = Registry()
        self.api = Api(self.store, self.registry, bookmark_interval=watch_bookmark_interval)
        self.faults = Faults()
        self.audit = (
            AuditBackend(
                audit_webhook,
                audit_token,
                batch_max_size=audit_batch_max_size,
                batch_max_wait=audit_batch_max_wait,
                retries=audit_retries,
                backoff=audit_backoff,
                level=audit_level,
            )
            if audit_webhook
            else None
        )
        self.app = EmbeddedApp(self.api, self.faults, self.audit, self)
        self.controllers = Controllers(self.api, event_ttl=event_ttl)
        self._server: KubeHTTPServer | None = None
        self._thread: threading.Thread | None = None
        self._crd = cocoonset_crd()

    # -- lifecycle ---------------------------------------------------------------

    def start(self) -> EmbeddedKube:
        if self._server is not None:
            return self
        # Fail here, once, rather than answer 500 to every request a CEL rule guards.
        require_local_extra()
        self._seed()
        self._server = KubeHTTPServer((self._host, self._port), self.app)
        self._thread = threading.Thread(
            target=self._server.serve_forever,
            kwargs={"poll_interval": 0.2},
            name="kubeapi-http",
            daemon=True,
        )
        self._thread.start()
        self.controllers.start()
        if self.audit is not None:
            self.audit.start()
        return self

    def stop(self) -> None:
        if self._server is None:
            return
        self.app.stopping.set()
        with self.store.lock:
            self.store.closed = True
            self.store.changed.notify_all()
        self._server.shutdown()
        self._server.cut_all()
        self._server.server_close()
        self.controllers.stop()
        if self.audit is not None:
            self.audit.stop()
        if self._thread is not None:
            self._thread.join(timeout=5)
        self._server = None

    def __enter__(self) -> EmbeddedKube:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    @property
    def port(self) -> int:
        if self._server is None:
            raise RuntimeError("EmbeddedKube is not started")
        return int(self._server.server_address[1])

    @property
    def url(self) -> str:
        return f"http://{self._host}:{self.port}"

    # -- state -------------------------------------------------------------------

    def _seed(self) -> None:
        ns_rt = self.registry.lookup("", "v1", "namespaces")
        assert ns_rt is not None
        with self.store.lock:
            for ns in SYSTEM_NAMESPACES:
                if self.store.get(ns_rt.storage, ("", ns)) is None:
                    self.api.create(ns_rt, "v1", None, {"metadata": {"name": ns}})
            self.api.install_crd(json.loads(json.dumps(self._crd)))

    def reset(self) -> None:
        """Drop every object (the CocoonSet CRD stays) and the request log."""
        keep = self._crd["metadata"]["name"]
        with self.store.lock:
            for crd_key, crd in self.store.all_items(CRD_STORAGE):
                if crd_key[1] != keep:
                    self.api.crd_removed(crd)
            for storage in self.store.storages():
                if storage == CRD_STORAGE:
                    for crd_key, _ in self.store.all_items(CRD_STORAGE):
                        if crd_key[1] != keep:
                            self.store.drop_storage_key(CRD_STORAGE, crd_key)
                    continue
                self.store.drop_storage(storage)
            self.api.deadlines.clear()
            self.store.forget_history()
            self._seed()
        self.faults.clear()
        self.app.reset_requests()

    def requests(self) -> list[dict[str, Any]]:
        return self.app.requests()

    def reset_requests(self) -> None:
        self.app.reset_requests()

    def add_fault(
        self,
        method: str | None = "PATCH",
        path: str = ".*",
        status: Any = UNSET,
        times: int | None = 1,
        probability: float | None = None,
        retry_after: int | None = None,
        latency_ms: float | None = None,
        cut: bool = False,
    ) -> None:
        """Make matching requests fail. `status` defaults to 500, or to none (latency only)
        when only `latency_ms` is given."""
        self.faults.add(
            method=method,
            path=path,
            status=status,
            times=times,
            probability=probability,
            retry_after=retry_after,
            latency_ms=latency_ms,
            cut=cut,
        )

    def clear_faults(self) -> None:
        self.faults.clear()

    def write_kubeconfig(self, path: str | Path) -> Path:
        """A kubeconfig for the official client and kubectl (plain http, bearer token)."""
        target = Path(path)
        target.parent.mkdir(parents=True, exist_ok=True)
        config = {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": "embedded", "cluster": {"server": self.url}}],
            "users": [{"name": "embedded-admin", "user": {"token": ADMIN_TOKEN}}],
            "contexts": [
                {
                    "name": "embedded",
                    "context": {
                        "cluster": "embedded",
                        "user": "embedded-admin",
                        "namespace": "default",
                    },
                }
            ],
            "current-context": "embedded",
            "preferences": {},
        }
        # Written whole then renamed: a reader polling for the file never sees half of it.
        partial = target.with_name(target.name + ".partial")
        partial.write_text(yaml.safe_dump(config, sort_keys=False))
        partial.replace(target)
        return target


def serve_forever(
    port: int, kubeconfig: Path, audit_webhook: str | None, audit_token: str | None
) -> None:
    """Run the embedded API until SIGINT/SIGTERM (the `devstack kube` command)."""
    stop = threading.Event()

    def _on_signal(signum: int, frame: FrameType | None) -> None:
        stop.set()

    previous = {s: signal.signal(s, _on_signal) for s in (signal.SIGINT, signal.SIGTERM)}
    kube = EmbeddedKube(port=port, audit_webhook=audit_webhook, audit_token=audit_token)
    try:
        kube.start()
        kube.write_kubeconfig(kubeconfig)
        print(f"embedded Kubernetes API on {kube.url}; kubeconfig {kubeconfig}", flush=True)
        while not stop.wait(0.5):
            pass
    finally:
        kube.stop()
        for s, handler in previous.items():
            signal.signal(s, handler)
