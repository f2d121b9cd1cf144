"""The models: the CRD's defaults, the names other code reads, and lossless round trips."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from shared import constants as k
from shared.crd import cocoonset_schema
from shared.enums import (
    AgentMode,
    Backend,
    CocoonSetPhase,
    HibernatePolicy,
    LifecycleState,
    OSType,
    SnapshotPolicy,
    ToolboxMode,
)
from shared.models import CocoonSet, Pod, dump
from tests.unit.base.schema_strategies import from_schema

MINIMAL: dict[str, Any] = {
    "apiVersion": k.API_VERSION,
    "kind": k.KIND,
    "metadata": {"name": "s", "namespace": "ns"},
    "spec": {"agent": {"image": "img"}, "toolboxes": [{"name": "tb"}]},
}


@pytest.mark.parametrize(
    ("read", "expected"),
    [
        pytest.param(
            lambda cs: cs.spec.hibernate_policy, HibernatePolicy.RETAIN, id="hibernatePolicy"
        ),
        pytest.param(lambda cs: cs.spec.node_pool, "default", id="nodePool"),
        pytest.param(
            lambda cs: cs.spec.snapshot_policy, SnapshotPolicy.ALWAYS, id="snapshotPolicy"
        ),
        pytest.param(lambda cs: cs.spec.snapshot_compatibility_class, None, id="class-unset"),
        pytest.param(lambda cs: cs.spec.agent.mode, AgentMode.CLONE, id="agent.mode"),
        pytest.param(lambda cs: cs.spec.agent.os, OSType.LINUX, id="agent.os"),
        pytest.param(
            lambda cs: cs.spec.agent.backend, Backend.CLOUD_HYPERVISOR, id="agent.backend"
        ),
        pytest.param(lambda cs: cs.spec.agent.replicas, 0, id="agent.replicas"),
        pytest.param(lambda cs: cs.spec.toolboxes[0].mode, ToolboxMode.RUN, id="toolbox.mode"),
        pytest.param(lambda cs: cs.spec.toolboxes[0].os, OSType.LINUX, id="toolbox.os"),
        pytest.param(
            lambda cs: cs.spec.toolboxes[0].backend, Backend.CLOUD_HYPERVISOR, id="toolbox.backend"
        ),
        pytest.param(lambda cs: cs.suspended, False, id="suspend-unset"),
        pytest.param(lambda cs: cs.status.phase, None, id="no-status"),
    ],
)
def test_unset_fields_read_as_the_crd_defaults(read: Any, expected: object) -> None:
    assert read(CocoonSet.model_validate(MINIMAL)) == expected


def test_the_crd_defaults_are_the_model_defaults() -> None:
    # Where the two could drift: every `default` in the generated schema is what
    # the model reads for an unset field.
    cs = CocoonSet.model_validate(MINIMAL)
    spec = cocoonset_schema()["properties"]["spec"]["properties"]
    assert spec["hibernatePolicy"]["default"] == cs.spec.hibernate_policy
    assert spec["nodePool"]["default"] == cs.spec.node_pool
    assert spec["snapshotPolicy"]["default"] == cs.spec.snapshot_policy
    agent = spec["agent"]["properties"]
    for key, attr in [
        ("mode", "mode"),
        ("os", "os"),
        ("backend", "backend"),
        ("replicas", "replicas"),
    ]:
        assert agent[key]["default"] == getattr(cs.spec.agent, attr), key


def test_properties_other_code_reads() -> None:
    cs = CocoonSet.model_validate(
        {
            **MINIMAL,
            "metadata": {
                "name": "s",
                "generation": 4,
                "annotations": {k.ANN_HIBERNATED_ON_NODE: "node-a"},
            },
            "spec": {"agent": {"image": "img"}, "hibernatePolicy": "release", "suspend": True},
            "status": {"phase": "Suspended"},
        }
    )
    assert (cs.namespace, cs.name, cs.generation) == ("default", "s", 4)
    assert cs.is_release and cs.suspended
    assert cs.phase is CocoonSetPhase.SUSPENDED
    assert cs.hint == "node-a"
    assert cs.metadata.annotations[k.ANN_HIBERNATED_ON_NODE] == "node-a"


@pytest.mark.parametrize(
    ("annotations", "status", "live", "terminal", "generation"),
    [
        pytest.param(
            {k.ANN_VM_ID: "vm-1", k.ANN_LIFECYCLE_GENERATION: "3"},
            {"phase": "Running", "containerStatuses": [{"state": {"running": {}}}]},
            True,
            False,
            3,
            id="running-with-vm",
        ),
        pytest.param(
            {k.ANN_LIFECYCLE_GENERATION: "x"},
            {"phase": "Running", "containerStatuses": [{"state": {"running": {}}}]},
            False,
            False,
            0,
            id="no-vm-id-garbage-generation",
        ),
        pytest.param(
            {k.ANN_VM_ID: "vm-1", k.ANN_LIFECYCLE_STATE: LifecycleState.FAILED.value},
            {"phase": "Running", "containerStatuses": [{"state": {}}]},
            False,
            False,  # vk-cocoon's sticky failure is not kubelet-terminal (meta.IsPodTerminal)
            0,
            id="lifecycle-failed",
        ),
        pytest.param({}, {"phase": "Failed"}, False, True, 0, id="pod-failed"),
    ],
)
def test_pod_properties(
    annotations: dict[str, str], status: dict[str, Any], live: bool, terminal: bool, generation: int
) -> None:
    pod = Pod.model_validate(
        {"metadata": {"name": "p", "annotations": annotations}, "status": status}
    )
    assert (pod.live, pod.terminal, pod.lifecycle_generation) == (live, terminal, generation)
    # Either failure path is a failed main for the normal flow (mainPodFailedReason).
    assert pod.failed is (
        terminal or annotations.get("vm.cocoonstack.io/lifecycle-state") == "failed"
    )


@pytest.mark.parametrize(
    "spec",
    [
        pytest.param({"agent": {"image": ""}}, id="empty-image"),
        pytest.param({"agent": {"image": "i", "replicas": -1}}, id="negative-replicas"),
        pytest.param({"agent": {"image": "i", "probePort": 65536}}, id="probe-port"),
        pytest.param({"agent": {"image": "i", "storage": "10 GB"}}, id="quantity"),
        pytest.param({"agent": {"image": "i"}, "hibernatePolicy": "delete"}, id="enum"),
        pytest.param({"agent": {"image": "i"}, "toolboxes": [{"name": "A"}]}, id="toolbox-name"),
        pytest.param(
            {"agent": {"image": "i"}, "snapshotCompatibilityClass": "a" * 64}, id="class-len"
        ),
    ],
)
def test_the_models_refuse_what_the_crd_refuses(spec: dict[str, Any]) -> None:
    with pytest.raises(ValidationError):
        CocoonSet.model_validate({**MINIMAL, "spec": spec})


def test_an_assigned_value_is_validated_and_stored_as_the_enum() -> None:
    cs = CocoonSet.model_validate(MINIMAL)
    cs.status.phase = "Suspended"  # type: ignore[assignment]  # what a caller holding a str does
    assert cs.status.phase is CocoonSetPhase.SUSPENDED
    with pytest.raises(ValidationError):
        cs.spec.agent.replicas = -1


def test_changes_to_defaulted_fields_survive_dump() -> None:
    # metadata.annotations and status were not in the input: a write must still carry them.
    cs = CocoonSet.model_validate(MINIMAL)
    cs.metadata.annotations[k.ANN_HIBERNATED_ON_NODE] = "node-a"
    cs.status.phase = CocoonSetPhase.SUSPENDED
    out = dump(cs)
    assert out["metadata"]["annotations"] == {k.ANN_HIBERNATED_ON_NODE: "node-a"}
    assert out["status"] == {"phase": "Suspended"}
    assert out["spec"] == MINIMAL["spec"]  # no defaults written back


_SCHEMA = cocoonset_schema()


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(obj=from_schema(_SCHEMA).filter(lambda o: "spec" in o))
def test_any_valid_object_round_trips_with_its_unknown_fields(obj: dict[str, Any]) -> None:
    original = copy.deepcopy(obj)
    cs = CocoonSet.model_validate(obj)
    assert dump(cs) == original


@settings(max_examples=50, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(obj=from_schema(_SCHEMA).filter(lambda o: "spec" in o), suspend=st.booleans())
def test_read_modify_write_changes_only_what_was_changed(
    obj: dict[str, Any], suspend: bool
) -> None:
    cs = CocoonSet.model_validate(obj)
    cs.spec.suspend = suspend
    expected = copy.deepcopy(obj)
    expected["spec"]["suspend"] = suspend
    assert dump(cs) == expected
