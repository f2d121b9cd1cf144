"""Label and field selectors with apimachinery's grammar and semantics."""

from __future__ import annotations

import pytest
from kubernetes import client

from tests.conformance.helpers import expect_error, new_namespace, pod


@pytest.fixture
def labelled(k8s_api: client.ApiClient) -> client.CoreV1Api:
    core = client.CoreV1Api(k8s_api)
    core.create_namespaced_pod("default", pod("a", labels={"app": "web", "tier": "1"}, node="n1"))
    core.create_namespaced_pod("default", pod("b", labels={"app": "db", "tier": "2"}))
    core.create_namespaced_pod("default", pod("c", labels={"app": "web"}))
    core.create_namespaced_pod("default", pod("d"))
    core.patch_namespaced_pod_status("a", "default", {"status": {"phase": "Running"}})
    return core


@pytest.mark.parametrize(
    ("selector", "names"),
    [
        pytest.param("app=web", ["a", "c"], id="equals"),
        pytest.param("app==web", ["a", "c"], id="double-equals"),
        pytest.param("app!=web", ["b", "d"], id="not-equals-includes-missing-key"),
        pytest.param("app in (web,db)", ["a", "b", "c"], id="in"),
        pytest.param("app notin (web)", ["b", "d"], id="notin-includes-missing-key"),
        pytest.param("tier", ["a", "b"], id="exists"),
        pytest.param("!tier", ["c", "d"], id="does-not-exist"),
        pytest.param("app=web,tier", ["a"], id="and"),
        pytest.param("tier>1", ["b"], id="greater-than"),
        pytest.param("", ["a", "b", "c", "d"], id="empty-matches-all"),
    ],
)
def test_label_selector_operators(
    labelled: client.CoreV1Api, selector: str, names: list[str]
) -> None:
    got = [
        p.metadata.name
        for p in labelled.list_namespaced_pod("default", label_selector=selector).items
    ]
    assert got == names


@pytest.mark.parametrize(
    ("selector", "names"),
    [
        pytest.param("metadata.name=b", ["b"], id="name"),
        pytest.param("metadata.namespace=default", ["a", "b", "c", "d"], id="namespace"),
        pytest.param("spec.nodeName=n1", ["a"], id="node"),
        pytest.param("spec.nodeName=", ["b", "c", "d"], id="unscheduled"),
        pytest.param("status.phase!=Running", ["b", "c", "d"], id="phase-not"),
        pytest.param("status.phase=Running,metadata.name=a", ["a"], id="and"),
    ],
)
def test_field_selectors_on_pods(
    labelled: client.CoreV1Api, selector: str, names: list[str]
) -> None:
    got = [
        p.metadata.name
        for p in labelled.list_namespaced_pod("default", field_selector=selector).items
    ]
    assert got == names


def test_unsupported_field_selector_is_400(labelled: client.CoreV1Api) -> None:
    st = expect_error(400, labelled.list_namespaced_pod, "default", field_selector="spec.bogus=x")
    assert st["reason"] == "BadRequest"
    assert "field label not supported: spec.bogus" in st["message"]


def test_malformed_label_selector_is_400(labelled: client.CoreV1Api) -> None:
    st = expect_error(400, labelled.list_namespaced_pod, "default", label_selector="app in (web")
    assert st["reason"] == "BadRequest"


def test_list_across_all_namespaces_with_selector(k8s_api: client.ApiClient) -> None:
    core = client.CoreV1Api(k8s_api)
    new_namespace(core, "other")
    core.create_namespaced_pod("other", pod("x", labels={"app": "web"}))
    core.create_namespaced_pod("default", pod("y", labels={"app": "web"}))
    got = [
        (p.metadata.namespace, p.metadata.name)
        for p in core.list_pod_for_all_namespaces(label_selector="app=web").items
    ]
    assert got == [("default", "y"), ("other", "x")]
