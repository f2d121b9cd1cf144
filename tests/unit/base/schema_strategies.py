"""Hypothesis strategies that build JSON objects from an OpenAPI (structural) schema.

Shared by the model round-trip and the validation agreement tests: the values
are valid for the schema they are drawn from (patterns via `from_regex`,
bounds, enums, required keys, unique list-map keys), and objects may carry
unknown fields (`x-…` keys, never a model's Python attribute name) so a test
can check they survive.
"""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st

JSON_SCALARS = st.one_of(
    st.none(), st.booleans(), st.integers(-(2**40), 2**40), st.text(max_size=8)
)
JSON_VALUES = st.recursive(
    JSON_SCALARS,
    lambda inner: st.one_of(
        st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=5), inner, max_size=3)
    ),
    max_leaves=6,
)
UNKNOWN_KEYS = st.from_regex(r"x-[a-z][a-zA-Z0-9]{0,6}", fullmatch=True)


def go_anchored(pattern: str) -> str:
    """The pattern with Go's end-of-text `$` (Python's `$` also matches before a final newline)."""
    return pattern[:-1] + r"\Z" if pattern.endswith("$") else pattern


def valid_string(node: dict[str, Any]) -> st.SearchStrategy[str]:
    if "enum" in node:
        return st.sampled_from(node["enum"])
    lo, hi = node.get("minLength", 0), node.get("maxLength", 12)
    if "pattern" in node:
        return st.from_regex(go_anchored(node["pattern"]), fullmatch=True).filter(
            lambda s: lo <= len(s) <= hi
        )
    return st.text(min_size=lo, max_size=min(hi, 12))


def from_schema(node: dict[str, Any], *, unknown: bool = True) -> st.SearchStrategy[Any]:
    """Values valid for `node`; objects get unknown fields when `unknown`."""
    if "anyOf" in node:  # int-or-string
        return st.one_of(
            st.integers(0, 2**40), st.from_regex(go_anchored(node["pattern"]), fullmatch=True)
        )
    kind = node.get("type")
    if kind == "string":
        return valid_string(node)
    if kind == "integer":
        return st.integers(node.get("minimum", -(2**31)), node.get("maximum", 2**31 - 1))
    if kind == "boolean":
        return st.booleans()
    if kind == "array":
        keys = node.get("x-kubernetes-list-map-keys")
        item = from_schema(node["items"], unknown=unknown)
        if keys:
            return st.lists(item, max_size=2, unique_by=lambda o: tuple(o[k] for k in keys))
        return st.lists(item, max_size=2)
    if kind == "object":
        if "additionalProperties" in node:
            return st.dictionaries(
                st.from_regex(r"[a-z][a-z.]{0,6}", fullmatch=True),
                from_schema(node["additionalProperties"], unknown=unknown),
                max_size=2,
            )
        properties: dict[str, Any] = node.get("properties", {})
        if not properties:  # ObjectMeta: opaque in the schema
            return _metadata(unknown)
        required = set(node.get("required", ()))
        known = st.fixed_dictionaries(
            {k: from_schema(v, unknown=unknown) for k, v in properties.items() if k in required},
            optional={
                k: from_schema(v, unknown=unknown)
                for k, v in properties.items()
                if k not in required
            },
        )
        if not unknown:
            return known
        extra = st.dictionaries(UNKNOWN_KEYS, JSON_VALUES, max_size=2)
        return st.tuples(known, extra).map(lambda t: {**t[1], **t[0]})
    raise AssertionError(f"no strategy for schema node {node!r}")


def _metadata(unknown: bool) -> st.SearchStrategy[dict[str, Any]]:
    name = st.from_regex(r"[a-z][a-z0-9-]{0,10}[a-z0-9]", fullmatch=True)
    labels = st.dictionaries(st.from_regex(r"[a-z]{1,8}", fullmatch=True), st.text(max_size=6))
    known = st.fixed_dictionaries(
        {"name": name},
        optional={
            "namespace": name,
            "labels": labels,
            "annotations": labels,
            "resourceVersion": st.from_regex(r"[0-9]{1,6}", fullmatch=True),
            "generation": st.integers(1, 10),
            "creationTimestamp": st.just("2026-01-01T00:00:00Z"),
        },
    )
    if not unknown:
        return known
    extra = st.dictionaries(UNKNOWN_KEYS, JSON_VALUES, max_size=2)
    return st.tuples(known, extra).map(lambda t: {**t[1], **t[0]})
