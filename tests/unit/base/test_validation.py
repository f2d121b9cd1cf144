"""shared.validation: what kube-apiserver would say, field by field (table with ids)."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from shared import constants as k
from shared.validation import Violation, go_regex_search, validate_cocoonset

RELEASE = (
    'Invalid value: "object": hibernatePolicy=release requires agent.replicas=0 and no toolboxes'
)
IMMUTABLE = 'Invalid value: "object": snapshotCompatibilityClass is immutable once set'
NAME_RE = "'^[a-z0-9]([-a-z0-9]*[a-z0-9])?$'"
CLASS_RE = "'^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$'"


def cocoonset(**spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": k.API_VERSION,
        "kind": k.KIND,
        "metadata": {"name": "s", "namespace": "ns"},
        "spec": {"agent": {"image": "img"}, **spec},
    }


def agent(**fields: Any) -> dict[str, Any]:
    return {"image": "img", **fields}


VALID = [
    pytest.param(cocoonset(), id="minimal"),
    pytest.param(cocoonset(hibernatePolicy="release"), id="release-main-only"),
    pytest.param(cocoonset(hibernatePolicy="release", agent=agent(replicas=0)), id="release-0"),
    pytest.param(cocoonset(hibernatePolicy="release", toolboxes=[]), id="release-empty-toolboxes"),
    pytest.param(
        cocoonset(agent=agent(replicas=3), toolboxes=[{"name": "a"}, {"name": "b-2"}]),
        id="retain-with-everything",
    ),
    pytest.param(cocoonset(snapshotCompatibilityClass=""), id="class-empty"),
    pytest.param(cocoonset(snapshotCompatibilityClass="a" * 63), id="class-63"),
    pytest.param(cocoonset(snapshotCompatibilityClass="Intel_x.1-a"), id="class-charset"),
    pytest.param(cocoonset(agent=agent(probePort=0, storage=10)), id="port-0-int-quantity"),
    pytest.param(cocoonset(agent=agent(probePort=65535, storage="1.5Gi")), id="port-max"),
    pytest.param(cocoonset(agent=agent(replicas=2.0)), id="integral-float-is-integer"),
    pytest.param(cocoonset(hibernatePolicy=None, toolboxes=None), id="nulls-are-absent"),
    pytest.param(cocoonset(futureField={"x": 1}), id="unknown-fields-pruned-not-errors"),
    pytest.param(
        {**cocoonset(), "metadata": {"generateName": "s-"}}, id="generate-name-instead-of-name"
    ),
]


@pytest.mark.parametrize("obj", VALID)
def test_valid_objects_have_no_violations(obj: dict[str, Any]) -> None:
    assert validate_cocoonset(obj) == []


INVALID = [
    pytest.param(
        cocoonset(hibernatePolicy="release", agent=agent(replicas=1)),
        ["spec: " + RELEASE],
        id="release-with-replicas",
    ),
    pytest.param(
        cocoonset(hibernatePolicy="release", toolboxes=[{"name": "a"}]),
        ["spec: " + RELEASE],
        id="release-with-toolboxes",
    ),
    pytest.param(
        cocoonset(hibernatePolicy="delete"),
        [
            'spec.hibernatePolicy: Unsupported value: "delete": '
            'supported values: "retain", "release"'
        ],
        id="enum-hibernatePolicy",
    ),
    pytest.param(
        cocoonset(agent=agent(os="plan9")),
        [
            'spec.agent.os: Unsupported value: "plan9": supported values: '
            '"linux", "windows", "android", "macos"'
        ],
        id="enum-os",
    ),
    pytest.param(
        cocoonset(snapshotCompatibilityClass="a/b"),
        [
            'spec.snapshotCompatibilityClass: Invalid value: "a/b": '
            f"spec.snapshotCompatibilityClass in body should match {CLASS_RE}"
        ],
        id="class-pattern",
    ),
    pytest.param(
        cocoonset(snapshotCompatibilityClass="a" * 64),
        ["spec.snapshotCompatibilityClass: Too long: may not be more than 63 bytes"],
        id="class-too-long",
    ),
    pytest.param(
        cocoonset(toolboxes=[{"name": "ok"}, {"name": "Bad"}]),
        [
            'spec.toolboxes[1].name: Invalid value: "Bad": '
            f"spec.toolboxes[1].name in body should match {NAME_RE}"
        ],
        id="toolbox-name-pattern",
    ),
    pytest.param(
        cocoonset(toolboxes=[{"name": "a\n"}]),
        [
            'spec.toolboxes[0].name: Invalid value: "a\\n": '
            f"spec.toolboxes[0].name in body should match {NAME_RE}"
        ],
        id="toolbox-name-trailing-newline-go-regex",
    ),
    pytest.param(
        cocoonset(toolboxes=[{"name": ""}]),
        [
            'spec.toolboxes[0].name: Invalid value: "": '
            "spec.toolboxes[0].name in body should be at least 1 chars long",
            'spec.toolboxes[0].name: Invalid value: "": '
            f"spec.toolboxes[0].name in body should match {NAME_RE}",
        ],
        id="toolbox-name-empty",
    ),
    pytest.param(
        cocoonset(toolboxes=[{"image": "x"}]),
        ["spec.toolboxes[0].name: Required value"],
        id="toolbox-name-required",
    ),
    pytest.param(
        cocoonset(agent=agent(probePort=65536)),
        [
            "spec.agent.probePort: Invalid value: 65536: "
            "spec.agent.probePort in body should be less than or equal to 65535"
        ],
        id="probe-port-high",
    ),
    pytest.param(
        cocoonset(toolboxes=[{"name": "a", "vncPort": -1, "probePort": -5}]),
        [
            "spec.toolboxes[0].probePort: Invalid value: -5: "
            "spec.toolboxes[0].probePort in body should be greater than or equal to 0",
            "spec.toolboxes[0].vncPort: Invalid value: -1: "
            "spec.toolboxes[0].vncPort in body should be greater than or equal to 0",
        ],
        id="toolbox-ports-low",
    ),
    pytest.param(
        cocoonset(agent={"replicas": 0}),
        ["spec.agent.image: Required value"],
        id="image-required",
    ),
    pytest.param(
        cocoonset(agent=agent(image="")),
        [
            'spec.agent.image: Invalid value: "": '
            "spec.agent.image in body should be at least 1 chars long"
        ],
        id="image-empty",
    ),
    pytest.param(
        cocoonset(agent=agent(replicas=-1)),
        [
            "spec.agent.replicas: Invalid value: -1: "
            "spec.agent.replicas in body should be greater than or equal to 0"
        ],
        id="replicas-negative",
    ),
    pytest.param(
        cocoonset(agent=agent(replicas="2")),
        [
            'spec.agent.replicas: Invalid value: "string": '
            'spec.agent.replicas in body must be of type integer: "string"'
        ],
        id="replicas-type",
    ),
    pytest.param(
        cocoonset(agent=agent(storage="10 GB")),
        ['spec.agent.storage: Invalid value: "10 GB": spec.agent.storage in body should match'],
        id="quantity-pattern",
    ),
    pytest.param(
        cocoonset(agent=agent(resources={"limits": {"cpu": "lots"}})),
        [
            'spec.agent.resources.limits[cpu]: Invalid value: "lots": '
            "spec.agent.resources.limits[cpu] in body should match"
        ],
        id="quantity-in-map",
    ),
    pytest.param(
        cocoonset(agent=agent(resources={"claims": [{"name": "g"}, {"name": "g"}]})),
        ['spec.agent.resources.claims[1]: Duplicate value: {"name": "g"}'],
        id="list-map-duplicate-key",
    ),
    pytest.param(
        cocoonset(suspend="yes please"),
        [
            'spec.suspend: Invalid value: "string": '
            'spec.suspend in body must be of type boolean: "string"'
        ],
        id="boolean-type",
    ),
    pytest.param(
        {**cocoonset(), "spec": {}},
        ["spec.agent: Required value"],
        id="agent-required",
    ),
    pytest.param(
        {**cocoonset(), "metadata": {"name": "Bad_Name"}},
        ['metadata.name: Invalid value: "Bad_Name": a lowercase RFC 1123 subdomain'],
        id="metadata-name",
    ),
    pytest.param(
        {**cocoonset(), "metadata": {}},
        ["metadata.name: Required value: name or generateName is required"],
        id="metadata-name-required",
    ),
    pytest.param(
        {**cocoonset(), "apiVersion": "cocoonset.cocoonstack.io/v2"},
        [
            'apiVersion: Unsupported value: "cocoonset.cocoonstack.io/v2": '
            'supported values: "cocoonset.cocoonstack.io/v1"'
        ],
        id="api-version",
    ),
    pytest.param(
        {
            **cocoonset(),
            "status": {
                "conditions": [
                    {
                        "type": "Ready",
                        "status": "True",
                        "reason": "Up",
                        "message": "",
                        "lastTransitionTime": "yesterday",
                    }
                ]
            },
        },
        [
            'status.conditions[0].lastTransitionTime: Invalid value: "yesterday": '
            'status.conditions[0].lastTransitionTime in body must be of type date-time: "yesterday"'
        ],
        id="date-time-format",
    ),
    pytest.param(
        {**cocoonset(), "status": {"phase": "Sleeping", "conditions": [{"type": "Ready"}]}},
        [
            "status.conditions[0].lastTransitionTime: Required value",
            "status.conditions[0].message: Required value",
            "status.conditions[0].reason: Required value",
            "status.conditions[0].status: Required value",
            'status.phase: Unsupported value: "Sleeping"',
        ],
        id="status-schema-too",
    ),
]


@pytest.mark.parametrize(("obj", "expected"), INVALID)
def test_invalid_objects_say_what_kube_apiserver_says(
    obj: dict[str, Any], expected: list[str]
) -> None:
    got = sorted(str(v) for v in validate_cocoonset(obj))
    # Each expected line is the start of exactly one reported line (long regexps are elided).
    assert len(got) == len(expected), got
    for line, want in zip(got, sorted(expected), strict=True):
        assert line.startswith(want), (line, want)


@pytest.mark.parametrize(
    ("old_class", "new_class", "violates"),
    [
        pytest.param(None, None, False, id="never-set"),
        pytest.param(None, "a", False, id="set-first-time"),
        pytest.param("a", "a", False, id="kept"),
        pytest.param("a", "b", True, id="changed"),
        pytest.param("a", None, True, id="removed"),
        pytest.param("", None, True, id="empty-counts-as-set"),
        pytest.param("", "a", True, id="empty-to-value"),
    ],
)
def test_snapshot_class_is_immutable_once_set(
    old_class: str | None, new_class: str | None, violates: bool
) -> None:
    old = cocoonset() if old_class is None else cocoonset(snapshotCompatibilityClass=old_class)
    new = cocoonset() if new_class is None else cocoonset(snapshotCompatibilityClass=new_class)
    assert validate_cocoonset(new, old) == ([Violation("spec", IMMUTABLE)] if violates else [])
    # On create there is no old object: the transition rule does not run.
    assert validate_cocoonset(new) == []


def test_validation_does_not_modify_its_input() -> None:
    obj = cocoonset(hibernatePolicy="release", agent=agent(replicas=2))
    before = copy.deepcopy(obj)
    validate_cocoonset(obj, obj)
    assert obj == before


@pytest.mark.parametrize(
    ("value", "matches"),
    [("abc", True), ("abc\n", False), ("", False), ("a-b", True), ("-a", False)],
)
def test_patterns_follow_go_regexp(value: str, matches: bool) -> None:
    assert go_regex_search(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$", value) is matches


def test_not_an_object() -> None:
    assert [str(v) for v in validate_cocoonset(["a"])] == [  # type: ignore[arg-type]
        'Invalid value: "array": <root> in body must be of type object: "array"'
    ]
