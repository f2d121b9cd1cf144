"""kube-apiserver's CRD validation of a CocoonSet, for `validate --offline` and the functions:
the schema of `shared.crd` walked, its two CEL rules restated (a test holds them to the CRD).
As the server: null is absent, unknown fields are pruned, `$` ends the text, `oldSelf` rules
run only with `old`. Not mirrored: ratcheting on update and defaulting."""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from shared import constants as k
from shared.admission import LABEL_MSG, go_quote
from shared.crd import cocoonset_schema
from shared.models import MSG_CLASS_IMMUTABLE, MSG_RELEASE_MAIN_ONLY, go_regex_search
from shared.names import is_dns1123_label, is_dns1123_subdomain

# k8s.io/apimachinery/pkg/util/validation's messages for object names.
_SUBDOMAIN_MSG = (
    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, "
    "'-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', "
    "regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*"
    "[a-z0-9])?)*')"
)

# `format: date-time` (metav1.Time): RFC 3339 with a zone, optional fractional seconds.
_RFC3339 = re.compile(r"\A\d{4}-\d{2}-\d{2}[Tt]\d{2}:\d{2}:\d{2}(\.\d+)?([Zz]|[+-]\d{2}:\d{2})\Z")


@dataclass(frozen=True, slots=True)
class Violation:
    """One error as kube-apiserver reports it: the field path and what is wrong."""

    field: str
    message: str

    def __str__(self) -> str:
        return f"{self.field}: {self.message}" if self.field else self.message


def validate_cocoonset(
    obj: Mapping[str, Any], old: Mapping[str, Any] | None = None
) -> list[Violation]:
    """Every reason the API server would refuse `obj` as sent (an update of `old` when
    given); empty when it would accept it."""
    if not isinstance(obj, Mapping):
        return [_type_error("", obj, "object")]
    out: list[Violation] = []
    for key, want in (("apiVersion", k.API_VERSION), ("kind", k.KIND)):
        if obj.get(key) is not None:  # the schema leaves them free: the server's one value
            out.extend(_check_scalar({"enum": [want]}, obj[key], key))
    out.extend(_check_metadata(obj.get("metadata")))
    out.extend(_check_node(_schema(), obj, ""))
    spec = obj.get("spec")
    if isinstance(spec, Mapping):
        old_spec = old.get("spec") if isinstance(old, Mapping) else None
        out.extend(_check_spec_rules(spec, old_spec if isinstance(old_spec, Mapping) else None))
    return out


def _check_spec_rules(
    spec: Mapping[str, Any], old_spec: Mapping[str, Any] | None
) -> Iterator[Violation]:
    # The CRD's CEL rules; violations render as field.Invalid(path, <schema type>, message).
    agent = spec.get("agent")
    replicas = agent.get("replicas") if isinstance(agent, Mapping) else None
    if spec.get("hibernatePolicy") == "release" and (
        replicas not in (None, 0) or spec.get("toolboxes")
    ):
        yield Violation("spec", f'Invalid value: "object": {MSG_RELEASE_MAIN_ONLY}')
    # Immutable once set, empty included.
    before = None if old_spec is None else old_spec.get("snapshotCompatibilityClass")
    if before is not None and spec.get("snapshotCompatibilityClass") != before:
        yield Violation("spec", f'Invalid value: "object": {MSG_CLASS_IMMUTABLE}')


# --- metadata (the server's ObjectMeta validation, the part a manifest can get wrong) ---


def _check_metadata(meta: object) -> Iterator[Violation]:
    meta = {} if meta is None else meta
    if not isinstance(meta, Mapping):
        yield _type_error("metadata", meta, "object")
        return
    name = meta.get("name")
    if name is None:
        if not meta.get("generateName"):
            yield Violation("metadata.name", "Required value: name or generateName is required")
    elif not isinstance(name, str) or not is_dns1123_subdomain(name):
        yield Violation("metadata.name", f"Invalid value: {go_quote(name)}: {_SUBDOMAIN_MSG}")
    namespace = meta.get("namespace")
    if namespace is not None and (
        not isinstance(namespace, str) or not is_dns1123_label(namespace)
    ):
        yield Violation("metadata.namespace", f"Invalid value: {go_quote(namespace)}: {LABEL_MSG}")


# --- the structural schema walk --------------------------------------------------------


@functools.cache
def _schema() -> dict[str, Any]:
    schema = cocoonset_schema()
    # metadata is ObjectMeta: checked above, not by the (opaque) schema.
    schema["properties"].pop("metadata", None)
    return schema


