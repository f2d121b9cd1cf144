"""REST semantics of kube-apiserver over the store: the verbs, their strategies.

Each public method is one verb on one resource type and runs its whole
read-decide-write under the store lock, so concurrent requests serialise the
way etcd transactions do (resourceVersion preconditions are checked against the
object being replaced). Served shapes (custom resource versions, the
events.k8s.io view of Events) are converted at the edge: the store keeps one
storage form per object.

:class:`Api` holds the reads and the writes (create, update, patch, binding,
eviction) and is composed of the other concerns: :mod:`~devstack.kubeapi.deletion`
(graceful deletion, finalizers, propagation, Event expiry),
:mod:`~devstack.kubeapi.crds` (the CRD lifecycle) and :mod:`~devstack.kubeapi.watch`,
all on :class:`~devstack.kubeapi.core.ApiCore` (the state and object shapes).
"""

from __future__ import annotations

import base64
import heapq
import json
import random
import uuid
from collections.abc import Iterator
from typing import Any

from devstack.kubeapi import builtin, errors, patch, schema
from devstack.kubeapi.core import (
    CRD_STORAGE,
    NS_STORAGE,
    SA_STORAGE,
    Query,
    WriteResult,
    deep_copy,
    now_rfc3339,
)
from devstack.kubeapi.deletion import Deletion
from devstack.kubeapi.errors import ApiError, Cause
from devstack.kubeapi.resources import ResourceType
from devstack.kubeapi.selectors import (
    LABEL_KEY,
    LABEL_VALUE,
)
from devstack.kubeapi.store import Compacted, Key, dumps
from devstack.kubeapi.watch import Watch
from shared.names import is_dns1123_label, is_dns1123_subdomain

PATCH_TYPES_CUSTOM = [
    "application/json-patch+json",
    "application/merge-patch+json",
    "application/apply-patch+yaml",
]
PATCH_TYPES_BUILTIN = [*PATCH_TYPES_CUSTOM, "application/strategic-merge-patch+json"]

_GENERATE_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"
_EXPIRED_CONTINUE = (
    "The provided continue parameter is too old to display a consistent list result. "
    "You can start a new list without the continue parameter, or use the continue token "
    "in this response to retrieve the remainder of the results. Continuing with the provided "
    "token results in an inconsistent list - objects that were created, modified, or deleted "
    "between the time the first chunk was returned and now may show up in the list."
)


def _too_large_resource_version(wanted: int, current: int) -> ApiError:
    return ApiError(
        504,
        "Timeout",
        # errors.NewTimeoutError prefixes "Timeout: " to the message.
        f"Timeout: Too large resource version: {wanted}, current: {current}",
        retry_after=1,
        causes=[
            Cause(
                "ResourceVersionTooLarge",
                f"Too large resource version: {wanted}, current: {current}",
            )
        ],
    )


def validate_list_options(q: Query) -> None:
    """ValidateListOptions for a LIST (not a watch), as kube-apiserver: a 422 Invalid on
    `ListOptions.meta.k8s.io` listing every broken rule
    (k8s.io/apimachinery/pkg/apis/meta/internalversion/validation/validation.go)."""
    if not q.rv_match:
        return
    where = "resourceVersionMatch"
    causes: list[Cause] = []
    if not q.rv:
        causes.append(
            Cause(
                "FieldValueForbidden",
                "Forbidden: resourceVersionMatch is forbidden unless resourceVersion is provided",
                where,
            )
        )
    if q.cont:
        causes.append(
            Cause(
                "FieldValueForbidden",
                "Forbidden: resourceVersionMatch is forbidden when continue is provided",
                where,
            )
        )
    if q.rv_match not in ("Exact", "NotOlderThan"):
        causes.append(
            Cause(
                "FieldValueNotSupported",
                f'Unsupported value: "{q.rv_match}": supported values: "Exact", "NotOlderThan", ""',
                where,
            )
        )
    if q.rv_match == "Exact" and q.rv == "0":
        causes.append(
            Cause(
                "FieldValueForbidden",
                'Forbidden: resourceVersionMatch "exact" is forbidden for resourceVersion "0"',
                where,
            )
        )
    if causes:
        raise errors.invalid("ListOptions", "meta.k8s.io", "", causes)


