"""Audit events to a webhook, batched the way kube-apiserver's webhook backend does.

Requests enqueue `audit.k8s.io/v1` Events (stage ResponseComplete, level
Request) into a bounded buffer and never wait: a full buffer drops events.
One thread sends `EventList` batches of at most `batch_max_size` events, or
whatever arrived within `batch_max_wait` seconds, retrying every failed send
(transport error or any non-2xx, as the upstream webhook's `retryOnError` does)
with exponential backoff (factor 1.5, 20% jitter), then dropping the batch.
"""

from __future__ import annotations

import contextlib
import json
import queue
import random
import threading
import time
import urllib.error
import urllib.request
from datetime import UTC, datetime
from typing import Any


def micro_time(ts: float) -> str:
    return datetime.fromtimestamp(ts, UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class AuditBackend:
    def __init__(
        self,
        url: str,
        token: str | None = None,
        *,
        batch_max_size: int = 50,
        batch_max_wait: float = 0.2,
        retries: int = 5,
        backoff: float = 0.1,
        buffer_size: int = 10_000,
        timeout: float = 5.0,
        level: str = "Request",
    ) -> None:
        if level not in ("Metadata", "Request", "RequestResponse"):
            raise ValueError(f"audit level {level!r}: Metadata, Request or RequestResponse")
        self.level = level
        self.url = url
        self.token = token
        self.batch_max_size = batch_max_size
        self.batch_max_wait = batch_max_wait
        self.retries = retries
        self.backoff = backoff
        self.timeout = timeout
        self._queue: queue.Queue[dict[str, Any] | None] = queue.Queue(maxsize=buffer_size)
        self._thread = threading.Thread(target=self._run, name="kubeapi-audit", daemon=True)
        self.dropped = 0
        self.sent = 0

    def start(self) -> None:
        self._thread.start()

    def stop(self, flush_timeout: float = 2.0) -> None:
        """Flush what is queued (bounded by `flush_timeout`), then end the thread."""
        with contextlib.suppress(queue.Full):
            self._queue.put(None, timeout=flush_timeout)
        self._thread.join(timeout=flush_timeout + self.timeout)

    def emit(self, event: dict[str, Any]) -> None:
        try:
            self._queue.put_nowait(event)
        except queue.Full:
            self.dropped += 1

    def _run(self) -> None:
        done = False
        while not done:
            first = self._queue.get()
            if first is None:
                break
            batch = [first]
            deadline = time.monotonic() + self.batch_max_wait
            while len(batch) < self.batch_max_size:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    break
                try:
                    item = self._queue.get(timeout=remaining)
                except queue.Empty:
                    break
                if item is None:
                    done = True
                    break
                batch.append(item)
            self._send(batch)

    def _send(self, batch: list[dict[str, Any]]) -> None:
        body = json.dumps(
            {"kind": "EventList", "apiVersion": "audit.k8s.io/v1", "metadata": {}, "items": batch}
        ).encode()
        headers = {"Content-Type": "application/json"}
        if self.token:
            headers["Authorization"] = f"Bearer {self.token}"
        delay = self.backoff
        for attempt in range(self.retries):
            req = urllib.request.Request(self.url, data=body, headers=headers, method="POST")  # noqa: S310
            try:
                with urllib.request.urlopen(req, timeout=self.timeout) as resp:  # noqa: S310
                    resp.read()
                self.sent += len(batch)
                return
            except (urllib.error.URLError, OSError):
                pass  # HTTPError is a URLError: every failure is retried, as upstream
            if attempt + 1 < self.retries:
                time.sleep(delay * random.uniform(1.0, 1.2))  # noqa: S311 - jitter, not secrets
                delay *= 1.5
        self.dropped += len(batch)
