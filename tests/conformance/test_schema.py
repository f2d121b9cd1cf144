"""CRD structural schemas: defaulting, pruning, OpenAPI validation and CEL rules."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes import client

from devstack.kubeapi.schema import BLOCKING_REASONS, RULES_NOT_CHECKED
from tests.conformance.helpers import Custom, cocoonset, expect_error, gone, wait_for

TEST_GROUP = "conformance.example.com"


def _widget_crd() -> dict[str, Any]:
    spec_schema = {
        "type": "object",
        "required": ["size"],
        "properties": {
            "size": {"type": "integer", "minimum": 1, "maximum": 10},
            "color": {"type": "string", "enum": ["red", "blue"], "default": "red"},
            "code": {"type": "string", "pattern": "^[a-z]+$", "minLength": 2, "maxLength": 5},
            "port": {"x-kubernetes-int-or-string": True},
            "since": {"type": "string", "format": "date-time"},
            "tags": {
                "type": "array",
                "items": {"type": "string"},
                "maxItems": 2,
                "x-kubernetes-list-type": "set",
            },
            "settings": {
                "type": "object",
                "default": {},
                "properties": {"mode": {"type": "string", "default": "auto"}},
            },
            "free": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
            "owner": {
                "type": "string",
                "x-kubernetes-validations": [
                    {"rule": "self == oldSelf", "message": "owner is immutable"}
                ],
            },
        },
        "x-kubernetes-validations": [
            {
                "rule": "self.size <= 5 || self.color == 'blue'",
                "message": "big widgets must be blue",
            },
            {
                "rule": "!has(self.code) || self.code != 'zz'",
                "messageExpression": "'code ' + self.code + ' is reserved'",
            },
        ],
    }
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"widgets.{TEST_GROUP}"},
        "spec": {
            "group": TEST_GROUP,
            "scope": "Namespaced",
            "names": {
                "plural": "widgets",
                "singular": "widget",
                "kind": "Widget",
                "listKind": "WidgetList",
            },
            "versions": [
                {
                    "name": "v1",
                    "served": True,
                    "storage": True,
                    "subresources": {"status": {}},
                    "schema": {
                        "openAPIV3Schema": {
                            "type": "object",
                            "properties": {
                                "spec": spec_schema,
                                "status": {
                                    "type": "object",
                                    "x-kubernetes-preserve-unknown-fields": True,
                                },
                            },
                        }
                    },
                }
            ],
        },
    }


class Widgets:
    def __init__(self, api: client.ApiClient) -> None:
        self.co = client.CustomObjectsApi(api)

    def create(self, name: str, spec: dict[str, Any]) -> dict[str, Any]:
        body = {
            "apiVersion": f"{TEST_GROUP}/v1",
            "kind": "Widget",
            "metadata": {"name": name},
            "spec": spec,
        }
        out: dict[str, Any] = self.co.create_namespaced_custom_object(
            TEST_GROUP, "v1", "default", "widgets", body
        )
        return out

    def patch(self, name: str, body: dict[str, Any]) -> dict[str, Any]:
        out: dict[str, Any] = self.co.patch_namespaced_custom_object(
            TEST_GROUP, "v1", "default", "widgets", name, body
        )
        return out


@pytest.fixture
def widgets(k8s_api: client.ApiClient) -> Iterator[Widgets]:
    ext = client.ApiextensionsV1Api(k8s_api)
    ext.create_custom_resource_definition(_widget_crd())

    def established() -> bool:
        # A real server answers the create before its controllers accept the names and
        # establish the resource: clients wait for the condition, as kubectl wait does.
        crd = ext.read_custom_resource_definition(f"widgets.{TEST_GROUP}")
        conds = crd.status.conditions or []
        return {c.type for c in conds if c.status == "True"} >= {"Established", "NamesAccepted"}

    wait_for(established, timeout=30)
    widgets = Widgets(k8s_api)
    wait_for(
        lambda: (
            not gone(
                lambda: widgets.co.list_namespaced_custom_object(
                    TEST_GROUP, "v1", "default", "widgets"
                )
            )
        ),
        timeout=30,
    )
    yield widgets


def test_crd_created_through_the_api_is_served_and_discoverable(
    k8s_api: client.ApiClient, widgets: Widgets
) -> None:
    resources = client.CustomObjectsApi(k8s_api).get_api_resources(TEST_GROUP, "v1")
    assert [r.name for r in resources.resources] == ["widgets", "widgets/status"]
    assert widgets.create("w", {"size": 1})["kind"] == "Widget"


def test_deleting_the_crd_removes_its_objects_and_endpoint(
    k8s_api: client.ApiClient, widgets: Widgets
) -> None:
    widgets.create("w", {"size": 1})
    ext = client.ApiextensionsV1Api(k8s_api)
    ext.delete_custom_resource_definition(f"widgets.{TEST_GROUP}")
    co = client.CustomObjectsApi(k8s_api)
    # Asynchronous upstream: the CRD's finalizer deletes its objects, then the CRD and
    # its endpoint go.
    wait_for(
        lambda: gone(lambda: ext.read_custom_resource_definition(f"widgets.{TEST_GROUP}")),
        timeout=30,
    )
    wait_for(
        lambda: gone(
            lambda: co.list_namespaced_custom_object(TEST_GROUP, "v1", "default", "widgets")
        ),
        timeout=30,
    )
    # (A real server answers an unknown group's path with a plain-text "404 page not found".)


def test_defaults_are_applied_on_create_including_nested_objects(widgets: Widgets) -> None:
    out = widgets.create("w", {"size": 2})
    assert out["spec"]["color"] == "red"
    assert out["spec"]["settings"] == {"mode": "auto"}


def test_cocoonset_defaults_from_its_crd(k8s_api: client.ApiClient) -> None:
    out = Custom(k8s_api).create(cocoonset("x"))
    assert out["spec"]["hibernatePolicy"] == "retain"
    assert out["spec"]["agent"]["replicas"] == 0


def test_unknown_fields_are_pruned_except_under_preserve_unknown_fields(widgets: Widgets) -> None:
    out = widgets.create("w", {"size": 2, "bogus": 1, "free": {"anything": {"goes": True}}})
    assert "bogus" not in out["spec"]
    assert out["spec"]["free"] == {"anything": {"goes": True}}


def test_strict_field_validation_rejects_unknown_fields_with_400(k8s_api: client.ApiClient) -> None:
    st = expect_error(
        400, Custom(k8s_api).create, dict(cocoonset("x"), extra=1), field_validation="Strict"
    )
    assert 'unknown field "extra"' in st["message"]


@pytest.mark.parametrize(
    ("spec", "field", "message"),
    [
        pytest.param({}, "spec.size", "Required value", id="required"),
        pytest.param(
            {"size": "two"},
            "spec.size",
            'Invalid value: "string": spec.size in body must be of type integer: "string"',
            id="type",
        ),
        pytest.param(
            {"size": 0},
            "spec.size",
            "Invalid value: 0: spec.size in body should be greater than or equal to 1",
            id="minimum",
        ),
        pytest.param(
            {"size": 11},
            "spec.size",
            "Invalid value: 11: spec.size in body should be less than or equal to 10",
            id="maximum",
        ),
        pytest.param(
            {"size": 1, "color": "green"},
            "spec.color",
            'Unsupported value: "green": supported values: "red", "blue"',
            id="enum",
        ),
        pytest.param(
            {"size": 1, "code": "ABC"},
            "spec.code",
            "Invalid value: \"ABC\": spec.code in body should match '^[a-z]+$'",
            id="pattern",
        ),
        pytest.param(
            {"size": 1, "code": "a"},
            "spec.code",
            'Invalid value: "a": spec.code in body should be at least 2 chars long',
            id="min-length",
        ),
        pytest.param(
            {"size": 1, "code": "abcdef"},
            "spec.code",
            "Too long: may not be more than 5 bytes",
            id="max-length",
        ),
        pytest.param(
            {"size": 1, "port": True},
            "spec.port",
            'Invalid value: "boolean": spec.port in body must be of type integer,string: "boolean"',
            id="int-or-string",
        ),
        pytest.param(
            {"size": 1, "code": "abc\n"},
            "spec.code",
            "Invalid value: \"abc\\n\": spec.code in body should match '^[a-z]+$'",
            id="pattern-dollar-is-end-of-text",
        ),
        pytest.param(
            {"size": 1, "tags": ["a", "b", "c"]},
            "spec.tags",
            "Too many: 3: must have at most 2 items",
            id="max-items",
        ),
        pytest.param(
            {"size": 1, "tags": ["a", "a"]}, "spec.tags[1]", 'Duplicate value: "a"', id="list-set"
        ),
        pytest.param(
            {"size": 1, "since": "yesterday"},
            "spec.since",
            'Invalid value: "yesterday": spec.since in body must be of type date-time: "yesterday"',
            id="format-date-time",
        ),
    ],
)
def test_openapi_schema_violations_are_422_with_field_causes(
    widgets: Widgets, spec: dict[str, Any], field: str, message: str | None
) -> None:
    st = expect_error(422, widgets.create, "w", spec)
    assert st["reason"] == "Invalid"
    assert st["details"]["kind"] == "Widget"
    assert st["details"]["group"] == TEST_GROUP
    cause, *rest = st["details"]["causes"]
    assert cause["field"] == field
    if cause["reason"] in BLOCKING_REASONS:
        # The CEL rules did not run on a value of the wrong shape; one cause says so.
        assert [(c["field"], c["message"]) for c in rest] == [("<nil>", RULES_NOT_CHECKED)]
    if message is not None:
        assert cause["message"] == message
        if not rest:
            assert st["message"] == f'Widget.{TEST_GROUP} "w" is invalid: {field}: {message}'


def test_cel_rule_failure_is_422_with_the_rule_message(k8s_api: client.ApiClient) -> None:
    custom = Custom(k8s_api)
    body = cocoonset("x", hibernatePolicy="release")
    body["spec"]["agent"]["replicas"] = 1
    st = expect_error(422, custom.create, body)
    assert st["message"] == (
        'CocoonSet.cocoonset.cocoonstack.io "x" is invalid: spec: Invalid value: "object": '
        "hibernatePolicy=release requires agent.replicas=0 and no toolboxes"
    )
    assert st["details"]["causes"] == [
        {
            "reason": "FieldValueInvalid",
            "message": 'Invalid value: "object": '
            "hibernatePolicy=release requires agent.replicas=0 and no toolboxes",
            "field": "spec",
        }
    ]


def test_cel_rule_passes_when_satisfied(k8s_api: client.ApiClient) -> None:
    out = Custom(k8s_api).create(cocoonset("x", hibernatePolicy="release"))
    assert out["spec"]["hibernatePolicy"] == "release"


def test_cel_message_expression_renders_the_message(widgets: Widgets) -> None:
    st = expect_error(422, widgets.create, "w", {"size": 1, "code": "zz"})
    assert st["details"]["causes"][0]["message"] == 'Invalid value: "object": code zz is reserved'


def test_cel_transition_rule_uses_old_self_on_update_only(k8s_api: client.ApiClient) -> None:
    custom = Custom(k8s_api)
    custom.create(
        cocoonset("x", snapshotCompatibilityClass="a")
    )  # no oldSelf on create: rule skipped
    st = expect_error(422, custom.patch, "x", {"spec": {"snapshotCompatibilityClass": "b"}})
    assert st["message"].endswith(
        'spec: Invalid value: "object": snapshotCompatibilityClass is immutable once set'
    )
    assert custom.patch("x", {"spec": {"nodePool": "gpu"}})["spec"]["nodePool"] == "gpu"


def test_cel_transition_rule_on_field_skipped_when_old_value_absent(widgets: Widgets) -> None:
    widgets.create("w", {"size": 1})
    assert widgets.patch("w", {"spec": {"owner": "me"}})["spec"]["owner"] == "me"
    st = expect_error(422, widgets.patch, "w", {"spec": {"owner": "you"}})
    assert st["details"]["causes"][0] == {
        "reason": "FieldValueInvalid",
        "message": 'Invalid value: "string": owner is immutable',
        "field": "spec.owner",
    }


def test_schema_validation_also_guards_updates(widgets: Widgets) -> None:
    widgets.create("w", {"size": 1})
    st = expect_error(422, widgets.patch, "w", {"spec": {"size": 8}})
    assert (
        st["details"]["causes"][0]["message"] == 'Invalid value: "object": big widgets must be blue'
    )


def test_defaults_added_to_the_schema_later_show_on_read_of_existing_objects(
    k8s_api: client.ApiClient, widgets: Widgets
) -> None:
    widgets.create("w", {"size": 1})
    ext = client.ApiextensionsV1Api(k8s_api)
    crd = ext.read_custom_resource_definition(f"widgets.{TEST_GROUP}")
    body = k8s_api.sanitize_for_serialization(crd)
    spec_props = body["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"][
        "properties"
    ]
    spec_props["shape"] = {"type": "string", "default": "round"}
    ext.replace_custom_resource_definition(f"widgets.{TEST_GROUP}", body)

    def shape() -> Any:
        got = client.CustomObjectsApi(k8s_api).get_namespaced_custom_object(
            TEST_GROUP, "v1", "default", "widgets", "w"
        )
        return got["spec"].get("shape")

    # A real server swaps the resource's handler a moment after the CRD update.
    wait_for(lambda: shape() == "round", timeout=30)
