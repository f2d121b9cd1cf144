"""Pod scheduling gates (`spec.schedulingGates`, GA since 1.30) as kube-apiserver v1.34 has them.

Restore pods are created gated with `cocoonset.cocoonstack.io/seat-order`; the gate comes off
later by a JSON patch that `test`s the exact current list first (a compare-and-swap: a 422
means someone else changed the gates, nothing was written). No scheduler runs on either
backend, so what is asserted here is the API server's own part: what it stores, refuses,
and leaves alone.
"""

from __future__ import annotations

from typing import Any

import pytest
from kubernetes import client

from tests.conformance.helpers import expect_error, pod

GATE = "cocoonset.cocoonstack.io/seat-order"
OTHER = "example.com/other"
JSON_PATCH = "application/json-patch+json"
MERGE_PATCH = "application/merge-patch+json"
STRATEGIC = "application/strategic-merge-patch+json"
GATED_MESSAGE = "Scheduling is blocked due to non-empty scheduling gates"


def gated(name: str, *gates: str, **spec: Any) -> dict[str, Any]:
    return pod(name, schedulingGates=[{"name": g} for g in gates], **spec)


def gate_names(p: client.V1Pod) -> list[str]:
    return [g.name for g in p.spec.scheduling_gates or []]


def pod_scheduled(p: client.V1Pod) -> list[client.V1PodCondition]:
    return [c for c in p.status.conditions or [] if c.type == "PodScheduled"]


def bind(core: client.CoreV1Api, name: str, node: str = "node-1") -> None:
    core.create_namespaced_pod_binding(
        name,
        "default",
        {"metadata": {"name": name}, "target": {"apiVersion": "v1", "kind": "Node", "name": node}},
        _preload_content=False,
    )


def remove_gate(current: list[str], gate: str = GATE) -> list[dict[str, Any]]:
    """The product's compare-and-swap: test the exact list, then replace or remove it."""
    rest = [{"name": g} for g in current if g != gate]
    test = {"op": "test", "path": "/spec/schedulingGates", "value": [{"name": g} for g in current]}
    if rest:
        return [test, {"op": "replace", "path": "/spec/schedulingGates", "value": rest}]
    return [test, {"op": "remove", "path": "/spec/schedulingGates"}]


def causes(st: dict[str, Any]) -> list[tuple[str, str, str]]:
    return [(c["reason"], c["field"], c["message"]) for c in st["details"]["causes"]]


# 1. create ------------------------------------------------------------------------


def test_a_gated_pod_is_stored_with_podscheduled_false_schedulinggated(
    k8s_api: client.ApiClient,
) -> None:
    core = client.CoreV1Api(k8s_api)
    body = gated("g", GATE)
    # What a client sends as status is dropped: the server writes the condition itself.
    body["status"] = {"conditions": [{"type": "PodScheduled", "status": "True"}]}
    created = core.create_namespaced_pod("default", body)
    assert gate_names(created) == [GATE]
    assert created.spec.node_name is None
    assert created.status.phase == "Pending"
    [cond] = pod_scheduled(created)
    assert (cond.status, cond.reason, cond.message) == ("False", "SchedulingGated", GATED_MESSAGE)
    assert cond.last_transition_time is not None
    assert pod_scheduled(core.read_namespaced_pod("g", "default")) == [cond]


def test_an_ungated_pod_and_an_empty_gate_list_get_no_condition(
    k8s_api: client.ApiClient,
) -> None:
    core = client.CoreV1Api(k8s_api)
    plain = core.create_namespaced_pod("default", pod("plain"))
    empty = core.create_namespaced_pod("default", gated("empty"))
    for p in (plain, empty):
        assert p.status.conditions is None
        # An empty list is no field at all (omitempty): it reads back absent.
        assert p.spec.scheduling_gates is None


# 2. binding -----------------------------------------------------------------------


