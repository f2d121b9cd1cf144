"""CRD lifecycle: validation and status of a CustomResourceDefinition, its custom type
registered (or re-registered, defaults re-applied) on every write, and its custom
resources dropped when it goes.
"""

from __future__ import annotations

import threading
from typing import Any

from devstack.kubeapi import schema
from devstack.kubeapi.core import (
    CRD_STORAGE,
    ApiCore,
    now_rfc3339,
)
from devstack.kubeapi.errors import Cause
from devstack.kubeapi.resources import ResourceType, custom_type_from_crd


class CrdLifecycle(ApiCore):
    """What a CRD write or delete does beyond storing it."""

    def _validate_crd(self, crd: dict[str, Any]) -> list[Cause]:
        spec = crd.get("spec")
        causes: list[Cause] = []
        if not isinstance(spec, dict):
            return [Cause("FieldValueRequired", "Required value", "spec")]
        names = spec.get("names") or {}
        for f in ("plural", "kind"):
            if not names.get(f):
                causes.append(Cause("FieldValueRequired", "Required value", f"spec.names.{f}"))
        if not spec.get("group"):
            causes.append(Cause("FieldValueRequired", "Required value", "spec.group"))
        if not spec.get("versions"):
            causes.append(
                Cause(
                    "FieldValueRequired",
                    "Required value: must have exactly one version marked as storage version",
                    "spec.versions",
                )
            )
        expected = f"{names.get('plural')}.{spec.get('group')}"
        if crd["metadata"].get("name") != expected:
            causes.append(
                Cause(
                    "FieldValueInvalid",
                    f'Invalid value: "{crd["metadata"].get("name")}": must be '
                    'spec.names.plural+"."+spec.group',
                    "metadata.name",
                )
            )
        if spec.get("scope") not in ("Namespaced", "Cluster"):
            causes.append(
                Cause(
                    "FieldValueNotSupported",
                    f'Unsupported value: "{spec.get("scope", "")}": supported values: '
                    '"Cluster", "Namespaced"',
                    "spec.scope",
                )
            )
        return causes

    @staticmethod
    def _crd_status(crd: dict[str, Any]) -> dict[str, Any]:
        ts = now_rfc3339()
        storage = [v["name"] for v in crd["spec"]["versions"] if v.get("storage")] or [
            crd["spec"]["versions"][0]["name"]
        ]
        return {
            "acceptedNames": crd["spec"]["names"],
            "conditions": [
                {
                    "type": "NamesAccepted",
                    "status": "True",
                    "reason": "NoConflicts",
                    "message": "no conflicts found",
                    "lastTransitionTime": ts,
                },
                {
                    "type": "Established",
                    "status": "True",
                    "reason": "InitialNamesAccepted",
                    "message": "the initial names have been accepted",
                    "lastTransitionTime": ts,
                },
            ],
            "storedVersions": storage,
        }

    def _after_write(
        self, rt: ResourceType, old: dict[str, Any] | None, new: dict[str, Any]
    ) -> None:
        if rt.storage != CRD_STORAGE:
            return
        if new["metadata"].get("deletionTimestamp"):
            return
        self._schema_gen += 1
        ct = custom_type_from_crd(new, self._schema_gen)
        self.registry.add_custom(ct)
        # Compiling CEL takes a moment the first time (the parser loads); do it
        # off the request path so the first write of a custom resource is quick.
        threading.Thread(target=schema.precompile, args=(ct.schemas,), daemon=True).start()
        if old is not None:
            # Defaults of a changed schema show on read for existing objects, as upstream.
            sch = ct.schemas.get(ct.version) or {}
            for k, obj in self.store.all_items(ct.storage):
                self.store.replace_silently(ct.storage, k, schema.apply_defaults(obj, sch))

    def crd_removed(self, crd: dict[str, Any]) -> None:
        spec = crd.get("spec") or {}
        group, plural = spec.get("group", ""), (spec.get("names") or {}).get("plural", "")
        rt = self.registry.find_custom(group, plural)
        if rt is None:
            return
        with self.store.lock:
            for k, _ in self.store.all_items(rt.storage):
                self.store.remove(rt.storage, k)
        self.registry.remove_custom(group, plural)
