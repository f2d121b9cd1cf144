"""The resource registry: which REST resources exist and how discovery shows them.

Built-in types are declared here with the strategy flags kube-apiserver's
registry gives them (status subresource, unconditional update, create on
update, strategic merge support, supported field selectors). Custom resources
are added when a CustomResourceDefinition is created and removed with it.
"""

from __future__ import annotations

import base64
import hashlib
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from devstack.kubeapi.selectors import FieldGetter, path_getter

VERBS_FULL = ("create", "delete", "deletecollection", "get", "list", "patch", "update", "watch")
VERBS_STATUS = ("get", "patch", "update")
# Subresources that only take a POST, and the kind they take.
_CREATE_ONLY = {"binding": "Binding", "eviction": "Eviction"}


@dataclass(slots=True)
class ResourceType:
    group: str
    versions: tuple[str, ...]  # served versions, the first is the storage (preferred) one
    plural: str
    singular: str
    kind: str
    namespaced: bool
    subresources: frozenset[str] = frozenset()
    short_names: tuple[str, ...] = ()
    categories: tuple[str, ...] = ()
    custom: bool = False
    # Per served version: the openAPIV3Schema (custom resources only).
    schemas: dict[str, dict[str, Any]] = field(default_factory=dict)
    printer_columns: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    allow_unconditional_update: bool = True
    allow_create_on_update: bool = False
    # metadata.generation is tracked (and bumped on spec changes).
    has_generation: bool = False
    fields: Mapping[str, FieldGetter] = field(default_factory=dict)
    # Several REST resources may share one storage (core and events.k8s.io Events).
    storage: str = ""
    # Bumped whenever the CRD's schema changes (read-time defaulting keys off it).
    schema_gen: int = 0
    # An immediate DELETE answers the object (the registry's ReturnDeletedObject)
    # rather than a Status: pods and namespaces upstream.
    return_deleted_object: bool = False

    def __post_init__(self) -> None:
        if not self.storage:
            self.storage = f"{self.group}/{self.plural}"

    @property
    def version(self) -> str:
        return self.versions[0]

    def api_version(self, version: str | None = None) -> str:
        v = version or self.version
        return f"{self.group}/{v}" if self.group else v

    @property
    def list_kind(self) -> str:
        return f"{self.kind}List"

    @property
    def strategic_merge(self) -> bool:
        return not self.custom

    def discovery_entries(self) -> list[dict[str, Any]]:
        digest = hashlib.sha256(f"{self.group}/{self.version}/{self.kind}".encode()).digest()
        entry: dict[str, Any] = {
            "name": self.plural,
            "singularName": self.singular,
            "namespaced": self.namespaced,
            "kind": self.kind,
            "verbs": list(VERBS_FULL),
            "storageVersionHash": base64.b64encode(digest[:8]).decode(),
        }
        if self.short_names:
            entry["shortNames"] = list(self.short_names)
        if self.categories:
            entry["categories"] = list(self.categories)
        out = [entry]
        for sub in sorted(self.subresources):
            verbs = ["create"] if sub in _CREATE_ONLY else list(VERBS_STATUS)
            kind = _CREATE_ONLY.get(sub, self.kind)
            out.append(
                {
                    "name": f"{self.plural}/{sub}",
                    "singularName": "",
                    "namespaced": self.namespaced,
                    "kind": kind,
                    "verbs": verbs,
                }
            )
        return out


_META_FIELDS: dict[str, FieldGetter] = {
    "metadata.name": path_getter("metadata.name"),
    "metadata.namespace": path_getter("metadata.namespace"),
}


def _fields(*paths: str, **defaults: str) -> dict[str, FieldGetter]:
    out = dict(_META_FIELDS)
    for p in paths:
        out[p] = path_getter(p, defaults.get(p.replace(".", "_"), ""))
    return out


