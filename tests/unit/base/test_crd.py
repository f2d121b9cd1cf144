"""shared.crd: properties of the generated CRD that hold without the reference at hand."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from shared import constants as k
from shared.crd import cocoonset_crd, cocoonset_schema, model_schema
from shared.models import MSG_CLASS_IMMUTABLE, MSG_RELEASE_MAIN_ONLY


def _nodes(schema: dict[str, Any], path: str = "") -> Iterator[tuple[str, dict[str, Any]]]:
    yield path or ".", schema
    for key, child in schema.get("properties", {}).items():
        yield from _nodes(child, f"{path}.{key}")
    if "items" in schema:
        yield from _nodes(schema["items"], f"{path}[]")
    if isinstance(schema.get("additionalProperties"), dict):
        yield from _nodes(schema["additionalProperties"], f"{path}{{}}")


def test_the_schema_is_structural() -> None:
    # kube-apiserver refuses a CRD whose schema is not structural: every node
    # has a type, or is int-or-string.
    untyped = [
        p
        for p, node in _nodes(cocoonset_schema())
        if "type" not in node and not node.get("x-kubernetes-int-or-string")
    ]
    assert untyped == []


def test_generator_hints_never_reach_the_crd() -> None:
    def keys(value: Any) -> Iterator[str]:
        if isinstance(value, dict):
            for key, v in value.items():
                yield key
                yield from keys(v)
        elif isinstance(value, list):
            for v in value:
                yield from keys(v)

    assert [key for key in keys(cocoonset_crd()) if key.startswith("x-cocoon-")] == []


def test_the_crd_carries_the_rules_validation_reports() -> None:
    rules = cocoonset_schema()["properties"]["spec"]["x-kubernetes-validations"]
    assert [r["message"] for r in rules] == [MSG_RELEASE_MAIN_ONLY, MSG_CLASS_IMMUTABLE]


def test_names_and_subresources() -> None:
    crd = cocoonset_crd()
    assert crd["metadata"]["name"] == k.CRD_NAME
    names = crd["spec"]["names"]
    assert (names["kind"], names["plural"], names["shortNames"][0], names["categories"]) == (
        "CocoonSet",
        "cocoonsets",
        "cs",
        ["cocoon"],
    )
    assert crd["spec"]["versions"][0]["subresources"] == {"status": {}}


def test_each_caller_gets_its_own_copy() -> None:
    first = cocoonset_crd()
    first["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"].clear()
    assert cocoonset_crd()["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]


def test_a_field_type_with_no_crd_schema_is_an_error() -> None:
    # A new field must not silently become a wrong (or missing) schema.
    class WithFloat(BaseModel):
        ratio: float

    class WithUnion(BaseModel):
        either: int | bool

    for model in (WithFloat, WithUnion):
        with pytest.raises(TypeError, match="no CRD schema"):
            model_schema(model)


def test_the_reference_is_not_copied_into_the_repo() -> None:
    # The CRD is generated, never stored: no manifest in the repo holds the
    # CocoonSet schema (the CLI prints it: `cocoon-hibernation crd`).
    skip = {".git", ".venv", ".hypothesis", ".mypy_cache", ".ruff_cache", ".pytest_cache"}
    repo = Path(__file__).resolve().parents[3]
    for path in repo.rglob("*"):
        if skip.intersection(path.parts) or not path.is_file():
            continue
        if path.suffix in {".yaml", ".yml", ".json"}:
            text = path.read_text(errors="replace")
            assert not ("openAPIV3Schema" in text and "CocoonSetSpec" in text), path