def test_binding_a_gated_pod_is_a_conflict_and_leaves_it_unbound(
    k8s_api: client.ApiClient,
) -> None:
    core = client.CoreV1Api(k8s_api)
    core.create_namespaced_pod("default", gated("g", GATE))
    st = expect_error(409, bind, core, "g")
    assert st["reason"] == "Conflict"
    assert st["details"] == {"name": "g", "kind": "pods/binding"}
    assert st["message"].startswith('Operation cannot be fulfilled on pods/binding "g": ')
    assert "pod g has non-empty .spec.schedulingGates" in st["message"]
    after = core.read_namespaced_pod("g", "default")
    assert after.spec.node_name is None
    assert pod_scheduled(after)[0].reason == "SchedulingGated"


def test_binding_refusals_name_the_binding_subresource(k8s_api: client.ApiClient) -> None:
    core = client.CoreV1Api(k8s_api)
    core.create_namespaced_pod("default", pod("p"))
    bind(core, "p")
    st = expect_error(409, bind, core, "p", "node-2")
    assert st["details"] == {"name": "p", "kind": "pods/binding"}
    assert 'pod p is already assigned to node "node-1"' in st["message"]
    held = gated("held", GATE)
    held["metadata"]["finalizers"] = ["example.com/hold"]
    core.create_namespaced_pod("default", held)
    core.delete_namespaced_pod("held", "default")
    # Being deleted is checked before the gates.
    st = expect_error(409, bind, core, "held")
    assert "pod held is being deleted, cannot be assigned to a host" in st["message"]
    core.patch_namespaced_pod("held", "default", {"metadata": {"finalizers": None}})


def test_binding_after_the_last_gate_is_removed_schedules_without_a_generation_bump(
    k8s_api: client.ApiClient,
) -> None:
    core = client.CoreV1Api(k8s_api)
    core.create_namespaced_pod("default", gated("g", GATE))
    ungated = core.patch_namespaced_pod("g", "default", remove_gate([GATE]))
    bind(core, "g")
    bound = core.read_namespaced_pod("g", "default")
    assert bound.spec.node_name == "node-1"
    [cond] = pod_scheduled(bound)
    # The binding replaces the whole condition: True, the gated reason and message gone.
    assert (cond.status, cond.reason, cond.message) == ("True", None, None)
    # Binding is no spec update through the pod strategy: generation stays.
    assert bound.metadata.generation == ungated.metadata.generation


# 3. nodeName on create ------------------------------------------------------------


def test_a_gated_pod_cannot_be_created_on_a_node(k8s_api: client.ApiClient) -> None:
    core = client.CoreV1Api(k8s_api)
    st = expect_error(
        422, core.create_namespaced_pod, "default", gated("g", GATE, nodeName="node-1")
    )
    assert st["reason"] == "Invalid"
    assert causes(st) == [
        (
            "FieldValueForbidden",
            "spec.nodeName",
            "Forbidden: cannot be set until all schedulingGates have been cleared",
        )
    ]
    assert core.list_namespaced_pod("default").items == []


# 4. adding gates ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("start", "patch_body", "content_type", "new"),
    [
        pytest.param(
            [GATE],
            [{"op": "add", "path": "/spec/schedulingGates/-", "value": {"name": OTHER}}],
            JSON_PATCH,
            {1: OTHER},
            id="json-patch-append",
        ),
        pytest.param(
            [],
            {"spec": {"schedulingGates": [{"name": GATE}]}},
            MERGE_PATCH,
            {0: GATE},
            id="ungated",
        ),
        pytest.param(
            [GATE],
            {"spec": {"schedulingGates": [{"name": OTHER}]}},
            MERGE_PATCH,
            {0: OTHER},
            id="swap",
        ),
        pytest.param(
            [GATE],
            {"spec": {"schedulingGates": [{"name": GATE}, {"name": OTHER}, {"name": "b.io/x"}]}},
            MERGE_PATCH,
            {1: OTHER, 2: "b.io/x"},
            id="two-new",
        ),
    ],
)
def test_gates_may_not_be_added_after_create(
    k8s_api: client.ApiClient,
    start: list[str],
    patch_body: Any,
    content_type: str,
    new: dict[int, str],
) -> None:
    core = client.CoreV1Api(k8s_api)
    before = core.create_namespaced_pod("default", gated("g", *start))
    st = expect_error(
        422, core.patch_namespaced_pod, "g", "default", patch_body, _content_type=content_type
    )
    assert st["reason"] == "Invalid"
    # One cause per new gate, at its index (upstream's order among them is a map's order).
    assert sorted(causes(st)) == sorted(
        (
            "FieldValueForbidden",
            f"spec.schedulingGates[{i}].name",
            f"Forbidden: only deletion is allowed, but found new scheduling gate '{name}'",
        )
        for i, name in new.items()
    )
    after = core.read_namespaced_pod("g", "default")
    assert gate_names(after) == start
    assert after.metadata.resource_version == before.metadata.resource_version


