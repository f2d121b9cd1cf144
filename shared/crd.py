"""The CocoonSet CustomResourceDefinition, generated from the pydantic models (`shared.models`).
Only what is not a field lives here (names, scope, printer columns, subresources)."""

from __future__ import annotations

import copy
import functools
import inspect
import types
from enum import Enum
from typing import Annotated, Any, Final, Union, get_args, get_origin

import annotated_types
from pydantic import BaseModel
from pydantic.fields import FieldInfo
from pydantic_core import PydanticUndefined, to_jsonable_python

from shared import constants as k
from shared.models import X_NO_DEFAULT, X_OPAQUE, X_OPTIONAL, CocoonSet, IntOrString

_HINT_PREFIX: Final = "x-cocoon-"


def cocoonset_crd() -> dict[str, Any]:
    """The CRD (apiextensions.k8s.io/v1) as a plain dict, ready to create or dump."""
    return copy.deepcopy(_crd())


def cocoonset_schema() -> dict[str, Any]:
    """The version's openAPIV3Schema alone (what validation walks)."""
    return copy.deepcopy(_crd()["spec"]["versions"][0]["schema"]["openAPIV3Schema"])


@functools.cache
def _crd() -> dict[str, Any]:
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": k.CRD_NAME},
        "spec": {
            "group": k.GROUP,
            "names": {
                "categories": ["cocoon"],
                "kind": k.KIND,
                "listKind": f"{k.KIND}List",
                "plural": k.PLURAL,
                "shortNames": ["cs", k.PLURAL],
                "singular": k.SINGULAR,
            },
            "scope": "Namespaced",
            "versions": [
                {
                    # `kubectl get cocoonsets` columns: not schema, so not on the models.
                    "additionalPrinterColumns": [
                        {"jsonPath": ".status.phase", "name": "Phase", "type": "string"},
                        {"jsonPath": ".status.readyAgents", "name": "Ready", "type": "integer"},
                        {"jsonPath": ".status.desiredAgents", "name": "Desired", "type": "integer"},
                        {"jsonPath": ".metadata.creationTimestamp", "name": "Age", "type": "date"},
                    ],
                    "name": k.VERSION,
                    "schema": {"openAPIV3Schema": model_schema(CocoonSet)},
                    "served": True,
                    "storage": True,
                    "subresources": {"status": {}},
                }
            ],
        },
    }


# --- the walk ------------------------------------------------------------------------


def model_schema(model: type[BaseModel]) -> dict[str, Any]:
    """The structural schema of a model: an object with its fields as properties."""
    extra = _extras(model.model_config.get("json_schema_extra"))
    if extra.get(X_OPAQUE):
        return {"type": "object"}
    schema: dict[str, Any] = {"type": "object"}
    if description := _doc(model):
        schema["description"] = description
    # Keys sorted, as controller-gen writes them (a base model's fields come first in Python).
    fields = dict(sorted((f.alias or name, f) for name, f in model.model_fields.items()))
    schema["properties"] = {key: _field_schema(field) for key, field in fields.items()}
    if required := sorted(
        key
        for key, field in fields.items()
        if field.is_required() and not _extras(field.json_schema_extra).get(X_OPTIONAL)
    ):
        schema["required"] = required
    schema.update(_public(extra))
    return schema


def _field_schema(field: FieldInfo) -> dict[str, Any]:
    assert field.annotation is not None, "pydantic resolves every field's annotation"
    schema = _type_schema(field.annotation)
    schema.update(_constraints(field.metadata))
    if field.description:
        # A field's own description wins over its type's (as controller-gen does).
        schema["description"] = field.description
    extra = _extras(field.json_schema_extra)
    if field.default not in (None, PydanticUndefined) and not extra.get(X_NO_DEFAULT):
        schema["default"] = to_jsonable_python(field.default)
    schema.update(_public(extra))
    return schema


def _type_schema(tp: Any) -> dict[str, Any]:
    origin = get_origin(tp)
    if origin is Annotated:
        inner, *metadata = get_args(tp)
        marker = next((m for m in metadata if isinstance(m, IntOrString)), None)
        if marker is not None:
            return {
                "anyOf": [{"type": "integer"}, {"type": "string"}],
                "pattern": marker.pattern,
                "x-kubernetes-int-or-string": True,
            }
        schema = _type_schema(inner)
        schema.update(_constraints(metadata))
        return schema
    if origin in (Union, types.UnionType):
        # `X | None`: optional in Python; absence is what the schema's `required` says.
        members = [a for a in get_args(tp) if a is not type(None)]
        if len(members) != 1:
            raise TypeError(f"no CRD schema for the union {tp!r}: mark it IntOrString")
        return _type_schema(members[0])
    if origin is list:
        (item,) = get_args(tp)
        return {"type": "array", "items": _type_schema(item)}
    if origin is dict:
        key, value = get_args(tp)
        if key is not str:
            raise TypeError(f"map keys must be strings in a CRD: {tp!r}")
        return {"type": "object", "additionalProperties": _type_schema(value)}
    if isinstance(tp, type):
        if issubclass(tp, BaseModel):
            return model_schema(tp)
        if issubclass(tp, Enum):
            enum: dict[str, Any] = {"type": "string", "enum": [m.value for m in tp]}
            if description := _doc(tp):
                enum["description"] = description
            return enum
        # bool before int: bool is an int subclass.
        for py, name in ((bool, "boolean"), (int, "integer"), (str, "string")):
            if issubclass(tp, py):
                return {"type": name}
    raise TypeError(f"no CRD schema for {tp!r}")


def _constraints(metadata: list[Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for m in metadata:
        if isinstance(m, annotated_types.Ge):
            out["minimum"] = m.ge
        elif isinstance(m, annotated_types.Le):
            out["maximum"] = m.le
        elif isinstance(m, annotated_types.MinLen):
            out["minLength"] = m.min_length
        elif isinstance(m, annotated_types.MaxLen):
            out["maxLength"] = m.max_length
        elif getattr(m, "pattern", None) is not None and not isinstance(m, IntOrString):
            # pydantic keeps Field(pattern=...) as general metadata with a `pattern`.
            out["pattern"] = m.pattern
    return out


def _doc(tp: type) -> str | None:
    # Only a docstring written on the type itself: never an inherited one.
    raw = tp.__dict__.get("__doc__")
    return inspect.cleandoc(raw) if isinstance(raw, str) else None


def _extras(raw: object) -> dict[str, Any]:
    if not isinstance(raw, dict | None):
        raise TypeError("json_schema_extra must be a dict on CRD models (no callables)")
    return raw or {}


def _public(extra: dict[str, Any]) -> dict[str, Any]:
    return {key: copy.deepcopy(v) for key, v in extra.items() if not key.startswith(_HINT_PREFIX)}