def builtin_types() -> list[ResourceType]:
    event_fields = _fields(
        "involvedObject.kind",
        "involvedObject.namespace",
        "involvedObject.name",
        "involvedObject.uid",
        "involvedObject.apiVersion",
        "involvedObject.resourceVersion",
        "involvedObject.fieldPath",
        "reason",
        "reportingComponent",
        "source",
        "type",
    )
    event_fields["source"] = path_getter("source.component")
    return [
        ResourceType(
            "",
            ("v1",),
            "namespaces",
            "namespace",
            "Namespace",
            namespaced=False,
            subresources=frozenset({"status", "finalize"}),
            short_names=("ns",),
            fields=_fields("status.phase"),
            return_deleted_object=True,
        ),
        ResourceType(
            "",
            ("v1",),
            "nodes",
            "node",
            "Node",
            namespaced=False,
            subresources=frozenset({"status"}),
            short_names=("no",),
            fields=_fields("spec.unschedulable", spec_unschedulable="false"),
        ),
        ResourceType(
            "",
            ("v1",),
            "pods",
            "pod",
            "Pod",
            namespaced=True,
            subresources=frozenset({"status", "binding", "eviction"}),
            short_names=("po",),
            categories=("all",),
            has_generation=True,
            return_deleted_object=True,
            fields=_fields(
                "spec.nodeName",
                "spec.restartPolicy",
                "spec.schedulerName",
                "spec.serviceAccountName",
                "spec.hostNetwork",
                "status.phase",
                "status.podIP",
                "status.nominatedNodeName",
                spec_hostNetwork="false",
            ),
        ),
        ResourceType(
            "",
            ("v1",),
            "events",
            "event",
            "Event",
            namespaced=True,
            short_names=("ev",),
            allow_create_on_update=True,
            fields=event_fields,
            storage="core/events",
        ),
        ResourceType(
            "",
            ("v1",),
            "configmaps",
            "configmap",
            "ConfigMap",
            namespaced=True,
            short_names=("cm",),
        ),
        ResourceType(
            "",
            ("v1",),
            "secrets",
            "secret",
            "Secret",
            namespaced=True,
        ),
        # Deprecated and empty here, but served: its short name `cs` wins over the
        # CocoonSet CRD's `cs` in kubectl (core group first), as on a real cluster.
        ResourceType(
            "",
            ("v1",),
            "componentstatuses",
            "componentstatus",
            "ComponentStatus",
            namespaced=False,
            short_names=("cs",),
        ),
        ResourceType(
            "",
            ("v1",),
            "serviceaccounts",
            "serviceaccount",
            "ServiceAccount",
            namespaced=True,
            short_names=("sa",),
        ),
        ResourceType(
            "events.k8s.io",
            ("v1",),
            "events",
            "event",
            "Event",
            namespaced=True,
            short_names=("ev",),
            allow_create_on_update=True,
            fields=_fields(
                "regarding.kind",
                "regarding.namespace",
                "regarding.name",
                "regarding.uid",
                "reason",
                "reportingController",
                "type",
            ),
            storage="core/events",
        ),
        ResourceType(
            "coordination.k8s.io",
            ("v1",),
            "leases",
            "lease",
            "Lease",
            namespaced=True,
            allow_create_on_update=True,
        ),
        # metrics-server's PodMetrics (an aggregated API upstream, read-only there).
        # Here the simulator's vk-cocoon writes them (create/update), standing in for
        # the kubelet stats metrics-server scrapes; readers only ever list/get.
        ResourceType(
            "metrics.k8s.io",
            ("v1beta1",),
            "pods",
            "pod",
            "PodMetrics",
            namespaced=True,
            allow_create_on_update=True,
        ),
        ResourceType(
            "apiextensions.k8s.io",
            ("v1",),
            "customresourcedefinitions",
            "customresourcedefinition",
            "CustomResourceDefinition",
            namespaced=False,
            subresources=frozenset({"status"}),
            short_names=("crd", "crds"),
            categories=("api-extensions",),
            has_generation=True,
        ),
    ]


