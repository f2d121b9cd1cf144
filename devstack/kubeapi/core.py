"""What the embedded API's verb modules share: storage names, the query, the write result,
and the state and object shapes of the API (:class:`ApiCore`).

:class:`devstack.kubeapi.api.Api` is composed of :class:`ApiCore` and the concern
modules built on it (:mod:`~devstack.kubeapi.crds`, :mod:`~devstack.kubeapi.deletion`,
:mod:`~devstack.kubeapi.watch`).
"""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from devstack.kubeapi import builtin, errors
from devstack.kubeapi.resources import Registry, ResourceType
from devstack.kubeapi.selectors import (
    FieldSelector,
    LabelSelector,
    parse_field_selector,
    parse_label_selector,
)
from devstack.kubeapi.store import Key, Store, dumps

SYSTEM_NAMESPACES = ("default", "kube-system", "kube-public", "kube-node-lease")
SA_STORAGE = "/serviceaccounts"
CRD_STORAGE = "apiextensions.k8s.io/customresourcedefinitions"
NS_STORAGE = "/namespaces"


def now_rfc3339(delta: float = 0.0) -> str:
    return (datetime.now(UTC) + timedelta(seconds=delta)).strftime("%Y-%m-%dT%H:%M:%SZ")


def deep_copy(obj: Any) -> Any:
    return json.loads(json.dumps(obj))


@dataclass(slots=True)
class Query:
    label: LabelSelector
    field: FieldSelector
    limit: int
    cont: str
    rv: str
    rv_match: str


@dataclass(slots=True)
class WriteResult:
    code: int
    obj: dict[str, Any]
    warnings: list[str]


class ApiCore:
    """The store, the registry of resource types and what every verb needs to read them."""

    def __init__(
        self, store: Store, registry: Registry, *, bookmark_interval: float = 60.0
    ) -> None:
        self.store = store
        self.registry = registry
        # How often an idle watch that allowed bookmarks gets one (upstream: about a minute).
        self.bookmark_interval = bookmark_interval
        self._schema_gen = 0
        # Expiry deadlines of Events (kube-apiserver --event-ttl: an etcd lease per write):
        # (deadline, storage, key, resourceVersion of the write that set it).
        self.deadlines: list[tuple[float, str, Key, str]] = []
        self.deadline_added = threading.Event()

    # -- shapes ----------------------------------------------------------------

    def served(self, rt: ResourceType, version: str, obj: dict[str, Any]) -> dict[str, Any]:
        if rt.storage == "core/events" and rt.group == "events.k8s.io":
            return builtin.core_event_to_v1(obj)
        if rt.custom and version != rt.version:
            return dict(obj, apiVersion=rt.api_version(version))
        return obj

    def served_raw(self, rt: ResourceType, version: str, key: Key, obj: dict[str, Any]) -> bytes:
        if (rt.custom and version != rt.version) or (rt.group == "events.k8s.io"):
            return dumps(self.served(rt, version, obj))
        return self.store.raw(rt.storage, key, obj)

    def to_storage(self, rt: ResourceType, body: dict[str, Any]) -> dict[str, Any]:
        if rt.group == "events.k8s.io":
            return builtin.v1_event_to_core(body)
        if rt.custom:
            body["apiVersion"] = rt.api_version()
        return body

    # -- helpers ---------------------------------------------------------------

    @staticmethod
    def key(rt: ResourceType, namespace: str | None, name: str) -> Key:
        return (namespace or "", name) if rt.namespaced else ("", name)

    def _get_or_404(self, rt: ResourceType, namespace: str | None, name: str) -> dict[str, Any]:
        obj = self.store.get(rt.storage, self.key(rt, namespace, name))
        if obj is None:
            raise errors.not_found(rt.plural, rt.group, name)
        return obj

    def parse_query(self, rt: ResourceType, q: dict[str, str]) -> Query:
        try:
            limit = int(q.get("limit") or 0)
        except ValueError:
            raise errors.bad_request(f"invalid limit {q.get('limit')!r}") from None
        return Query(
            label=parse_label_selector(q.get("labelSelector")),
            field=parse_field_selector(
                q.get("fieldSelector"), rt.fields, custom_resource=rt.custom
            ),
            limit=max(0, limit),
            cont=q.get("continue", ""),
            rv=q.get("resourceVersion", ""),
            rv_match=q.get("resourceVersionMatch", ""),
        )

    def matches(self, rt: ResourceType, q: Query, obj: dict[str, Any]) -> bool:
        if not q.label.empty and not q.label.matches(obj.get("metadata", {}).get("labels")):
            return False
        return q.field.empty or q.field.matches(obj)
