"""The controllers a real cluster runs next to the apiserver, reduced to what the
API shows: the garbage collector (ownerReferences; Background, Foreground and
Orphan propagation), the namespace controller (a deleted namespace empties,
then goes) and the expiry of Events (kube-apiserver's --event-ttl, an etcd lease
renewed by every write). Pods with a grace period stay Terminating until a
final delete (the kubelet's, or the cluster simulator's): no kubelet runs here.

One background thread follows the store's event history like a watch; when
the history was compacted under it, it resyncs from the full object set.
"""

from __future__ import annotations

import heapq
import threading
import time
from typing import Any

from devstack.kubeapi.api import Api
from devstack.kubeapi.core import NS_STORAGE, deep_copy
from devstack.kubeapi.resources import ResourceType
from devstack.kubeapi.store import Compacted, Key

# Core Events and events.k8s.io/v1 Events share this storage (resources.py).
EVENTS_STORAGE = "core/events"


class Controllers:
    def __init__(self, api: Api, event_ttl: float = 3600.0) -> None:
        self.api = api
        self.event_ttl = event_ttl
        self.store = api.store
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="kubeapi-controllers", daemon=True)
        self._pos = 0
        self._deadlines: list[tuple[float, str, Key, str]] = []

    def start(self) -> None:
        with self.store.lock:
            self._pos = self.store.end
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        with self.store.lock:
            self.store.changed.notify_all()
        self._thread.join(timeout=5)

    # -- loop -------------------------------------------------------------------

    def _run(self) -> None:
        while not self._stop.is_set():
            self._take_deadlines()
            now = time.time()
            while self._deadlines and self._deadlines[0][0] <= now:
                _, storage, key, rv = heapq.heappop(self._deadlines)
                self.api.expire(storage, key, rv)
            wait = 0.5
            if self._deadlines:
                wait = max(0.0, min(wait, self._deadlines[0][0] - now))
            with self.store.lock:
                try:
                    batch = self.store.events_from(self._pos)
                except Compacted:
                    self._pos = self.store.end
                    self._resync()
                    continue
                if not batch:
                    self.store.changed.wait(wait)
                    continue
                self._pos += len(batch)
                for ev in batch:
                    self._react(ev.type, ev.storage, ev.key, ev.obj)

    def _take_deadlines(self) -> None:
        if self.api.deadline_added.is_set():
            self.api.deadline_added.clear()
            with self.store.lock:
                pending, self.api.deadlines = self.api.deadlines, []
            for d in pending:
                heapq.heappush(self._deadlines, d)

    def _rt(self, storage: str) -> ResourceType | None:
        types = self.api.registry.by_storage(storage)
        core = [t for t in types if not t.group] or types
        return core[0] if core else None

    # -- reactions (store lock held) -------------------------------------------

    def _react(self, kind: str, storage: str, key: Key, obj: dict[str, Any]) -> None:
        meta = obj.get("metadata", {})
        if kind == "DELETED":
            self._owner_gone(str(meta.get("uid")))
            for ref in meta.get("ownerReferences") or []:
                self._maybe_release_foreground(str(ref.get("uid")))
            if key[0]:
                self._maybe_finish_namespace(key[0])
            return
        if storage == EVENTS_STORAGE:
            self.api.schedule_expiry(storage, key, obj, self.event_ttl)
        if kind == "ADDED":
            self._check_dangling(storage, key, obj)
        if meta.get("deletionTimestamp"):
            finalizers = meta.get("finalizers") or []
            if "orphan" in finalizers:
                self._orphan(storage, key, obj)
            elif "foregroundDeletion" in finalizers:
                self._foreground(storage, key, obj)
            if storage == NS_STORAGE:
                self._empty_namespace(key[1])

    def _resync(self) -> None:
        for storage in self.store.storages():
            for key, obj in self.store.all_items(storage):
                self._react("MODIFIED", storage, key, obj)
                self._check_dangling(storage, key, obj)

    def _delete(self, storage: str, key: Key, options: dict[str, Any]) -> None:
        rt = self._rt(storage)
        obj = self.store.get(storage, key)
        if rt is None or obj is None:
            return
        self.api.delete_stored(rt, key, obj, options)
        self._take_deadlines()

    def _owner_gone(self, uid: str) -> None:
        for storage, key in list(self.store.dependents.get(uid, ())):
            obj = self.store.get(storage, key)
            if obj is None:
                continue
            refs = obj.get("metadata", {}).get("ownerReferences") or []
            if not obj["metadata"].get("deletionTimestamp") and all(
                str(r.get("uid")) not in self.store.uids for r in refs
            ):
                self._delete(storage, key, {"propagationPolicy": "Background"})

    def _check_dangling(self, storage: str, key: Key, obj: dict[str, Any]) -> None:
        refs = obj.get("metadata", {}).get("ownerReferences") or []
        if (
            refs
            and not obj["metadata"].get("deletionTimestamp")
            and all(str(r.get("uid")) not in self.store.uids for r in refs)
        ):
            self._delete(storage, key, {"propagationPolicy": "Background"})

    def _strip_finalizer(self, storage: str, key: Key, obj: dict[str, Any], name: str) -> None:
        new = deep_copy(obj)
        new["metadata"]["finalizers"] = [
            f for f in new["metadata"].get("finalizers") or [] if f != name
        ]
        stored = self.store.put(storage, key, new)
        rt = self._rt(storage)
        if rt is not None:
            self.api._finish_if_released(rt, key, stored)

    def _orphan(self, storage: str, key: Key, obj: dict[str, Any]) -> None:
        uid = str(obj["metadata"].get("uid"))
        for dstorage, dkey in list(self.store.dependents.get(uid, ())):
            dep = self.store.get(dstorage, dkey)
            if dep is None:
                continue
            new = deep_copy(dep)
            new["metadata"]["ownerReferences"] = [
                r for r in new["metadata"].get("ownerReferences") or [] if str(r.get("uid")) != uid
            ]
            if not new["metadata"]["ownerReferences"]:
                del new["metadata"]["ownerReferences"]
            self.store.put(dstorage, dkey, new)
        self._strip_finalizer(storage, key, obj, "orphan")

    def _foreground(self, storage: str, key: Key, obj: dict[str, Any]) -> None:
        uid = str(obj["metadata"].get("uid"))
        deps = list(self.store.dependents.get(uid, ()))
        if not deps:
            self._strip_finalizer(storage, key, obj, "foregroundDeletion")
            return
        for dstorage, dkey in deps:
            dep = self.store.get(dstorage, dkey)
            if dep is not None and not dep["metadata"].get("deletionTimestamp"):
                self._delete(dstorage, dkey, {"propagationPolicy": "Foreground"})

    def _maybe_release_foreground(self, owner_uid: str) -> None:
        loc = self.store.uids.get(owner_uid)
        if loc is None:
            return
        owner = self.store.get(*loc)
        if owner is None:
            return
        if "foregroundDeletion" in (
            owner["metadata"].get("finalizers") or []
        ) and not self.store.dependents.get(owner_uid):
            self._strip_finalizer(loc[0], loc[1], owner, "foregroundDeletion")

    def _empty_namespace(self, namespace: str) -> None:
        for storage in self.store.storages():
            if storage == NS_STORAGE:
                continue
            for key in list(self.store.keys_from(storage, namespace, None)):
                obj = self.store.get(storage, key)
                if obj is not None and not obj["metadata"].get("deletionTimestamp"):
                    self._delete(storage, key, {})
        self._maybe_finish_namespace(namespace)

    def _maybe_finish_namespace(self, namespace: str) -> None:
        ns = self.store.get(NS_STORAGE, ("", namespace))
        if ns is None or not ns["metadata"].get("deletionTimestamp"):
            return
        for storage in self.store.storages():
            if (
                storage != NS_STORAGE
                and next(self.store.keys_from(storage, namespace, None), None) is not None
            ):
                return
        self.store.remove(NS_STORAGE, ("", namespace))
