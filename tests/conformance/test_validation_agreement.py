"""The embedded API and `shared.validation` (the project's offline mirror of the
apiserver's CocoonSet validation) must refuse the same manifests with the same
causes: each is a check on the other's reading of kube-apiserver."""

from __future__ import annotations

import json
from typing import Any

import pytest
from kubernetes import client

from devstack.kubeapi.schema import BLOCKING_REASONS, RULES_NOT_CHECKED
from shared.validation import validate_cocoonset
from tests.conformance.helpers import Custom, cocoonset

CASES = [
    pytest.param({}, id="valid"),
    pytest.param(
        {"hibernatePolicy": "release", "agent": {"image": "i", "replicas": 2}}, id="cel-release"
    ),
    pytest.param({"hibernatePolicy": "sometimes"}, id="enum"),
    pytest.param({"agent": {"image": "i", "replicas": -1}}, id="minimum"),
    pytest.param({"agent": {"image": "i", "replicas": "two"}}, id="type-integer"),
    pytest.param({"agent": {}}, id="required-image"),
    pytest.param({"suspend": "yes"}, id="type-boolean"),
    pytest.param({"agent": None}, id="null-is-absent"),
    pytest.param({"snapshotCompatibilityClass": "a" * 64}, id="max-length"),
]


@pytest.mark.parametrize("spec", CASES)
def test_embedded_api_and_shared_validation_agree_on_create(
    k8s_api: client.ApiClient, spec: dict[str, Any]
) -> None:
    body = cocoonset("x")
    if "agent" in spec and spec["agent"] is None:
        body["spec"] = {"agent": None}
    else:
        body["spec"].update(spec)
    expected = sorted((v.field, v.message) for v in validate_cocoonset(body))
    causes: list[dict[str, str]] = []
    try:
        Custom(k8s_api).create(body)
    except client.ApiException as exc:
        assert exc.status == 422, exc.body
        causes = json.loads(exc.body)["details"]["causes"]
    # After a blocking schema failure (enum, type, required...) the server skips the CEL
    # rules and says so in one extra cause; the offline validator reports the failures only.
    skipped = [c["message"] for c in causes if c.get("field") == "<nil>"]
    blocking = any(c["reason"] in BLOCKING_REASONS for c in causes)
    assert skipped == ([RULES_NOT_CHECKED] if blocking else [])
    got = sorted((c["field"], c["message"]) for c in causes if c.get("field") != "<nil>")
    assert got == expected


@pytest.mark.parametrize(
    ("before", "after"),
    [
        pytest.param("a", "b", id="class-changed"),
        pytest.param("a", "a", id="class-kept"),
        pytest.param(None, "b", id="class-first-set"),
    ],
)
def test_embedded_api_and_shared_validation_agree_on_update(
    k8s_api: client.ApiClient, before: str | None, after: str
) -> None:
    custom = Custom(k8s_api)
    old = custom.create(
        cocoonset("x", **({"snapshotCompatibilityClass": before} if before else {}))
    )
    new = json.loads(json.dumps(old))
    new["spec"]["snapshotCompatibilityClass"] = after
    expected = sorted((v.field, v.message) for v in validate_cocoonset(new, old))
    try:
        custom.replace("x", new)
        got: list[tuple[str, str]] = []
    except client.ApiException as exc:
        assert exc.status == 422, exc.body
        got = sorted((c["field"], c["message"]) for c in json.loads(exc.body)["details"]["causes"])
    assert got == expected
