"""The object store: one lock, one store-wide resourceVersion, a watch history.

Invariants
* Every write takes the next resourceVersion (a decimal string, as etcd's
  revision) and appends one event to the history; nothing is ever mutated in
  place: a write replaces the stored dict, so readers may serialise a dict they
  got without holding the lock.
* The history keeps the last `window` events. A list snapshot, a continue token
  or a watch older than the oldest retained event is "compacted" (410 Gone),
  exactly when etcd would have compacted it.
* A list at an older resourceVersion is served from the current objects with
  the later events undone (continue pages stay consistent while writes go on).
"""

from __future__ import annotations

import bisect
import json
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

Key = tuple[str, str]  # (namespace, name); cluster-scoped objects use ""


@dataclass(slots=True, frozen=True)
class Event:
    rv: int
    type: str  # ADDED | MODIFIED | DELETED
    storage: str
    key: Key
    obj: dict[str, Any]
    prev: dict[str, Any] | None


def dumps(obj: Any) -> bytes:
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False).encode()


_LEADING = ("kind", "apiVersion", "metadata", "spec")


def _ordered(obj: dict[str, Any]) -> dict[str, Any]:
    """kind, apiVersion, metadata, spec first, status last: the order Go's encoder writes."""
    out = {k: obj[k] for k in _LEADING if k in obj}
    for k, v in obj.items():
        if k not in out and k != "status":
            out[k] = v
    if "status" in obj:
        out["status"] = obj["status"]
    return out


class Compacted(Exception):
    def __init__(self, requested: int, oldest: int) -> None:
        super().__init__(f"too old resource version: {requested} ({oldest})")
        self.requested = requested
        self.oldest = oldest


