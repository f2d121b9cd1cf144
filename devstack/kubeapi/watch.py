"""Watches: newline-delimited events from a resourceVersion, as kube-apiserver streams them
(ADDED/MODIFIED/DELETED with selector transitions, 410 for a compacted RV, BOOKMARKs).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from typing import Any

from devstack.kubeapi import errors
from devstack.kubeapi.core import (
    ApiCore,
    Query,
)
from devstack.kubeapi.errors import ApiError
from devstack.kubeapi.resources import ResourceType
from devstack.kubeapi.store import Compacted, dumps


class Watch(ApiCore):
    """The watch verb."""

    def watch(
        self,
        rt: ResourceType,
        version: str,
        namespace: str | None,
        q: Query,
        timeout: float,
        stopped: Callable[[], bool],
        bookmarks: bool = False,
        render: Callable[[dict[str, Any]], bytes] | None = None,
    ) -> Iterator[bytes]:
        """Newline-delimited watch events, as kube-apiserver streams them."""
        deadline = time.monotonic() + timeout
        ns = namespace if rt.namespaced else None
        store = self.store
        with store.lock:
            initial: list[bytes] = []
            if q.rv in ("", "0"):
                for k in store.keys_from(rt.storage, ns, None):
                    obj = store.get(rt.storage, k)
                    if obj is not None and self.matches(rt, q, obj):
                        raw = (
                            render(self.served(rt, version, obj))
                            if render
                            else self.served_raw(rt, version, k, obj)
                        )
                        initial.append(_event_line("ADDED", raw))
                pos = store.end
            else:
                try:
                    start = int(q.rv)
                except ValueError:
                    raise errors.bad_request(f"invalid resource version: {q.rv!r}") from None
                try:
                    pos = store.position_after(start)
                except Compacted as exc:
                    yield _error_line(
                        410, "Expired", f"too old resource version: {exc.requested} ({exc.oldest})"
                    )
                    return
        yield from initial
        last_rv = 0
        # Every event up to `consumed_rv` has been sent or filtered out: a bookmark
        # may name it (a later one could skip events the client never saw).
        consumed_rv = int(q.rv) if q.rv not in ("", "0") else self._rv_at(pos)
        next_mark = time.monotonic() + self.bookmark_interval

        def bookmark() -> bytes:
            mark = {
                "kind": rt.kind,
                "apiVersion": rt.api_version(version),
                "metadata": {"resourceVersion": str(consumed_rv)},
            }
            return _event_line("BOOKMARK", dumps(mark))

        while not stopped() and not store.closed:
            with store.lock:
                try:
                    batch = store.events_from(pos)
                except Compacted as exc:
                    yield _error_line(
                        410, "Expired", f"too old resource version: {last_rv} ({exc.oldest})"
                    )
                    return
                lines: list[bytes] = []
                if not batch:
                    now = time.monotonic()
                    if deadline - now <= 0:
                        break
                    if bookmarks and now >= next_mark:
                        next_mark = now + self.bookmark_interval
                        lines.append(bookmark())
                    else:
                        wait = min(deadline - now, 0.5)
                        if bookmarks:
                            wait = min(wait, max(0.0, next_mark - now))
                        store.changed.wait(wait)
                        continue
                pos += len(batch)
                for ev in batch:
                    consumed_rv = ev.rv
                    if ev.storage != rt.storage or (ns is not None and ev.key[0] != ns):
                        continue
                    last_rv = ev.rv
                    kind = ev.type
                    new_ok = self.matches(rt, q, ev.obj)
                    if kind == "MODIFIED":
                        old_ok = ev.prev is not None and self.matches(rt, q, ev.prev)
                        if new_ok and not old_ok:
                            kind = "ADDED"
                        elif old_ok and not new_ok:
                            kind = "DELETED"
                        elif not new_ok:
                            continue
                    elif not new_ok:
                        continue
                    shown = self.served(rt, version, ev.obj)
                    lines.append(_event_line(kind, render(shown) if render else dumps(shown)))
            yield from lines
            if time.monotonic() >= deadline:
                break
        if bookmarks and not store.closed:
            yield bookmark()

    def _rv_at(self, pos: int) -> int:
        """The resourceVersion a watch positioned at `pos` has caught up to."""
        with self.store.lock:
            idx = pos - self.store.base
            if 0 < idx <= len(self.store.history):
                return self.store.history[idx - 1].rv
            return (
                self.store.rv
                if idx > len(self.store.history) or not self.store.history
                else self.store.compacted_rv
            )


def _event_line(kind: str, raw: bytes) -> bytes:
    return b'{"type":"' + kind.encode() + b'","object":' + raw + b"}\n"


def _error_line(code: int, reason: str, message: str) -> bytes:
    status = ApiError(code, reason, message).status()
    return _event_line("ERROR", dumps(status))