class Api(Watch, Deletion):
    """Every verb on every resource type: reads and writes here, the rest by concern."""

    def _require_namespace(
        self, rt: ResourceType, namespace: str | None, name: str, creating: bool
    ) -> None:
        if not rt.namespaced or namespace is None:
            return
        ns = self.store.get(NS_STORAGE, ("", namespace))
        if ns is None:
            raise errors.not_found("namespaces", "", namespace)
        if creating and ns.get("metadata", {}).get("deletionTimestamp"):
            raise ApiError(
                403,
                "Forbidden",
                f'{errors.qualified(rt.plural, rt.group)} "{name}" is forbidden: unable to '
                "create new "
                f"content in namespace {namespace} because it is being terminated",
                name=name,
                group=rt.group,
                kind=rt.plural,
                causes=[
                    Cause(
                        "NamespaceTerminating",
                        f"namespace {namespace} is being terminated",
                        "metadata.namespace",
                    )
                ],
            )

    # -- reads -----------------------------------------------------------------

    def get(self, rt: ResourceType, version: str, namespace: str | None, name: str) -> bytes:
        with self.store.lock:
            if (
                rt.namespaced
                and namespace is not None
                and self.store.get(NS_STORAGE, ("", namespace)) is None
            ):
                # Real apiserver answers a plain NotFound for the object itself here.
                raise errors.not_found(rt.plural, rt.group, name)
            obj = self._get_or_404(rt, namespace, name)
            return self.served_raw(rt, version, self.key(rt, namespace, name), obj)

    def get_obj(
        self, rt: ResourceType, version: str, namespace: str | None, name: str
    ) -> dict[str, Any]:
        with self.store.lock:
            return self.served(rt, version, self._get_or_404(rt, namespace, name))

    def list_objects(
        self, rt: ResourceType, version: str, namespace: str | None, q: Query
    ) -> tuple[list[dict[str, Any]], bytes]:
        """(items in served form, the List JSON) honouring selectors and pagination.

        resourceVersion / resourceVersionMatch as kube-apiserver reads them for a LIST
        (k8s.io/apiserver/pkg/storage/cacher/cacher.go, GetList): unset is the newest
        state; `Exact` is the state at that revision; `NotOlderThan` (and a bare non-zero
        resourceVersion) is any state at or after it, which this store, never behind,
        answers with its newest. A revision the store has not reached yet is a 504
        "Too large resource version" (kube-apiserver answers so after waiting up to 3 s
        for its watch cache: nothing here is ever behind, so it answers at once).
        """
        validate_list_options(q)
        start_after: Key | None = None
        with self.store.lock:
            current_rv = self.store.rv
            snapshot_rv = current_rv
            if q.cont:
                try:
                    token = json.loads(base64.b64decode(q.cont + "=" * (-len(q.cont) % 4)))
                    snapshot_rv = int(token["rv"])
                    ns_part, _, name_part = str(token["start"]).rstrip("\x00").partition("/")
                    start_after = (ns_part, name_part)
                except (ValueError, KeyError, TypeError):
                    raise errors.bad_request(
                        "continue key is not valid: incorrect encoded start resourceVersion "
                        "(version meta.k8s.io/v1)"
                    ) from None
            elif q.rv and q.rv != "0":
                try:
                    wanted = int(q.rv)
                except ValueError:
                    raise errors.bad_request(f"invalid resource version: {q.rv!r}") from None
                if wanted > current_rv:
                    raise _too_large_resource_version(wanted, current_rv)
                if q.rv_match == "Exact":
                    snapshot_rv = wanted
            try:
                overrides = (
                    self.store.overrides_since(rt.storage, snapshot_rv)
                    if snapshot_rv != current_rv
                    else {}
                )
            except Compacted:
                if q.cont:
                    raise errors.gone(_EXPIRED_CONTINUE) from None
                raise errors.gone(
                    f"too old resource version: {snapshot_rv} ({self.store.compacted_rv + 1})"
                ) from None
            items: list[tuple[Key, dict[str, Any]]] = []
            more = False
            remaining = 0
            last_key: Key | None = None
            ns_scope = namespace if rt.namespaced else None
            candidates = self._snapshot_keys(rt, namespace, start_after, overrides)
            for k in candidates:
                obj = overrides[k] if k in overrides else self.store.get(rt.storage, k)
                if obj is None or not self.matches(rt, q, obj):
                    continue
                if q.limit and len(items) >= q.limit:
                    more = True
                    if q.label.empty and q.field.empty and not overrides:
                        # this item and every key after it (counted by bisection)
                        remaining = self.store.count_from(rt.storage, ns_scope, k)
                    elif q.label.empty and q.field.empty:
                        remaining = 1 + sum(
                            1
                            for k2 in candidates
                            if (
                                overrides[k2] if k2 in overrides else self.store.get(rt.storage, k2)
                            )
                            is not None
                        )
                    break
                items.append((k, obj))
                last_key = k
            raws = [
                self.served_raw(rt, version, k, o)
                if k not in overrides
                else dumps(self.served(rt, version, o))
                for k, o in items
            ]
        meta: dict[str, Any] = {"resourceVersion": str(snapshot_rv)}
        if more and last_key is not None:
            token = {
                "v": "meta.k8s.io/v1",
                "rv": snapshot_rv,
                "start": f"{last_key[0]}/{last_key[1]}\x00",
            }
            meta["continue"] = base64.b64encode(dumps(token)).decode()
            if remaining:
                meta["remainingItemCount"] = remaining
        head = {
            "kind": rt.list_kind,
            "apiVersion": rt.api_version(version),
            "metadata": meta,
        }
        body = dumps(head)[:-1] + b',"items":[' + b",".join(raws) + b"]}"
        return [self.served(rt, version, o) for _, o in items], body

    def _snapshot_keys(
        self, rt: ResourceType, namespace: str | None, after: Key | None, overrides: dict[Key, Any]
    ) -> Iterator[Key]:
        ns = namespace if rt.namespaced else None
        if not overrides:
            yield from self.store.keys_from(rt.storage, ns, after)
            return
        extra = sorted(
            k for k in overrides if (ns is None or k[0] == ns) and (after is None or k > after)
        )
        current = self.store.keys_from(rt.storage, ns, after)
        # merge two sorted streams without duplicates
        last: Key | None = None
        for k in heapq.merge(current, iter(extra)):
            if k != last:
                yield k
                last = k

    # -- writes ----------------------------------------------------------------

    def create(
        self,
        rt: ResourceType,
        version: str,
        namespace: str | None,
        body: Any,
        *,
        dry_run: bool = False,
        strict: bool = False,
    ) -> WriteResult:
        if not isinstance(body, dict):
            raise errors.bad_request("the object provided is unrecognized (must be of type map)")
        self._check_kind(rt, version, body)
        body = deep_copy(body)
        meta = body.get("metadata")
        if not isinstance(meta, dict):
            meta = body["metadata"] = {}
        if rt.namespaced:
            if meta.get("namespace") and namespace and meta["namespace"] != namespace:
                raise errors.bad_request(
                    "the namespace of the provided object does not match the namespace sent "
                    "on the request"
                )
            if namespace:
                meta["namespace"] = namespace
            if not meta.get("namespace"):
                raise errors.bad_request("the server could not find the requested resource")
            namespace = meta["namespace"]
        else:
            meta.pop("namespace", None)
        with self.store.lock:
            name = meta.get("name") or ""
            if not name and meta.get("generateName"):
                for _ in range(16):
                    candidate = str(meta["generateName"]) + "".join(
                        random.choices(_GENERATE_ALPHABET, k=5)  # noqa: S311 - names, not secrets
                    )
                    if self.store.get(rt.storage, self.key(rt, namespace, candidate)) is None:
                        name = candidate
                        break
                meta["name"] = name
            if not name:
                raise errors.invalid(
                    rt.kind,
                    rt.group,
                    "",
                    [
                        Cause(
                            "FieldValueRequired",
                            "Required value: name or generateName is required",
                            "metadata.name",
                        )
                    ],
                )
            self._require_namespace(rt, namespace, name, creating=True)
            key = self.key(rt, namespace, name)
            if self.store.get(rt.storage, key) is not None:
                raise errors.already_exists(rt.plural, rt.group, name)
            obj = self.to_storage(rt, body)
            meta = obj["metadata"]
            for k in (
                "resourceVersion",
                "deletionTimestamp",
                "deletionGracePeriodSeconds",
                "selfLink",
                "managedFields",
            ):
                meta.pop(k, None)
            meta["uid"] = str(uuid.uuid4())
            meta["creationTimestamp"] = now_rfc3339()
            if rt.has_generation:
                meta["generation"] = 1
            else:
                meta.pop("generation", None)
            obj.setdefault("apiVersion", rt.api_version())
            obj.setdefault("kind", rt.kind)
            warnings = self._prepare_create(rt, obj, strict=strict)
            if dry_run:
                meta["resourceVersion"] = ""
                return WriteResult(201, self.served(rt, version, obj), warnings)
            stored = self.store.put(rt.storage, key, obj)
            self._after_write(rt, None, stored)
            if rt.storage == NS_STORAGE:
                self._default_service_account(name)
            return WriteResult(201, self.served(rt, version, stored), warnings)

    def _default_service_account(self, namespace: str) -> None:
        """What kube-controller-manager's ServiceAccount controller does for a new
        namespace, done at once: its `default` ServiceAccount (pods need it to be admitted)."""
        sa_rt = self.registry.lookup("", "v1", "serviceaccounts")
        if sa_rt is None or self.store.get(sa_rt.storage, (namespace, "default")) is not None:
            return
        self.create(sa_rt, "v1", namespace, {"metadata": {"name": "default"}})

    def _admit_service_account(self, pod: dict[str, Any]) -> None:
        """The ServiceAccount admission plugin: a pod runs as an existing ServiceAccount
        (`default` unless named), or it is refused with 403."""
        spec = pod.get("spec")
        if not isinstance(spec, dict):
            return
        name = str(spec.get("serviceAccountName") or spec.get("serviceAccount") or "default")
        spec["serviceAccountName"] = name
        spec["serviceAccount"] = name
        namespace = str(pod["metadata"].get("namespace") or "")
        if self.store.get(SA_STORAGE, (namespace, name)) is None:
            pod_name = pod["metadata"].get("name") or ""
            raise ApiError(
                403,
                "Forbidden",
                f'pods "{pod_name}" is forbidden: error looking up service account '
                f'{namespace}/{name}: serviceaccount "{name}" not found',
                name=pod_name,
                group="",
                kind="pods",
            )

    def _check_kind(self, rt: ResourceType, version: str, body: dict[str, Any]) -> None:
        kind = body.get("kind")
        if kind and kind != rt.kind:
            raise errors.bad_request(
                f"the API version in the data ({body.get('apiVersion')}) does not match the "
                f"expected API version ({rt.api_version(version)})"
                if body.get("apiVersion") != rt.api_version(version)
                else f"the kind in the data ({kind}) does not match the expected kind ({rt.kind})"
            )

    def _prepare_create(self, rt: ResourceType, obj: dict[str, Any], *, strict: bool) -> list[str]:
        meta = obj["metadata"]
        name = str(meta["name"])
        causes = self._validate_meta(rt, meta)
        warnings: list[str] = []
        if rt.plural == "pods" and not rt.group:
            obj.pop("status", None)
            builtin.default_pod(obj)
            # Admission (mutating, then its check) runs before the pod's validation upstream.
            self._admit_service_account(obj)
            builtin.drop_empty_scheduling_gates(obj)
            obj["status"] = {"phase": "Pending", "qosClass": builtin.qos_class(obj)}
            builtin.apply_scheduling_gated_condition(obj, now_rfc3339())
            causes += builtin.validate_pod(obj)
            causes += builtin.validate_pod_create(obj)
        elif rt.plural == "secrets" and not rt.group:
            builtin.fold_string_data(obj)
        elif rt.plural == "namespaces" and not rt.group:
            obj["spec"] = {"finalizers": ["kubernetes"]}
            obj["status"] = {"phase": "Active"}
            meta.setdefault("labels", {})["kubernetes.io/metadata.name"] = name
        elif rt.group == "events.k8s.io":
            builtin.check_micro_time(obj, rt.kind)
            causes += builtin.validate_v1_event(builtin.core_event_to_v1(obj))
        elif rt.storage == "core/events":
            builtin.check_micro_time(obj, rt.kind)
            causes += builtin.validate_core_event(obj)
        elif rt.storage == CRD_STORAGE:
            causes += self._validate_crd(obj)
            obj["status"] = self._crd_status(obj)
        elif rt.custom:
            if "status" in rt.subresources:
                obj.pop("status", None)
            obj, warnings, more = self._custom_schema(rt, obj, None, strict=strict)
            causes += more
        if causes:
            raise errors.invalid(rt.kind, rt.group, name, causes)
        return warnings

    def _custom_schema(
        self, rt: ResourceType, obj: dict[str, Any], old: dict[str, Any] | None, *, strict: bool
    ) -> tuple[dict[str, Any], list[str], list[Cause]]:
        sch = rt.schemas.get(rt.version) or {}
        processed, unknown, causes = schema.process(obj, old, sch)
        if unknown and strict:
            raise errors.bad_request(
                f'{rt.kind} in version "{rt.version}" cannot be handled as a {rt.kind}: strict '
                "decoding error: " + ", ".join(f'unknown field "{u}"' for u in unknown)
            )
        obj.clear()
        obj.update(processed)
        return obj, [f'unknown field "{u}"' for u in unknown], causes

    def _validate_meta(self, rt: ResourceType, meta: dict[str, Any]) -> list[Cause]:
        name = str(meta.get("name", ""))
        causes: list[Cause] = []
        if rt.plural == "namespaces" and not rt.group:
            if not is_dns1123_label(name):
                causes.append(
                    Cause(
                        "FieldValueInvalid",
                        f'Invalid value: "{name}": a lowercase RFC 1123 label must consist of '
                        "lower case alphanumeric "
                        "characters or '-', and must start and end with an alphanumeric "
                        "character (e.g. 'my-name',  "
                        "or '123-abc', regex used for validation is "
                        "'[a-z0-9]([-a-z0-9]*[a-z0-9])?')",
                        "metadata.name",
                    )
                )
        elif rt.storage != CRD_STORAGE and not is_dns1123_subdomain(name):
            causes.append(
                Cause(
                    "FieldValueInvalid",
                    f'Invalid value: "{name}": a lowercase RFC 1123 subdomain must consist of '
                    "lower case alphanumeric "
                    "characters, '-' or '.', and must start and end with an alphanumeric "
                    "character (e.g. "
                    "'example.com', regex used for validation is "
                    "'[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')",
                    "metadata.name",
                )
            )
        labels = meta.get("labels") or {}
        if not isinstance(labels, dict):
            causes.append(
                Cause("FieldValueInvalid", "Invalid value: labels must be a map", "metadata.labels")
            )
        else:
            for k, v in labels.items():
                if not LABEL_KEY.match(str(k)) or len(str(k).rsplit("/", 1)[-1]) > 63:
                    causes.append(
                        Cause(
                            "FieldValueInvalid",
                            f'Invalid value: "{k}": name part must consist of alphanumeric '
                            "characters, '-', '_' or '.', and must start and end with an "
                            "alphanumeric character",
                            "metadata.labels",
                        )
                    )
                if not isinstance(v, str) or len(v) > 63 or not LABEL_VALUE.match(v):
                    causes.append(
                        Cause(
                            "FieldValueInvalid",
                            f'Invalid value: "{v}": a valid label must be an empty string or '
                            "consist of alphanumeric "
                            "characters, '-', '_' or '.', and must start and end with an "
                            "alphanumeric character",
                            "metadata.labels",
                        )
                    )
        for i, ref in enumerate(meta.get("ownerReferences") or []):
            for f in ("apiVersion", "kind", "name", "uid"):
                if not isinstance(ref, dict) or not ref.get(f):
                    causes.append(
                        Cause(
                            "FieldValueRequired",
                            "Required value",
                            f"metadata.ownerReferences[{i}].{f}",
                        )
                    )
        return causes

    def update(
        self,
        rt: ResourceType,
        version: str,
        namespace: str | None,
        name: str,
        body: Any,
        *,
        subresource: str = "",
        dry_run: bool = False,
        strict: bool = False,
        precondition_checked: bool = False,
    ) -> WriteResult:
        if not isinstance(body, dict):
            raise errors.bad_request("the object provided is unrecognized (must be of type map)")
        self._check_kind(rt, version, body)
        body = deep_copy(body)
        meta = body.setdefault("metadata", {})
        if meta.get("name") and meta["name"] != name:
            raise errors.bad_request(
                f"the name of the object ({meta['name']}) does not match the name on the URL "
                f"({name})"
            )
        if rt.namespaced and meta.get("namespace") and namespace and meta["namespace"] != namespace:
            raise errors.bad_request(
                "the namespace of the provided object does not match the namespace sent on "
                "the request"
            )
        with self.store.lock:
            key = self.key(rt, namespace, name)
            old = self.store.get(rt.storage, key)
            if old is None:
                if rt.allow_create_on_update and not subresource:
                    meta["name"] = name
                    return self.create(rt, version, namespace, body, dry_run=dry_run, strict=strict)
                raise errors.not_found(rt.plural, rt.group, name)
            rv = str(meta.get("resourceVersion") or "")
            if not precondition_checked:
                if not rv and not rt.allow_unconditional_update:
                    raise errors.invalid(
                        rt.kind,
                        rt.group,
                        name,
                        [
                            Cause(
                                "FieldValueInvalid",
                                "Invalid value: 0: must be specified for an update",
                                "metadata.resourceVersion",
                            )
                        ],
                    )
                if rv and rv != old["metadata"]["resourceVersion"]:
                    raise errors.stale(rt.plural, rt.group, name)
            sent_uid = meta.get("uid")
            if sent_uid and sent_uid != old["metadata"].get("uid"):
                # An update without a uid keeps the stored one; a different one is refused.
                raise errors.invalid(
                    rt.kind,
                    rt.group,
                    name,
                    [
                        Cause(
                            "FieldValueInvalid",
                            f"Invalid value: {json.dumps(sent_uid)}: field is immutable",
                            "metadata.uid",
                        )
                    ],
                )
            new = self.to_storage(rt, body)
            new = self._merge_strategy(rt, subresource, new, old)
            warnings = self._prepare_update(rt, new, old, subresource, strict=strict)
            if _same(new, old):
                return WriteResult(200, self.served(rt, version, old), warnings)
            if dry_run:
                return WriteResult(200, self.served(rt, version, new), warnings)
            stored = self.store.put(rt.storage, key, new)
            self._after_write(rt, old, stored)
            final = self._finish_if_released(rt, key, stored)
            return WriteResult(200, self.served(rt, version, final), warnings)

    def _merge_strategy(
        self, rt: ResourceType, subresource: str, new: dict[str, Any], old: dict[str, Any]
    ) -> dict[str, Any]:
        """What an update may change: spec vs status vs metadata, per upstream strategies."""
        old_meta = old["metadata"]
        if subresource == "status":
            result: dict[str, Any] = deep_copy(old)
            if "status" in new:
                result["status"] = new["status"]
            else:
                result.pop("status", None)
            if not rt.custom:
                # pods/status (and nodes/status) may still change labels and annotations upstream
                for f in ("labels", "annotations"):
                    if f in new.get("metadata", {}):
                        result["metadata"][f] = new["metadata"][f]
                    else:
                        result["metadata"].pop(f, None)
            return result
        meta = new.setdefault("metadata", {})
        for f in (
            "uid",
            "creationTimestamp",
            "deletionTimestamp",
            "deletionGracePeriodSeconds",
            "generation",
            "namespace",
            "name",
            "resourceVersion",
        ):
            if f in old_meta:
                meta[f] = old_meta[f]
            else:
                meta.pop(f, None)
        meta.pop("managedFields", None)
        meta.pop("selfLink", None)
        new["apiVersion"] = old.get("apiVersion")
        new["kind"] = old.get("kind")
        if "status" in rt.subresources:
            if "status" in old:
                new["status"] = old["status"]
            else:
                new.pop("status", None)
        return new

    def _prepare_update(
        self,
        rt: ResourceType,
        new: dict[str, Any],
        old: dict[str, Any],
        subresource: str,
        *,
        strict: bool,
    ) -> list[str]:
        name = str(old["metadata"]["name"])
        causes: list[Cause] = []
        warnings: list[str] = []
        if subresource != "status":
            causes += self._validate_meta(rt, new["metadata"])
            if old["metadata"].get("deletionTimestamp"):
                added = [
                    f
                    for f in new["metadata"].get("finalizers") or []
                    if f not in (old["metadata"].get("finalizers") or [])
                ]
                if added:
                    causes.append(
                        Cause(
                            "FieldValueForbidden",
                            "Forbidden: no new finalizers can be added if the object is being "
                            "deleted, found new finalizers " + json.dumps(added),
                            "metadata.finalizers",
                        )
                    )
        if rt.custom:
            _, warnings, more = self._custom_schema(rt, new, old, strict=strict)
            causes += more
        elif rt.plural == "pods" and not rt.group and subresource != "status":
            builtin.drop_empty_scheduling_gates(new)
            causes += builtin.validate_pod(new)
            causes += builtin.validate_pod_update(new, old)
        elif rt.group == "events.k8s.io":
            causes += builtin.validate_v1_event(builtin.core_event_to_v1(new))
        elif rt.storage == "core/events":
            causes += builtin.validate_core_event(new)
        elif rt.plural == "secrets" and not rt.group:
            builtin.fold_string_data(new)
        elif rt.storage == CRD_STORAGE and subresource != "status":
            causes += self._validate_crd(new)
            new["status"] = self._crd_status(new)
        if causes:
            raise errors.invalid(rt.kind, rt.group, name, causes)
        if rt.has_generation and _spec_changed(
            new, old, status_is_spec="status" not in rt.subresources
        ):
            new["metadata"]["generation"] = int(old["metadata"].get("generation") or 0) + 1
        return warnings

    def patch(
        self,
        rt: ResourceType,
        version: str,
        namespace: str | None,
        name: str,
        raw: bytes,
        content_type: str,
        *,
        subresource: str = "",
        dry_run: bool = False,
        strict: bool = False,
    ) -> WriteResult:
        ctype = content_type.split(";", maxsplit=1)[0].strip().lower()
        accepted = PATCH_TYPES_CUSTOM if rt.custom else PATCH_TYPES_BUILTIN
        if ctype not in accepted or ctype == "application/apply-patch+yaml":
            raise errors.unsupported_media_type(ctype, accepted)
        try:
            body = json.loads(raw or b"null")
        except ValueError as exc:
            raise errors.bad_request(f"error decoding patch: {exc}") from None
        with self.store.lock:
            key = self.key(rt, namespace, name)
            old = self.store.get(rt.storage, key)
            if old is None:
                raise errors.not_found(rt.plural, rt.group, name)
            current = deep_copy(self.served(rt, version, old))
            if ctype == "application/json-patch+json":
                result = patch.json_patch(current, body)
            elif ctype == "application/merge-patch+json":
                if not isinstance(body, dict):
                    raise errors.bad_request(
                        "json: cannot unmarshal into Go value of type map[string]interface {}"
                    )
                result = patch.merge_patch(current, body)
            else:
                if not isinstance(body, dict):
                    raise errors.bad_request(
                        "json: cannot unmarshal into Go value of type map[string]interface {}"
                    )
                result = patch.strategic_merge_patch(current, body)
            if not isinstance(result, dict):
                raise errors.bad_request("patched object is not an object")
            rv = str((result.get("metadata") or {}).get("resourceVersion") or "")
            if rv and rv != old["metadata"]["resourceVersion"]:
                raise errors.stale(rt.plural, rt.group, name)
            result.setdefault("metadata", {})["name"] = name
            return self.update(
                rt,
                version,
                namespace,
                name,
                result,
                subresource=subresource,
                dry_run=dry_run,
                strict=strict,
                precondition_checked=True,
            )

    def bind(self, namespace: str, name: str, body: Any) -> dict[str, Any]:
        """POST pods/NAME/binding: what the scheduler does to place a pod on a node."""
        if (
            not isinstance(body, dict)
            or not isinstance(body.get("target"), dict)
            or not body["target"].get("name")
        ):
            raise errors.invalid(
                "Binding", "", name, [Cause("FieldValueRequired", "Required value", "target.name")]
            )
        node = str(body["target"]["name"])
        rt = self.registry.lookup("", "v1", "pods")
        assert rt is not None
        with self.store.lock:
            key = (namespace, name)
            old = self._get_or_404(rt, namespace, name)
            # Upstream wraps every refusal of the binding storage as a Conflict on the
            # `pods/binding` resource (not `pods`), checked in this order.
            if old["metadata"].get("deletionTimestamp"):
                raise errors.conflict(
                    "pods/binding",
                    "",
                    name,
                    f"pod {name} is being deleted, cannot be assigned to a host",
                )
            if old.get("spec", {}).get("nodeName"):
                raise errors.conflict(
                    "pods/binding",
                    "",
                    name,
                    f'pod {name} is already assigned to node "{old["spec"]["nodeName"]}"',
                )
            if old.get("spec", {}).get("schedulingGates"):
                raise errors.conflict(
                    "pods/binding", "", name, f"pod {name} has non-empty .spec.schedulingGates"
                )
            new = deep_copy(old)
            new["spec"]["nodeName"] = node
            conds = [
                c
                for c in new.setdefault("status", {}).get("conditions") or []
                if c.get("type") != "PodScheduled"
            ]
            conds.append(
                {
                    "type": "PodScheduled",
                    "status": "True",
                    "lastProbeTime": None,
                    "lastTransitionTime": now_rfc3339(),
                }
            )
            new["status"]["conditions"] = conds
            # No generation bump: binding writes storage directly, past the pod strategy
            # that counts spec changes (a real kube-apiserver leaves it as it was).
            stored = self.store.put(rt.storage, key, new)
            self._after_write(rt, old, stored)
        return {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Success",
            "code": 201,
        }

    def evict(self, namespace: str, name: str, body: Any) -> dict[str, Any]:
        """POST pods/NAME/eviction: a delete that honours disruption budgets (none here)."""
        rt = self.registry.lookup("", "v1", "pods")
        assert rt is not None
        options = body.get("deleteOptions") if isinstance(body, dict) else None
        with self.store.lock:
            key = (namespace, name)
            old = self._get_or_404(rt, namespace, name)
            if not old["metadata"].get("deletionTimestamp"):
                self.delete_stored(rt, key, old, dict(options or {}))
        return {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Success",
            "code": 201,
        }

    # -- CRDs: installing one is a create or an update of it (the rest: crds.py) ----

    def install_crd(self, crd: dict[str, Any]) -> None:
        rt = self.registry.lookup("apiextensions.k8s.io", "v1", "customresourcedefinitions")
        assert rt is not None
        name = crd["metadata"]["name"]
        with self.store.lock:
            existing = self.store.get(rt.storage, ("", name))
            if existing is None:
                self.create(rt, "v1", None, crd)
            else:
                body = deep_copy(crd)
                body["metadata"]["resourceVersion"] = existing["metadata"]["resourceVersion"]
                self.update(rt, "v1", None, name, body)


def _same(a: dict[str, Any], b: dict[str, Any]) -> bool:
    """Equal but for resourceVersion: such an update is a no-op upstream (no new RV)."""
    ma = {k: v for k, v in a.get("metadata", {}).items() if k != "resourceVersion"}
    mb = {k: v for k, v in b.get("metadata", {}).items() if k != "resourceVersion"}
    if ma != mb:
        return False
    return {k: v for k, v in a.items() if k != "metadata"} == {
        k: v for k, v in b.items() if k != "metadata"
    }


def _spec_changed(new: dict[str, Any], old: dict[str, Any], *, status_is_spec: bool) -> bool:
    """Generation moves on any change outside metadata (and status, when it is a subresource)."""
    skip = (
        ("metadata", "apiVersion", "kind")
        if status_is_spec
        else ("metadata", "status", "apiVersion", "kind")
    )
    return {k: v for k, v in new.items() if k not in skip} != {
        k: v for k, v in old.items() if k not in skip
    }
