"""Structural-schema handling of custom resources, in kube-apiserver's order.

On every write of a custom resource: prune unknown fields (unless
`x-kubernetes-preserve-unknown-fields`), drop `null` for non-nullable fields,
apply `default`s, then validate (types, enum, pattern, bounds, lengths,
required, list-type uniqueness) and evaluate `x-kubernetes-validations` CEL
rules with cel-python. Rules that mention `oldSelf` are transition rules: run
only on update and only where the old object has a value at the same path.
Failures become `Cause`s whose text follows the apiserver's field errors.
"""

from __future__ import annotations

import contextlib
import json
import re
import threading
from collections.abc import Iterator
from typing import Any

from devstack.kubeapi.errors import Cause
from shared.models import go_regex_search  # Go regexp semantics (`$` = end of text)

_META_KEYS = frozenset(
    {
        "name",
        "generateName",
        "namespace",
        "selfLink",
        "uid",
        "resourceVersion",
        "generation",
        "creationTimestamp",
        "deletionTimestamp",
        "deletionGracePeriodSeconds",
        "labels",
        "annotations",
        "ownerReferences",
        "finalizers",
        "managedFields",
    }
)

_MISSING = object()


def _type_name(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    return "object"


def _show(value: Any) -> str:
    """Go's rendering of a value in `Invalid value: X` (strings quoted)."""
    if isinstance(value, str):
        return json.dumps(value)
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    if value is None:
        return "null"
    return json.dumps(_type_name(value))


def _join(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


# --- pruning + defaulting --------------------------------------------------


def prune(
    value: Any, schema: dict[str, Any], path: str, unknown: list[str], *, root: bool = False
) -> Any:
    """Drop fields the schema does not declare; record their paths in `unknown`."""
    if isinstance(value, dict):
        props: dict[str, Any] = schema.get("properties") or {}
        additional = schema.get("additionalProperties")
        preserve = bool(schema.get("x-kubernetes-preserve-unknown-fields"))
        embedded = bool(schema.get("x-kubernetes-embedded-resource"))
        out: dict[str, Any] = {}
        for key, child in value.items():
            if root or embedded:
                if key in ("apiVersion", "kind"):
                    out[key] = child
                    continue
                if key == "metadata" and isinstance(child, dict):
                    kept = {k: v for k, v in child.items() if k in _META_KEYS}
                    for k in child:
                        if k not in _META_KEYS:
                            unknown.append(_join(_join(path, "metadata"), k))
                    out[key] = kept
                    continue
            if key in props:
                sub = props[key]
                if child is None and not sub.get("nullable"):
                    continue  # null for a non-nullable field is dropped, then defaulted
                out[key] = prune(child, sub, _join(path, key), unknown)
            elif isinstance(additional, dict):
                out[key] = prune(child, additional, _join(path, key), unknown)
            elif additional is True or preserve:
                out[key] = child
            else:
                unknown.append(_join(path, key))
        return out
    if isinstance(value, list):
        items = schema.get("items")
        if isinstance(items, dict):
            return [prune(v, items, f"{path}[{i}]", unknown) for i, v in enumerate(value)]
        return value
    return value


def apply_defaults(value: Any, schema: dict[str, Any]) -> Any:
    if isinstance(value, dict):
        props: dict[str, Any] = schema.get("properties") or {}
        out = dict(value)
        for key, sub in props.items():
            if key not in out and "default" in sub:
                out[key] = json.loads(json.dumps(sub["default"]))
            if key in out:
                out[key] = apply_defaults(out[key], sub)
        additional = schema.get("additionalProperties")
        if isinstance(additional, dict):
            for key, child in out.items():
                if key not in props:
                    out[key] = apply_defaults(child, additional)
        return out
    if isinstance(value, list):
        items = schema.get("items")
        if isinstance(items, dict):
            return [apply_defaults(v, items) for v in value]
    return value


# --- OpenAPI validation ----------------------------------------------------


# String formats kube-openapi checks for CRDs (a subset: the ones this project's
# schemas and tests use). RFC 3339 date-time as metav1.Time accepts it.
_FORMATS: dict[str, re.Pattern[str]] = {
    "date-time": re.compile(
        r"^\d{4}-\d{2}-\d{2}[Tt]\d{2}:\d{2}:\d{2}(\.\d+)?([Zz]|[+-]\d{2}:\d{2})$"
    ),
    "date": re.compile(r"^\d{4}-\d{2}-\d{2}$"),
    "uuid": re.compile(
        r"^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$"
    ),
    "byte": re.compile(r"^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$"),
}


def _type_ok(value: Any, schema: dict[str, Any]) -> bool:
    if value is None:
        return bool(schema.get("nullable"))
    if schema.get("x-kubernetes-int-or-string"):
        return isinstance(value, str) or (isinstance(value, int) and not isinstance(value, bool))
    t = schema.get("type")
    if not t:
        return True
    if t == "object":
        return isinstance(value, dict)
    if t == "array":
        return isinstance(value, list)
    if t == "string":
        return isinstance(value, str)
    if t == "boolean":
        return isinstance(value, bool)
    if t == "integer":
        return (isinstance(value, int) and not isinstance(value, bool)) or (
            isinstance(value, float) and value.is_integer()
        )
    if t == "number":
        return isinstance(value, int | float) and not isinstance(value, bool)
    return True


def validate(value: Any, schema: dict[str, Any], path: str, causes: list[Cause]) -> None:
    if not _type_ok(value, schema):
        # kube-openapi joins the accepted types: int-or-string reads "integer,string".
        want = "integer,string" if schema.get("x-kubernetes-int-or-string") else schema.get("type")
        causes.append(
            Cause(
                "FieldValueTypeInvalid",
                f'Invalid value: "{_type_name(value)}": {path} in body must be of type '
                f'{want}: "{_type_name(value)}"',
                path,
            )
        )
        return
    if value is None:
        return
    enum = schema.get("enum")
    if enum is not None and value not in enum:
        supported = ", ".join(_show(e) for e in enum)
        causes.append(
            Cause(
                "FieldValueNotSupported",
                f"Unsupported value: {_show(value)}: supported values: {supported}",
                path,
            )
        )
    if isinstance(value, str):
        fmt = schema.get("format")
        checker = _FORMATS.get(str(fmt)) if fmt else None
        if checker is not None and not checker.match(value):
            causes.append(
                Cause(
                    # kube-openapi reports a format mismatch as a type error (blocking CEL).
                    "FieldValueTypeInvalid",
                    f"Invalid value: {_show(value)}: {path} in body must be of type "
                    f"{fmt}: {_show(value)}",
                    path,
                )
            )
        pattern = schema.get("pattern")
        if pattern is not None and not go_regex_search(pattern, value):
            causes.append(
                Cause(
                    "FieldValueInvalid",
                    f"Invalid value: {_show(value)}: {path} in body should match '{pattern}'",
                    path,
                )
            )
        max_len = schema.get("maxLength")
        if max_len is not None and len(value) > max_len:
            causes.append(
                Cause("FieldValueTooLong", f"Too long: may not be more than {max_len} bytes", path)
            )
        min_len = schema.get("minLength")
        if min_len is not None and len(value) < min_len:
            causes.append(
                Cause(
                    "FieldValueInvalid",
                    f"Invalid value: {_show(value)}: {path} in body should be at least "
                    f"{min_len} chars long",
                    path,
                )
            )
    if isinstance(value, int | float) and not isinstance(value, bool):
        _check_bounds(value, schema, path, causes)
    if isinstance(value, list):
        _validate_list(value, schema, path, causes)
    if isinstance(value, dict):
        _validate_object(value, schema, path, causes)


def _check_bounds(value: float, schema: dict[str, Any], path: str, causes: list[Cause]) -> None:
    low = schema.get("minimum")
    if low is not None:
        if schema.get("exclusiveMinimum") and value <= low:
            causes.append(
                Cause(
                    "FieldValueInvalid",
                    f"Invalid value: {_show(value)}: {path} in body should be greater than {low}",
                    path,
                )
            )
        elif value < low:
            causes.append(
                Cause(
                    "FieldValueInvalid",
                    f"Invalid value: {_show(value)}: {path} in body should be greater than or "
                    f"equal to {low}",
                    path,
                )
            )
    high = schema.get("maximum")
    if high is not None:
        if schema.get("exclusiveMaximum") and value >= high:
            causes.append(
                Cause(
                    "FieldValueInvalid",
                    f"Invalid value: {_show(value)}: {path} in body should be less than {high}",
                    path,
                )
            )
        elif value > high:
            causes.append(
                Cause(
                    "FieldValueInvalid",
                    f"Invalid value: {_show(value)}: {path} in body should be less than or "
                    f"equal to {high}",
                    path,
                )
            )
    fmt = schema.get("format")
    if fmt == "int32" and not (-(2**31) <= value < 2**31):
        causes.append(
            Cause(
                "FieldValueInvalid",
                f"Invalid value: {_show(value)}: {path} in body must be of type int32",
                path,
            )
        )


def _validate_list(
    value: list[Any], schema: dict[str, Any], path: str, causes: list[Cause]
) -> None:
    max_items = schema.get("maxItems")
    if max_items is not None and len(value) > max_items:
        causes.append(
            Cause(
                "FieldValueTooMany",
                f"Too many: {len(value)}: must have at most {max_items} items",
                path,
            )
        )
    min_items = schema.get("minItems")
    if min_items is not None and len(value) < min_items:
        causes.append(
            Cause(
                "FieldValueInvalid",
                f"Invalid value: {len(value)}: {path} in body should have at least {min_items} "
                "items",
                path,
            )
        )
    items = schema.get("items")
    if isinstance(items, dict):
        for i, v in enumerate(value):
            validate(v, items, f"{path}[{i}]", causes)
    list_type = schema.get("x-kubernetes-list-type")
    if list_type == "set":
        seen: list[Any] = []
        for i, v in enumerate(value):
            if v in seen:
                causes.append(
                    Cause("FieldValueDuplicate", f"Duplicate value: {_show(v)}", f"{path}[{i}]")
                )
            seen.append(v)
    elif list_type == "map":
        keys = schema.get("x-kubernetes-list-map-keys") or []
        seen_keys: list[tuple[Any, ...]] = []
        for i, v in enumerate(value):
            if not isinstance(v, dict):
                continue
            k = tuple(v.get(key) for key in keys)
            if k in seen_keys:
                shown = json.dumps({key: v.get(key) for key in keys}, separators=(",", ":"))
                causes.append(
                    Cause(
                        "FieldValueDuplicate",
                        f"Duplicate value: map[string]interface {{}}{shown}",
                        f"{path}[{i}]",
                    )
                )
            seen_keys.append(k)


def _validate_object(
    value: dict[str, Any], schema: dict[str, Any], path: str, causes: list[Cause]
) -> None:
    for req in schema.get("required") or []:
        if req not in value:
            causes.append(Cause("FieldValueRequired", "Required value", _join(path, req)))
    props: dict[str, Any] = schema.get("properties") or {}
    additional = schema.get("additionalProperties")
    for key, child in value.items():
        if key in props:
            if path == "" and key == "metadata":
                continue
            validate(child, props[key], _join(path, key), causes)
        elif isinstance(additional, dict):
            validate(child, additional, _join(path, key), causes)
    max_props = schema.get("maxProperties")
    if max_props is not None and len(value) > max_props:
        causes.append(
            Cause(
                "FieldValueTooMany",
                f"Too many: {len(value)}: must have at most {max_props} items",
                path,
            )
        )
    min_props = schema.get("minProperties")
    if min_props is not None and len(value) < min_props:
        causes.append(
            Cause(
                "FieldValueInvalid",
                f"Invalid value: {len(value)}: {path} in body should have at least {min_props} "
                "properties",
                path,
            )
        )


# --- CEL (x-kubernetes-validations) -----------------------------------------

_programs: dict[str, Any] = {}
_programs_lock = threading.RLock()
_cel: dict[str, Any] = {}


def _celpy() -> dict[str, Any]:
    """cel-python, imported once under a lock (concurrent first imports race)."""
    with _programs_lock:
        if not _cel:
            import celpy  # noqa: PLC0415 - the `local` extra, loaded only when a rule runs
            from celpy.adapter import json_to_cel  # noqa: PLC0415 - same

            _cel["Environment"] = celpy.Environment
            _cel["json_to_cel"] = json_to_cel
        return _cel


def _program(rule: str) -> Any:
    with _programs_lock:
        prog = _programs.get(rule)
        if prog is None:
            env = _celpy()["Environment"]()
            prog = env.program(env.compile(rule))
            _programs[rule] = prog
        return prog


def _evaluate(rule: str, activation: dict[str, Any]) -> tuple[bool, str]:
    """(passed, error text) for one rule; an evaluation error counts as a failure."""
    json_to_cel = _celpy()["json_to_cel"]

    try:
        result = _program(rule).evaluate({k: json_to_cel(v) for k, v in activation.items()})
    except Exception as exc:  # noqa: BLE001 - cel-python raises assorted types for bad rules/data
        return False, str(exc)
    if isinstance(result, Exception):
        return False, str(result)
    return bool(result), ""


def precompile(schemas: dict[str, dict[str, Any]]) -> None:
    """Compile every rule of the given schemas into the cache (errors surface later)."""

    def walk(node: Any) -> Iterator[str]:
        if isinstance(node, dict):
            for rule in node.get("x-kubernetes-validations") or []:
                if isinstance(rule, dict) and rule.get("rule"):
                    yield str(rule["rule"])
            for v in node.values():
                yield from walk(v)
        elif isinstance(node, list):
            for v in node:
                yield from walk(v)

    for sch in schemas.values():
        for text in walk(sch):
            with contextlib.suppress(Exception):
                _program(text)


_OLD_SELF = re.compile(r"\boldSelf\b")


def _nodes(
    value: Any, old: Any, schema: dict[str, Any], path: str
) -> Iterator[tuple[Any, Any, dict[str, Any], str]]:
    """Every (value, correlated old value or _MISSING, schema, path), depth first."""
    yield value, old, schema, path
    if isinstance(value, dict):
        props: dict[str, Any] = schema.get("properties") or {}
        additional = schema.get("additionalProperties")
        for key, child in value.items():
            sub = (
                props.get(key)
                if key in props
                else additional
                if isinstance(additional, dict)
                else None
            )
            if sub is None or (path == "" and key == "metadata"):
                continue
            prior = old.get(key, _MISSING) if isinstance(old, dict) else _MISSING
            yield from _nodes(child, prior, sub, _join(path, key))
    elif isinstance(value, list):
        items = schema.get("items")
        if not isinstance(items, dict):
            return
        map_keys = (
            schema.get("x-kubernetes-list-map-keys")
            if schema.get("x-kubernetes-list-type") == "map"
            else None
        )
        for i, child in enumerate(value):
            child_old: Any = _MISSING
            # Only map-lists correlate old and new items (by their keys), as upstream.
            if map_keys and isinstance(old, list) and isinstance(child, dict):
                item_key = tuple(child.get(k) for k in map_keys)
                child_old = next(
                    (
                        o
                        for o in old
                        if isinstance(o, dict) and tuple(o.get(k) for k in map_keys) == item_key
                    ),
                    _MISSING,
                )
            yield from _nodes(child, child_old, items, f"{path}[{i}]")


def cel_validate(value: Any, old: Any, schema: dict[str, Any], causes: list[Cause]) -> None:
    for node, node_old, sub, path in _nodes(value, old, schema, ""):
        rules = sub.get("x-kubernetes-validations")
        if not rules or node is None:
            continue
        for rule in rules:
            text = str(rule.get("rule", ""))
            transition = bool(_OLD_SELF.search(text))
            if transition and node_old is _MISSING:
                continue
            activation: dict[str, Any] = {"self": node}
            if transition:
                activation["oldSelf"] = node_old
            ok, err = _evaluate(text, activation)
            if ok:
                continue
            message = rule.get("message") or f"failed rule: {text}"
            expr = rule.get("messageExpression")
            if expr:
                json_to_cel = _celpy()["json_to_cel"]

                try:
                    rendered = _program(str(expr)).evaluate(
                        {k: json_to_cel(v) for k, v in activation.items()}
                    )
                    if isinstance(rendered, str) and rendered.strip():
                        message = str(rendered)
                except Exception:  # noqa: BLE001, S110 - upstream falls back to `message` too
                    pass
            if err and not rule.get("message"):
                message = f"{message}: {err}"
            field_path = path
            if rule.get("fieldPath"):
                field_path = path + str(rule["fieldPath"])
            reason = {
                "FieldValueForbidden": ("FieldValueForbidden", "Forbidden: "),
                "FieldValueRequired": ("FieldValueRequired", "Required value: "),
                "FieldValueDuplicate": ("FieldValueDuplicate", "Duplicate value: "),
            }.get(str(rule.get("reason", "")))
            if reason:
                causes.append(Cause(reason[0], reason[1] + message, field_path))
            else:
                causes.append(
                    Cause(
                        "FieldValueInvalid",
                        f'Invalid value: "{sub.get("type", "object")}": {message}',
                        field_path,
                    )
                )


def process(
    obj: dict[str, Any], old: dict[str, Any] | None, schema: dict[str, Any]
) -> tuple[dict[str, Any], list[str], list[Cause]]:
    """Prune, default and validate a custom resource: (object, pruned paths, causes)."""
    unknown: list[str] = []
    pruned = prune(obj, schema, "", unknown, root=True)
    defaulted = apply_defaults(pruned, schema)
    causes: list[Cause] = []
    validate(defaulted, schema, "", causes)
    if any(c.reason in BLOCKING_REASONS for c in causes):
        # apiextensions' hasBlockingErr: CEL rules never see a value of the wrong shape;
        # the answer says so with one more cause (field "<nil>").
        if _has_rules(schema):
            causes.append(Cause("FieldValueInvalid", RULES_NOT_CHECKED, "<nil>"))
    else:
        cel_validate(defaulted, old if old is not None else _MISSING, schema, causes)
    return defaulted, unknown, causes


# Schema failures that stop CEL evaluation (enum, required, maxLength, maxItems/
# maxProperties, type), per apiextensions-apiserver's customResourceStrategy.
BLOCKING_REASONS = frozenset(
    {
        "FieldValueNotSupported",
        "FieldValueRequired",
        "FieldValueTooLong",
        "FieldValueTooMany",
        "FieldValueTypeInvalid",
    }
)
RULES_NOT_CHECKED = (
    "Invalid value: null: some validation rules were not checked because the object was "
    "invalid; correct the existing errors to complete validation"
)


def _has_rules(schema: Any) -> bool:
    if isinstance(schema, dict):
        if schema.get("x-kubernetes-validations"):
            return True
        return any(_has_rules(v) for v in schema.values())
    if isinstance(schema, list):
        return any(_has_rules(v) for v in schema)
    return False