def test_gates_may_be_reordered(k8s_api: client.ApiClient) -> None:
    core = client.CoreV1Api(k8s_api)
    core.create_namespaced_pod("default", gated("g", OTHER, GATE))
    out = core.patch_namespaced_pod(
        "g",
        "default",
        {"spec": {"schedulingGates": [{"name": GATE}, {"name": OTHER}]}},
        _content_type=MERGE_PATCH,
    )
    assert gate_names(out) == [GATE, OTHER]


# 5. removing gates ----------------------------------------------------------------


def test_json_patch_compare_and_swap_removes_our_gate_among_others(
    k8s_api: client.ApiClient,
) -> None:
    core = client.CoreV1Api(k8s_api)
    core.create_namespaced_pod("default", gated("g", OTHER, GATE))
    out = core.patch_namespaced_pod("g", "default", remove_gate([OTHER, GATE]))
    assert gate_names(out) == [OTHER]
    assert out.metadata.generation == 2
    # Other gates are still there: binding is still refused.
    expect_error(409, bind, core, "g")


def test_json_patch_compare_and_swap_removes_the_only_gate(k8s_api: client.ApiClient) -> None:
    core = client.CoreV1Api(k8s_api)
    core.create_namespaced_pod("default", gated("g", GATE))
    out = core.patch_namespaced_pod("g", "default", remove_gate([GATE]))
    assert out.spec.scheduling_gates is None
    assert out.metadata.generation == 2


def test_a_stale_compare_and_swap_is_refused_and_writes_nothing(
    k8s_api: client.ApiClient,
) -> None:
    core = client.CoreV1Api(k8s_api)
    core.create_namespaced_pod("default", gated("g", OTHER, GATE))
    done = core.patch_namespaced_pod("g", "default", remove_gate([OTHER, GATE], OTHER))
    assert gate_names(done) == [GATE]
    # Our view is stale (OTHER was removed meanwhile): the `test` op fails.
    st = expect_error(422, core.patch_namespaced_pod, "g", "default", remove_gate([OTHER, GATE]))
    assert st["reason"] == "Invalid"
    assert st["message"] == "the server rejected our request due to an error in our request"
    assert st["details"] == {}
    after = core.read_namespaced_pod("g", "default")
    assert gate_names(after) == [GATE]
    assert after.metadata.resource_version == done.metadata.resource_version
    # Repeating a removal that already happened fails the same way.
    core.patch_namespaced_pod("g", "default", remove_gate([GATE]))
    expect_error(422, core.patch_namespaced_pod, "g", "default", remove_gate([GATE]))


def test_replacing_with_an_empty_list_reads_back_absent(k8s_api: client.ApiClient) -> None:
    core = client.CoreV1Api(k8s_api)
    core.create_namespaced_pod("default", gated("g", GATE))
    out = core.patch_namespaced_pod(
        "g",
        "default",
        [{"op": "replace", "path": "/spec/schedulingGates", "value": []}],
        _content_type=JSON_PATCH,
    )
    assert out.spec.scheduling_gates is None


