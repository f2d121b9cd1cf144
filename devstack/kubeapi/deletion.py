"""Deletion as kube-apiserver does it: preconditions, finalizers, pod graceful deletion,
propagation policies (the finalizers the garbage collector works from: see
:mod:`~devstack.kubeapi.controllers`), delete-collection and Event expiry.
"""

from __future__ import annotations

import time
from typing import Any

from devstack.kubeapi import errors
from devstack.kubeapi.core import (
    CRD_STORAGE,
    Query,
    WriteResult,
    deep_copy,
    now_rfc3339,
)
from devstack.kubeapi.crds import CrdLifecycle
from devstack.kubeapi.errors import ApiError
from devstack.kubeapi.resources import ResourceType
from devstack.kubeapi.store import Key, dumps


class Deletion(CrdLifecycle):
    """The delete verbs; deleting a CRD takes its custom resources with it (CrdLifecycle)."""

    def delete(
        self,
        rt: ResourceType,
        version: str,
        namespace: str | None,
        name: str,
        options: dict[str, Any],
        *,
        dry_run: bool = False,
    ) -> WriteResult:
        with self.store.lock:
            key = self.key(rt, namespace, name)
            old = self.store.get(rt.storage, key)
            if old is None:
                raise errors.not_found(rt.plural, rt.group, name)
            pre = options.get("preconditions") or {}
            meta = old["metadata"]
            # The storage layer's wording (apiserver/pkg/storage: Preconditions.Check),
            # naming the object by Kind (group-qualified for custom resources).
            on = f"{rt.kind}.{rt.group}" if rt.group else rt.kind
            if pre.get("uid") and pre["uid"] != meta.get("uid"):
                raise ApiError(
                    409,
                    "Conflict",
                    f'Operation cannot be fulfilled on {on} "{name}": the UID in the '
                    f"precondition ({pre['uid']}) does not match the UID in record "
                    f"({meta.get('uid')}). The object might have been deleted and then recreated",
                    name=name,
                    group=rt.group,
                    kind=rt.kind,
                )
            if pre.get("resourceVersion") and pre["resourceVersion"] != meta.get("resourceVersion"):
                raise ApiError(
                    409,
                    "Conflict",
                    f'Operation cannot be fulfilled on {on} "{name}": the ResourceVersion in the '
                    f"precondition ({pre['resourceVersion']}) does not match the ResourceVersion "
                    f"in record ({meta.get('resourceVersion')}). The object might have been "
                    "modified",
                    name=name,
                    group=rt.group,
                    kind=rt.kind,
                )
            if dry_run:
                return WriteResult(200, self.served(rt, version, old), [])
            final = self.delete_stored(rt, key, old, options)
            if rt.storage == CRD_STORAGE and self.store.get(rt.storage, key) is None:
                self.crd_removed(old)
            if self.store.get(rt.storage, key) is None and not rt.return_deleted_object:
                # Gone at once: most registries answer a Status naming what was deleted.
                details = {"name": name, "kind": rt.plural, "uid": meta.get("uid")}
                if rt.group:
                    details["group"] = rt.group
                status = {
                    "kind": "Status",
                    "apiVersion": "v1",
                    "metadata": {},
                    "status": "Success",
                    "details": details,
                }
                return WriteResult(200, status, [])
            return WriteResult(200, self.served(rt, version, final), [])

    def delete_stored(
        self, rt: ResourceType, key: Key, old: dict[str, Any], options: dict[str, Any]
    ) -> dict[str, Any]:
        """Delete (or start deleting) a stored object; caller holds the lock."""
        meta = old["metadata"]
        policy = options.get("propagationPolicy")
        if options.get("orphanDependents") is True and not policy:
            policy = "Orphan"
        finalizers = list(meta.get("finalizers") or [])
        add: list[str] = []
        if policy == "Orphan" and "orphan" not in finalizers:
            add.append("orphan")
        elif policy == "Foreground" and "foregroundDeletion" not in finalizers:
            add.append("foregroundDeletion")
        is_pod = rt.plural == "pods" and not rt.group
        is_namespace = rt.plural == "namespaces" and not rt.group
        grace = 0
        if is_pod:
            requested = options.get("gracePeriodSeconds")
            grace = (
                int(requested)
                if requested is not None
                else int(old.get("spec", {}).get("terminationGracePeriodSeconds", 30) or 0)
            )
            phase = old.get("status", {}).get("phase")
            if not old.get("spec", {}).get("nodeName") or phase in ("Succeeded", "Failed"):
                grace = 0
            grace = max(grace, 0)
        if is_namespace:
            if meta.get("deletionTimestamp"):
                return old
            new = deep_copy(old)
            new["metadata"]["deletionTimestamp"] = now_rfc3339()
            new["metadata"]["deletionGracePeriodSeconds"] = 0
            new.setdefault("status", {})["phase"] = "Terminating"
            stored = self.store.put(rt.storage, key, new)
            self._after_write(rt, old, stored)
            return stored
        if not finalizers and not add and grace == 0:
            if is_pod:
                return self._delete_pod_now(rt, key, old)
            final = self.store.remove(rt.storage, key)
            assert final is not None
            return final
        new = deep_copy(old)
        nmeta = new["metadata"]
        if add:
            nmeta["finalizers"] = finalizers + add
        if not meta.get("deletionTimestamp"):
            if rt.has_generation:
                nmeta["generation"] = int(meta.get("generation") or 0) + 1
            nmeta["deletionTimestamp"] = now_rfc3339(grace)
            nmeta["deletionGracePeriodSeconds"] = grace
        else:
            current = int(meta.get("deletionGracePeriodSeconds") or 0)
            if grace < current:
                nmeta["deletionTimestamp"] = now_rfc3339(grace)
                nmeta["deletionGracePeriodSeconds"] = grace
            elif not add:
                return old  # a repeated delete changes nothing
        if is_pod and grace == 0 and not (nmeta.get("finalizers") or []):
            return self._delete_pod_now(rt, key, old)
        # A pod with grace left stays Terminating until the kubelet's final delete
        # (grace 0) or a shorter delete: the API server never ends it by itself.
        stored = self.store.put(rt.storage, key, new)
        self._after_write(rt, old, stored)
        return stored

    def _delete_pod_now(self, rt: ResourceType, key: Key, old: dict[str, Any]) -> dict[str, Any]:
        """A pod deleted with no grace left: pods always delete gracefully upstream, so
        the deletion stamp (grace 0) is written first — watchers see MODIFIED, then
        DELETED — and the answer is the stamped pod."""
        new = deep_copy(old)
        meta = new["metadata"]
        if not meta.get("deletionTimestamp"):
            if rt.has_generation:
                meta["generation"] = int(meta.get("generation") or 0) + 1
            meta["deletionTimestamp"] = now_rfc3339()
        meta["deletionGracePeriodSeconds"] = 0
        self.store.put(rt.storage, key, new)
        final = self.store.remove(rt.storage, key)
        assert final is not None
        return final

    def _finish_if_released(
        self, rt: ResourceType, key: Key, obj: dict[str, Any]
    ) -> dict[str, Any]:
        """An object being deleted goes once its last finalizer is gone (and grace is over)."""
        meta = obj["metadata"]
        if not meta.get("deletionTimestamp") or meta.get("finalizers"):
            return obj
        if rt.plural == "namespaces" and not rt.group:
            return obj
        if int(meta.get("deletionGracePeriodSeconds") or 0) > 0:
            # A terminating pod, even one whose status says Succeeded/Failed, waits for the
            # kubelet's final delete (grace 0), as on a real API server.
            return obj
        final = self.store.remove(rt.storage, key)
        return final or obj

    def schedule_expiry(self, storage: str, key: Key, obj: dict[str, Any], ttl: float) -> None:
        """An Event write (create or update) lives `ttl` seconds more, as with --event-ttl."""
        rv = str(obj["metadata"].get("resourceVersion"))
        self.deadlines.append((time.time() + ttl, storage, key, rv))
        self.deadline_added.set()

    def expire(self, storage: str, key: Key, rv: str) -> None:
        """The lease of the write with resourceVersion `rv` ran out: the object goes
        (watchers see DELETED), unless a later write renewed it."""
        with self.store.lock:
            obj = self.store.get(storage, key)
            if obj is None or str(obj["metadata"].get("resourceVersion")) != rv:
                return
            self.store.remove(storage, key)

    def delete_collection(
        self,
        rt: ResourceType,
        version: str,
        namespace: str | None,
        q: Query,
        options: dict[str, Any],
    ) -> bytes:
        with self.store.lock:
            deleted: list[dict[str, Any]] = []
            for k in list(
                self.store.keys_from(rt.storage, namespace if rt.namespaced else None, None)
            ):
                obj = self.store.get(rt.storage, k)
                if obj is None or not self.matches(rt, q, obj):
                    continue
                deleted.append(self.served(rt, version, self.delete_stored(rt, k, obj, options)))
            head = {
                "kind": rt.list_kind,
                "apiVersion": rt.api_version(version),
                "metadata": {"resourceVersion": str(self.store.rv)},
                "items": deleted,
            }
            return dumps(head)
