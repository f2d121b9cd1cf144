"""shared.validation accepts exactly what the reference CRD accepts.

Two oracles, both read from the reference CRD (never from our generated copy):

- the `x-kubernetes-validations` CEL rules, evaluated with a real CEL
  implementation (cel-python) on generated specs and old/new pairs, the way
  kube-apiserver evaluates them (`self` is the spec, `oldSelf` the old spec,
  transition rules only on update);
- the schema keywords (type, enum, pattern, min/maxLength, minimum/maximum)
  of every leaf field, applied to generated values.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from shared.validation import validate_cocoonset
from tests.conftest import REFERENCE_DIR, needs_reference
from tests.unit.base.schema_strategies import go_anchored

celpy = pytest.importorskip(
    "celpy", reason="cel-python is in the 'local' extra: uv sync --all-extras"
)

pytestmark = needs_reference

CRD_FILE = "crds/cocoonset.cocoonstack.io_cocoonsets.yaml"


def _reference_schema() -> dict[str, Any]:
    if REFERENCE_DIR is None:  # collected but skipped: keep collection working
        return {"properties": {"spec": {"properties": {}}, "status": {"properties": {}}}}
    crd = yaml.safe_load(Path(REFERENCE_DIR, CRD_FILE).read_text())
    schema: dict[str, Any] = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    return schema


SCHEMA = _reference_schema()
SPEC_RULES: list[dict[str, str]] = SCHEMA["properties"]["spec"].get("x-kubernetes-validations", [])


class CelRule:
    def __init__(self, rule: str, message: str) -> None:
        env = celpy.Environment()
        self.program = env.program(env.compile(rule))
        self.message = message
        # kube-apiserver runs a rule that reads oldSelf only on update.
        self.transition = "oldSelf" in rule

    def accepts(self, spec: dict[str, Any], old_spec: dict[str, Any] | None) -> bool:
        activation = {"self": celpy.json_to_cel(spec)}
        if old_spec is not None:
            activation["oldSelf"] = celpy.json_to_cel(old_spec)
        result = self.program.evaluate(activation)
        assert isinstance(result, celpy.celtypes.BoolType), f"CEL error: {result!r}"
        return bool(result)


# Compiled once, at import: compiling is the slow part of cel-python.
RULES = [CelRule(r["rule"], r["message"]) for r in SPEC_RULES]


def cel_failures(spec: dict[str, Any], old_spec: dict[str, Any] | None) -> list[str]:
    """The messages of the rules kube-apiserver would report for this create/update."""
    return sorted(
        r.message
        for r in RULES
        if not (r.transition and old_spec is None) and not r.accepts(spec, old_spec)
    )


# --- generated specs -------------------------------------------------------------------------
# Valid for the schema (so the only possible violations are the rules'), with every field a
# rule reads present or absent, and few snapshot classes so old and new often collide.

CLASSES = st.sampled_from(["", "a", "intel-spr", "amd.zen4", "A_b-1"])
TOOLBOX = st.fixed_dictionaries(
    {"name": st.sampled_from(["a", "browser", "win-1"])},
    optional={
        "vncPort": st.integers(0, 65535),
        "mode": st.sampled_from(["run", "clone", "static"]),
    },
)
AGENT = st.fixed_dictionaries(
    {"image": st.just("ghcr.io/cocoonstack/ubuntu")},
    optional={"replicas": st.integers(0, 3), "mode": st.sampled_from(["clone", "run"])},
)
SPEC = st.fixed_dictionaries(
    {"agent": AGENT},
    optional={
        "hibernatePolicy": st.sampled_from(["retain", "release"]),
        "toolboxes": st.lists(TOOLBOX, max_size=2, unique_by=lambda t: t["name"]),
        "snapshotCompatibilityClass": CLASSES,
        "suspend": st.booleans(),
        "nodePool": st.sampled_from(["default", "gpu"]),
    },
)


def cocoonset(spec: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": "cocoonset.cocoonstack.io/v1",
        "kind": "CocoonSet",
        "metadata": {"name": "s", "namespace": "ns"},
        "spec": spec,
    }


def test_the_reference_has_the_two_rules() -> None:
    assert len(SPEC_RULES) == 2


@settings(max_examples=500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(spec=SPEC, old_spec=st.one_of(st.none(), SPEC))
def test_validation_accepts_exactly_what_the_cel_rules_accept(
    spec: dict[str, Any], old_spec: dict[str, Any] | None
) -> None:
    old = None if old_spec is None else cocoonset(old_spec)
    ours = sorted(str(v) for v in validate_cocoonset(cocoonset(spec), old))
    expected = [f'spec: Invalid value: "object": {m}' for m in cel_failures(spec, old_spec)]
    assert ours == expected


# --- schema keywords on every leaf field ------------------------------------------------------


def _leaves(node: dict[str, Any], path: list[Any]) -> list[tuple[list[Any], dict[str, Any]]]:
    """(path, node) of every leaf under spec and status; path items: key, [] or {}."""
    if "properties" in node:
        out = []
        for key, child in node["properties"].items():
            out += _leaves(child, [*path, key])
        return out
    if "items" in node:
        return _leaves(node["items"], [*path, []])
    if isinstance(node.get("additionalProperties"), dict):
        return _leaves(node["additionalProperties"], [*path, {}])
    return [(path, node)]


LEAVES = [
    (path, node)
    for top in ("spec", "status")
    for path, node in _leaves(SCHEMA["properties"][top], [top])
]


def _filler(node: dict[str, Any]) -> Any:
    """A valid value for a field the test is not about (required fields filled in)."""
    if "enum" in node:
        return node["enum"][0]
    if node.get("format") == "date-time":
        return "2026-01-01T00:00:00Z"
    if node.get("type") == "object":
        return {key: _filler(node["properties"][key]) for key in node.get("required", ())}
    return {"string": "a", "integer": 0, "boolean": False}.get(node.get("type", ""), "a")


def _build(node: dict[str, Any], path: list[Any], value: Any) -> Any:
    """A minimal valid value for `node` holding `value` at `path`."""
    if not path:
        return value
    step, rest = path[0], path[1:]
    if isinstance(step, str):
        obj = _filler(node)
        obj[step] = _build(node["properties"][step], rest, value)
        return obj
    if isinstance(step, list):
        return [_build(node["items"], rest, value)]
    return {"k": _build(node["additionalProperties"], rest, value)}


def place(path: list[Any], value: Any) -> tuple[dict[str, Any], str]:
    """A valid CocoonSet with `value` at `path`, and the field path kube would report."""
    obj = {**cocoonset({"agent": {"image": "img"}}), **_build(SCHEMA, path, value)}
    shown = ""
    for step in path:
        if isinstance(step, str):
            shown = f"{shown}.{step}" if shown else step
        else:
            shown += "[0]" if isinstance(step, list) else "[k]"
    return obj, shown


# RFC 3339 date-time, what the API server's `format: date-time` accepts (an approximation
# of go-openapi's strfmt layouts: the tested values are near-misses of the RFC layout).
RFC3339 = re.compile(r"\A\d{4}-\d{2}-\d{2}[Tt]\d{2}:\d{2}:\d{2}(\.\d+)?([Zz]|[+-]\d{2}:\d{2})\Z")


def go_search(pattern: str, value: str) -> bool:
    return re.search(go_anchored(pattern), value) is not None


def reference_failures(node: dict[str, Any], value: Any) -> set[str]:
    """The keywords of the reference schema that `value` breaks."""
    is_int = isinstance(value, int) and not isinstance(value, bool)
    if "anyOf" in node:
        if not (is_int or isinstance(value, str)):
            return {"type"}
    else:
        kind = node["type"]
        ok = {
            "string": isinstance(value, str),
            "integer": is_int,
            "boolean": isinstance(value, bool),
        }[kind]
        if not ok:
            return {"type"}
    if "enum" in node:
        return set() if value in node["enum"] else {"enum"}
    failed = set()
    if isinstance(value, str):
        if len(value) > node.get("maxLength", len(value)):
            failed.add("maxLength")
        if len(value) < node.get("minLength", 0):
            failed.add("minLength")
        if "pattern" in node and not go_search(node["pattern"], value):
            failed.add("pattern")
        if node.get("format") == "date-time" and not RFC3339.match(value):
            failed.add("format")
    if is_int:
        if value < node.get("minimum", value):
            failed.add("minimum")
        if value > node.get("maximum", value):
            failed.add("maximum")
    return failed


KEYWORD_OF = [
    ("Unsupported value", "enum"),
    ("Too long", "maxLength"),
    ("should be at least", "minLength"),
    ("should match", "pattern"),
    ("greater than or equal", "minimum"),
    ("less than or equal", "maximum"),
    ("must be of type date-time", "format"),
    ("must be of type", "type"),
]


def _keyword(message: str) -> str:
    return next(kw for marker, kw in KEYWORD_OF if marker in message)


def values_for(node: dict[str, Any]) -> st.SearchStrategy[Any]:
    """Valid and invalid values: near the bounds, matching and not matching, wrong types."""
    options: list[st.SearchStrategy[Any]] = [
        st.text(max_size=8),
        st.integers(-3, 70000),
        st.booleans(),
    ]
    if "enum" in node:
        options.append(st.sampled_from(node["enum"]))
    if "pattern" in node:
        options.append(st.from_regex(go_anchored(node["pattern"]), fullmatch=True))
        options.append(st.from_regex(node["pattern"]))  # may carry a trailing newline
    if node.get("format") == "date-time":
        options.append(
            st.sampled_from(["2026-01-01T00:00:00Z", "2026-01-01T00:00:00.5+02:00", "yesterday"])
        )
    if "maxLength" in node:
        n = node["maxLength"]
        options.append(st.sampled_from(["a" * n, "a" * (n + 1), "A" + "b" * (n - 1)]))
    for bound in ("minimum", "maximum"):
        if bound in node:
            options.append(st.integers(node[bound] - 2, node[bound] + 2))
    return st.one_of(options)


@settings(max_examples=500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_schema_keywords_agree_with_the_reference_schema(data: st.DataObject) -> None:
    path, node = data.draw(st.sampled_from(LEAVES), label="field")
    value = data.draw(values_for(node), label="value")
    obj, shown = place(path, value)
    ours = {_keyword(v.message) for v in validate_cocoonset(obj) if v.field == shown}
    assert ours == reference_failures(node, value)
    # and nothing else in the object is reported
    assert all(v.field == shown for v in validate_cocoonset(obj))