def test_strategic_delete_and_merge_null_remove_gates(k8s_api: client.ApiClient) -> None:
    core = client.CoreV1Api(k8s_api)
    core.create_namespaced_pod("default", gated("g", OTHER, GATE))
    # schedulingGates merges by `name` under a strategic merge patch.
    out = core.patch_namespaced_pod(
        "g",
        "default",
        {"spec": {"schedulingGates": [{"name": GATE, "$patch": "delete"}]}},
        _content_type=STRATEGIC,
    )
    assert gate_names(out) == [OTHER]
    out = core.patch_namespaced_pod(
        "g", "default", {"spec": {"schedulingGates": None}}, _content_type=MERGE_PATCH
    )
    assert out.spec.scheduling_gates is None


# 6. invalid and duplicate names ---------------------------------------------------

_NAME_PART = (
    "must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an "
    "alphanumeric character"
)


@pytest.mark.parametrize(
    ("name", "phrases"),
    [
        pytest.param("Not Valid!", [f"name part {_NAME_PART}"], id="bad-name-part"),
        pytest.param("", ["name part must be non-empty", f"name part {_NAME_PART}"], id="empty"),
        pytest.param(
            "Bad_Prefix/x", ["prefix part a lowercase RFC 1123 subdomain must"], id="bad-prefix"
        ),
        pytest.param("/x", ["prefix part must be non-empty"], id="empty-prefix"),
        pytest.param(
            "a.io/" + "x" * 64, ["name part must be no more than 63 characters"], id="too-long"
        ),
        pytest.param("a/b/c", [f"a qualified name {_NAME_PART}"], id="two-slashes"),
    ],
)
def test_a_gate_name_must_be_a_qualified_name(
    k8s_api: client.ApiClient, name: str, phrases: list[str]
) -> None:
    core = client.CoreV1Api(k8s_api)
    st = expect_error(422, core.create_namespaced_pod, "default", gated("g", GATE, name))
    got = causes(st)
    assert [(r, f) for r, f, _ in got] == [("FieldValueInvalid", "spec.schedulingGates[1]")] * len(
        phrases
    )
    for (_, _, message), phrase in zip(got, phrases, strict=True):
        assert message.startswith(f'Invalid value: "{name}": {phrase}')


def test_a_gate_name_may_not_repeat(k8s_api: client.ApiClient) -> None:
    core = client.CoreV1Api(k8s_api)
    st = expect_error(422, core.create_namespaced_pod, "default", gated("g", GATE, OTHER, GATE))
    assert causes(st) == [
        ("FieldValueDuplicate", "spec.schedulingGates[2]", f'Duplicate value: "{GATE}"')
    ]
    # Nor on update, where it adds no new name.
    core.create_namespaced_pod("default", gated("h", GATE, OTHER))
    st = expect_error(
        422,
        core.patch_namespaced_pod,
        "h",
        "default",
        {"spec": {"schedulingGates": [{"name": GATE}, {"name": GATE}]}},
        _content_type=MERGE_PATCH,
    )
    assert causes(st) == [
        ("FieldValueDuplicate", "spec.schedulingGates[1]", f'Duplicate value: "{GATE}"')
    ]


def test_gate_causes_come_before_the_node_name_cause(k8s_api: client.ApiClient) -> None:
    core = client.CoreV1Api(k8s_api)
    st = expect_error(
        422, core.create_namespaced_pod, "default", gated("g", "bad name", nodeName="node-1")
    )
    assert [f for _, f, _ in causes(st)] == ["spec.schedulingGates[0]", "spec.nodeName"]


# 7. after the last gate goes ------------------------------------------------------


def test_removing_the_last_gate_leaves_the_condition_to_the_scheduler(
    k8s_api: client.ApiClient,
) -> None:
    core = client.CoreV1Api(k8s_api)
    created = core.create_namespaced_pod("default", gated("g", GATE))
    out = core.patch_namespaced_pod("g", "default", remove_gate([GATE]))
    # The API server does not touch status on a spec update: still SchedulingGated until
    # kube-scheduler (none runs here) tries the pod or binds it.
    assert pod_scheduled(out) == pod_scheduled(created)
    assert pod_scheduled(out)[0].reason == "SchedulingGated"
