"""The CRD generated from the models is the real one, keyword for keyword.

The reference (`../shared/reference/crds/`) is the operator's controller-gen
output. The whole `spec` must be equal: names, scope, printer columns,
subresources and the openAPIV3Schema including every description, default,
enum, pattern, bound, required list, list/map marker and CEL rule. The
targeted tests below say *which* kind of keyword drifted when the whole-object
comparison fails, so a failure reads as a sentence, not a 600-line diff.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from shared.crd import cocoonset_crd
from tests.conftest import REFERENCE_DIR, needs_reference

pytestmark = needs_reference

CRD_FILE = "crds/cocoonset.cocoonstack.io_cocoonsets.yaml"


@pytest.fixture(scope="module")
def reference() -> dict[str, Any]:
    assert REFERENCE_DIR is not None
    doc: dict[str, Any] = yaml.safe_load(Path(REFERENCE_DIR, CRD_FILE).read_text())
    return doc


@pytest.fixture(scope="module")
def generated() -> dict[str, Any]:
    return cocoonset_crd()


def _schema(crd: dict[str, Any]) -> dict[str, Any]:
    schema: dict[str, Any] = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    return schema


def _nodes(schema: dict[str, Any], path: str = "") -> Iterator[tuple[str, dict[str, Any]]]:
    """Every schema node with a readable path (`.spec.toolboxes[].name`)."""
    yield path or ".", schema
    for key, child in schema.get("properties", {}).items():
        yield from _nodes(child, f"{path}.{key}")
    if "items" in schema:
        yield from _nodes(schema["items"], f"{path}[]")
    if isinstance(schema.get("additionalProperties"), dict):
        yield from _nodes(schema["additionalProperties"], f"{path}{{}}")


def _keyword_table(crd: dict[str, Any], keywords: set[str]) -> dict[str, dict[str, Any]]:
    return {
        path: {kw: node[kw] for kw in sorted(keywords) if kw in node}
        for path, node in _nodes(_schema(crd))
    }


def test_the_whole_crd_spec_equals_the_reference(
    generated: dict[str, Any], reference: dict[str, Any]
) -> None:
    assert generated["spec"] == reference["spec"]
    assert generated["metadata"]["name"] == reference["metadata"]["name"]
    assert (generated["apiVersion"], generated["kind"]) == (
        reference["apiVersion"],
        reference["kind"],
    )


def test_same_fields_at_the_same_paths(
    generated: dict[str, Any], reference: dict[str, Any]
) -> None:
    assert sorted(p for p, _ in _nodes(_schema(generated))) == sorted(
        p for p, _ in _nodes(_schema(reference))
    )


@pytest.mark.parametrize(
    "keywords",
    [
        pytest.param({"type", "anyOf", "format", "x-kubernetes-int-or-string"}, id="types"),
        pytest.param({"enum"}, id="enums"),
        pytest.param({"default"}, id="defaults"),
        pytest.param({"pattern", "minLength", "maxLength", "minimum", "maximum"}, id="bounds"),
        pytest.param({"required"}, id="required"),
        pytest.param(
            {"x-kubernetes-list-type", "x-kubernetes-list-map-keys", "x-kubernetes-map-type"},
            id="list-and-map-markers",
        ),
        pytest.param({"x-kubernetes-validations"}, id="cel-rules"),
        pytest.param({"description"}, id="descriptions"),
    ],
)
def test_each_kind_of_keyword_matches(
    generated: dict[str, Any], reference: dict[str, Any], keywords: set[str]
) -> None:
    ours, theirs = _keyword_table(generated, keywords), _keyword_table(reference, keywords)
    drifted = {p: (ours.get(p), theirs.get(p)) for p in theirs.keys() | ours.keys()}
    drifted = {p: pair for p, pair in drifted.items() if pair[0] != pair[1]}
    assert drifted == {}, "path: (generated, reference)"