class Store:
    def __init__(self, window: int = 100_000) -> None:
        self.lock = threading.RLock()
        self.changed = threading.Condition(self.lock)
        self.window = max(1, window)
        self.rv = 1
        self._objs: dict[str, dict[Key, dict[str, Any]]] = {}
        self._keys: dict[str, list[Key]] = {}
        self._raw: dict[tuple[str, Key], bytes] = {}
        self.history: list[Event] = []
        self.base = 0  # absolute position of history[0]
        self.compacted_rv = 0  # events with rv <= this are gone
        self.uids: dict[str, tuple[str, Key]] = {}
        # owner uid -> dependents (storage, key) naming it in ownerReferences
        self.dependents: dict[str, set[tuple[str, Key]]] = {}
        self.closed = False

    # -- reads ---------------------------------------------------------------

    def get(self, storage: str, key: Key) -> dict[str, Any] | None:
        return self._objs.get(storage, {}).get(key)

    def raw(self, storage: str, key: Key, obj: dict[str, Any]) -> bytes:
        """Cached compact JSON of a stored object (valid while it is current)."""
        cached = self._raw.get((storage, key))
        if cached is None or self._objs.get(storage, {}).get(key) is not obj:
            cached = dumps(obj)
            if self._objs.get(storage, {}).get(key) is obj:
                self._raw[(storage, key)] = cached
        return cached

    def count(self, storage: str) -> int:
        return len(self._objs.get(storage, {}))

    def keys_from(self, storage: str, namespace: str | None, after: Key | None) -> Iterator[Key]:
        """Keys in etcd order ((namespace, name)), strictly after `after`."""
        keys = self._keys.get(storage, [])
        if after is not None:
            start = bisect.bisect_right(keys, after)
        elif namespace is not None:
            start = bisect.bisect_left(keys, (namespace, ""))
        else:
            start = 0
        for i in range(start, len(keys)):
            k = keys[i]
            if namespace is not None and k[0] != namespace:
                if k[0] > namespace:
                    return
                continue
            yield k

    def count_from(self, storage: str, namespace: str | None, key: Key) -> int:
        """How many keys (in `namespace`, or all) sort at or after `key`."""
        keys = self._keys.get(storage, [])
        start = bisect.bisect_left(keys, key)
        if namespace is None:
            return len(keys) - start
        # "\U0010ffff" sorts after every name: the end of this namespace's keys.
        return bisect.bisect_left(keys, (namespace, "\U0010ffff")) - start

    def overrides_since(self, storage: str, rv: int) -> dict[Key, dict[str, Any] | None]:
        """State at `rv` of every key changed after it (None: did not exist then)."""
        if rv < self.compacted_rv:
            raise Compacted(rv, self.compacted_rv + 1)
        out: dict[Key, dict[str, Any] | None] = {}
        for ev in reversed(self.history):
            if ev.rv <= rv:
                break
            if ev.storage == storage:
                out[ev.key] = ev.prev
        return out

    def all_items(self, storage: str) -> list[tuple[Key, dict[str, Any]]]:
        return list(self._objs.get(storage, {}).items())

    def storages(self) -> list[str]:
        return list(self._objs)

    # -- writes (caller holds self.lock) --------------------------------------

    def _next_rv(self) -> int:
        self.rv += 1
        return self.rv

    def _index(
        self, storage: str, key: Key, old: dict[str, Any] | None, new: dict[str, Any] | None
    ) -> None:
        if old is not None:
            for ref in old.get("metadata", {}).get("ownerReferences") or []:
                deps = self.dependents.get(str(ref.get("uid")))
                if deps is not None:
                    deps.discard((storage, key))
                    if not deps:
                        del self.dependents[str(ref.get("uid"))]
            uid = old.get("metadata", {}).get("uid")
            if uid and new is None:
                self.uids.pop(uid, None)
        if new is not None:
            for ref in new.get("metadata", {}).get("ownerReferences") or []:
                self.dependents.setdefault(str(ref.get("uid")), set()).add((storage, key))
            uid = new.get("metadata", {}).get("uid")
            if uid:
                self.uids[uid] = (storage, key)

    def put(self, storage: str, key: Key, obj: dict[str, Any]) -> dict[str, Any]:
        """Store a new version of `obj` (which the store now owns); returns it."""
        bucket = self._objs.setdefault(storage, {})
        prev = bucket.get(key)
        rv = self._next_rv()
        obj.setdefault("metadata", {})["resourceVersion"] = str(rv)
        obj = _ordered(obj)
        bucket[key] = obj
        self._raw.pop((storage, key), None)
        if prev is None:
            bisect.insort(self._keys.setdefault(storage, []), key)
        self._index(storage, key, prev, obj)
        self._record(Event(rv, "ADDED" if prev is None else "MODIFIED", storage, key, obj, prev))
        return obj

    def remove(self, storage: str, key: Key) -> dict[str, Any] | None:
        bucket = self._objs.get(storage, {})
        prev = bucket.pop(key, None)
        if prev is None:
            return None
        self._raw.pop((storage, key), None)
        keys = self._keys[storage]
        del keys[bisect.bisect_left(keys, key)]
        rv = self._next_rv()
        final = dict(prev)
        final["metadata"] = dict(prev.get("metadata", {}), resourceVersion=str(rv))
        self._index(storage, key, prev, None)
        self._record(Event(rv, "DELETED", storage, key, final, prev))
        return final

    def replace_silently(self, storage: str, key: Key, obj: dict[str, Any]) -> None:
        """Swap in an equivalent representation (read-time defaulting); no event."""
        if key in self._objs.get(storage, {}):
            self._objs[storage][key] = obj
            self._raw.pop((storage, key), None)

    def drop_storage(self, storage: str) -> None:
        """Forget every object of a storage at once (CRD removal, reset)."""
        for key, obj in list(self._objs.get(storage, {}).items()):
            self._index(storage, key, obj, None)
        self._objs.pop(storage, None)
        self._keys.pop(storage, None)
        for k in [k for k in self._raw if k[0] == storage]:
            del self._raw[k]

    def drop_storage_key(self, storage: str, key: Key) -> None:
        obj = self._objs.get(storage, {}).pop(key, None)
        if obj is None:
            return
        self._index(storage, key, obj, None)
        keys = self._keys[storage]
        del keys[bisect.bisect_left(keys, key)]
        self._raw.pop((storage, key), None)

    def forget_history(self) -> None:
        """Compact everything up to now (used by reset: old watches and tokens expire)."""
        self.base += len(self.history)
        self.history = []
        self.compacted_rv = self.rv
        self.changed.notify_all()

    def _record(self, ev: Event) -> None:
        self.history.append(ev)
        # Trim in chunks: the window holds between `window` and 1.25x events.
        if len(self.history) > self.window + max(1, self.window // 4):
            drop = len(self.history) - self.window
            self.compacted_rv = self.history[drop - 1].rv
            del self.history[:drop]
            self.base += drop
        self.changed.notify_all()

    # -- watch support ---------------------------------------------------------

    def position_after(self, rv: int) -> int:
        """Absolute history position of the first event with rv > `rv`."""
        if rv < self.compacted_rv:
            raise Compacted(rv, self.compacted_rv + 1)
        lo, hi = 0, len(self.history)
        while lo < hi:
            mid = (lo + hi) // 2
            if self.history[mid].rv <= rv:
                lo = mid + 1
            else:
                hi = mid
        return self.base + lo

    def events_from(self, pos: int) -> list[Event]:
        if pos < self.base:
            raise Compacted(0, self.compacted_rv + 1)
        return self.history[pos - self.base :]

    @property
    def end(self) -> int:
        return self.base + len(self.history)