def _check_node(schema: Mapping[str, Any], value: object, path: str) -> Iterator[Violation]:
    if "anyOf" in schema:  # int-or-string, the only anyOf a structural schema has here
        if _is_int(value) or isinstance(value, str):
            yield from _check_scalar(schema, value, path)
        else:
            yield _type_error(path, value, "integer or string")
        return
    kind = schema.get("type")
    if kind == "object":
        if not isinstance(value, Mapping):
            yield _type_error(path, value, "object")
            return
        yield from _check_object(schema, value, path)
    elif kind == "array":
        if not isinstance(value, list):
            yield _type_error(path, value, "array")
            return
        for i, item in enumerate(value):
            if item is not None:
                yield from _check_node(schema["items"], item, f"{path}[{i}]")
        yield from _check_list_map(schema, value, path)
    elif kind == "string" and not isinstance(value, str):
        yield _type_error(path, value, "string")
    elif kind == "integer" and not _is_int(value):
        yield _type_error(path, value, "integer")
    elif kind == "boolean" and not isinstance(value, bool):
        yield _type_error(path, value, "boolean")
    else:
        yield from _check_scalar(schema, value, path)


def _check_object(
    schema: Mapping[str, Any], value: Mapping[Any, Any], path: str
) -> Iterator[Violation]:
    properties: Mapping[str, Any] = schema.get("properties", {})
    for key in schema.get("required", ()):
        if value.get(key) is None:
            yield Violation(_child(path, key), "Required value")
    for key, sub in properties.items():
        if value.get(key) is not None:
            yield from _check_node(sub, value[key], _child(path, key))
    extra = schema.get("additionalProperties")
    if isinstance(extra, Mapping):
        for key, item in value.items():
            if item is not None:
                yield from _check_node(extra, item, f"{path}[{key}]")


def _check_list_map(schema: Mapping[str, Any], items: list[Any], path: str) -> Iterator[Violation]:
    if schema.get("x-kubernetes-list-type") != "map":
        return
    keys: list[str] = schema.get("x-kubernetes-list-map-keys", [])
    seen: set[str] = set()
    for i, item in enumerate(items):
        if not isinstance(item, Mapping):
            continue
        token = json.dumps({key: item.get(key) for key in keys}, sort_keys=True, default=str)
        if token in seen:
            yield Violation(f"{path}[{i}]", f"Duplicate value: {token}")
        seen.add(token)


def _check_scalar(schema: Mapping[str, Any], value: object, path: str) -> Iterator[Violation]:
    if "enum" in schema and value not in schema["enum"]:
        supported = ", ".join(go_quote(v) for v in schema["enum"])
        yield Violation(
            path, f"Unsupported value: {go_quote(value)}: supported values: {supported}"
        )
        return
    if isinstance(value, str):
        if "maxLength" in schema and len(value) > schema["maxLength"]:
            yield Violation(path, f"Too long: may not be more than {schema['maxLength']} bytes")
        if "minLength" in schema and len(value) < schema["minLength"]:
            yield _invalid(path, value, f"should be at least {schema['minLength']} chars long")
        if schema.get("format") == "date-time" and not _RFC3339.match(value):
            yield _invalid(path, value, f"must be of type date-time: {go_quote(value)}")
        if "pattern" in schema and not go_regex_search(schema["pattern"], value):
            yield _invalid(path, value, f"should match '{schema['pattern']}'")
    elif _is_int(value):
        if "minimum" in schema and value < schema["minimum"]:
            yield _invalid(path, value, f"should be greater than or equal to {schema['minimum']}")
        if "maximum" in schema and value > schema["maximum"]:
            yield _invalid(path, value, f"should be less than or equal to {schema['maximum']}")


def _is_int(value: object) -> bool:
    # JSON has numbers, not ints: the server takes 2.0 as an integer; bool is not one.
    if isinstance(value, bool):
        return False
    return isinstance(value, int) or (isinstance(value, float) and value.is_integer())


def _type_error(path: str, value: object, want: str) -> Violation:
    got = _json_type(value)
    where = path or "<root>"
    return Violation(
        path, f'Invalid value: "{got}": {where} in body must be of type {want}: "{got}"'
    )


def _invalid(path: str, value: object, detail: str) -> Violation:
    # kube-openapi's wording: "<path> in body should ...", rendered as Invalid.
    return Violation(path, f"Invalid value: {go_quote(value)}: {path or '<root>'} in body {detail}")


def _json_type(value: object) -> str:
    if _is_int(value):
        return "integer"
    for py, name in ((bool, "boolean"), (float, "number"), (str, "string"), (list, "array")):
        if isinstance(value, py):
            return name
    if isinstance(value, Mapping):
        return "object"
    return "null" if value is None else type(value).__name__


def _child(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key