class Registry:
    """Thread-safe map of (group, version, plural) -> ResourceType."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._types: list[ResourceType] = builtin_types()
        self._index: dict[tuple[str, str, str], ResourceType] = {}
        self._reindex()

    def _reindex(self) -> None:
        self._index = {(t.group, v, t.plural): t for t in self._types for v in t.versions}

    def lookup(self, group: str, version: str, plural: str) -> ResourceType | None:
        return self._index.get((group, version, plural))

    def by_storage(self, storage: str) -> list[ResourceType]:
        return [t for t in self._types if t.storage == storage]

    def all(self) -> list[ResourceType]:
        return list(self._types)

    def add_custom(self, rt: ResourceType) -> None:
        with self._lock:
            self._types = [
                t for t in self._types if not (t.group == rt.group and t.plural == rt.plural)
            ]
            self._types.append(rt)
            self._reindex()

    def remove_custom(self, group: str, plural: str) -> None:
        with self._lock:
            self._types = [
                t for t in self._types if not (t.custom and t.group == group and t.plural == plural)
            ]
            self._reindex()

    def find_custom(self, group: str, plural: str) -> ResourceType | None:
        for t in self._types:
            if t.custom and t.group == group and t.plural == plural:
                return t
        return None

    # -- discovery documents --------------------------------------------------

    def groups(self) -> list[tuple[str, list[str]]]:
        """(group, versions) for every non-core group, preferred version first."""
        seen: dict[str, list[str]] = {}
        for t in self._types:
            if not t.group:
                continue
            vs = seen.setdefault(t.group, [])
            for v in t.versions:
                if v not in vs:
                    vs.append(v)
        return sorted(seen.items())

    def resource_list(self, group: str, version: str) -> dict[str, Any] | None:
        types = [t for t in self._types if t.group == group and version in t.versions]
        if not types:
            return None
        resources: list[dict[str, Any]] = []
        for t in sorted(types, key=lambda x: x.plural):
            resources.extend(t.discovery_entries())
        return {
            "kind": "APIResourceList",
            "apiVersion": "v1",
            "groupVersion": f"{group}/{version}" if group else version,
            "resources": resources,
        }

    def group_doc(self, group: str) -> dict[str, Any] | None:
        for name, versions in self.groups():
            if name == group:
                return _group_entry(name, versions) | {"kind": "APIGroup", "apiVersion": "v1"}
        return None

    def group_list(self) -> dict[str, Any]:
        return {
            "kind": "APIGroupList",
            "apiVersion": "v1",
            "groups": [_group_entry(g, vs) for g, vs in self.groups()],
        }


def _group_entry(group: str, versions: list[str]) -> dict[str, Any]:
    gvs = [{"groupVersion": f"{group}/{v}", "version": v} for v in versions]
    return {"name": group, "versions": gvs, "preferredVersion": gvs[0]}


def custom_type_from_crd(crd: Mapping[str, Any], schema_gen: int) -> ResourceType:
    spec = crd["spec"]
    names = spec["names"]
    served = [v for v in spec["versions"] if v.get("served", True)]
    storage = [v for v in served if v.get("storage")] or served[:1]
    ordered = storage + [v for v in served if v is not storage[0]]
    subresources: set[str] = set()
    for v in ordered:
        subresources.update((v.get("subresources") or {}).keys())
    subresources.discard("scale")  # the scale subresource is not emulated
    selectable: dict[str, FieldGetter] = dict(_META_FIELDS)
    for v in ordered:
        for sf in v.get("selectableFields") or []:
            path = str(sf["jsonPath"]).lstrip(".")
            selectable[path] = path_getter(path)
    return ResourceType(
        group=spec["group"],
        versions=tuple(v["name"] for v in ordered),
        plural=names["plural"],
        singular=names.get("singular") or names["kind"].lower(),
        kind=names["kind"],
        namespaced=spec.get("scope", "Namespaced") == "Namespaced",
        subresources=frozenset(subresources),
        short_names=tuple(names.get("shortNames") or ()),
        categories=tuple(names.get("categories") or ()),
        custom=True,
        schemas={
            v["name"]: (v.get("schema") or {}).get("openAPIV3Schema")
            or {"type": "object", "x-kubernetes-preserve-unknown-fields": True}
            for v in ordered
        },
        printer_columns={v["name"]: list(v.get("additionalPrinterColumns") or []) for v in ordered},
        allow_unconditional_update=False,
        allow_create_on_update=False,
        has_generation=True,
        fields=selectable,
        schema_gen=schema_gen,
    )
