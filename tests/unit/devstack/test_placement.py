"""The simulated scheduler's placement: the rules the demo's story depends on."""

from __future__ import annotations

from typing import Any

import pytest

from devstack.placement import Bind, NodeInfo, Unschedulable, place
from shared import constants as k

N1 = NodeInfo("node-1", {k.LABEL_HOSTNAME: "node-1", k.LABEL_POOL: "default"}, seats=1)
N2 = NodeInfo("node-2", {k.LABEL_HOSTNAME: "node-2", k.LABEL_POOL: "default"}, seats=1)
GPU = NodeInfo(
    "gpu-1",
    {k.LABEL_HOSTNAME: "gpu-1", k.LABEL_POOL: "gpu", k.LABEL_SNAPSHOT_CPU_CLASS: "zen4"},
    seats=2,
)
NODES = [N1, N2, GPU]


def _required(*values: str, op: str = "In", key: str = k.LABEL_HOSTNAME) -> dict[str, Any]:
    expr: dict[str, Any] = {"key": key, "operator": op}
    if values:
        expr["values"] = list(values)
    return {
        "affinity": {
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [{"matchExpressions": [expr]}]
                }
            }
        }
    }


def _preferred(node: str, weight: int = 100) -> dict[str, Any]:
    term = {"matchExpressions": [{"key": k.LABEL_HOSTNAME, "operator": "In", "values": [node]}]}
    return {
        "affinity": {
            "nodeAffinity": {
                "preferredDuringSchedulingIgnoredDuringExecution": [
                    {"weight": weight, "preference": term}
                ]
            }
        }
    }


POOL = {"nodeSelector": {k.LABEL_POOL: "default"}}

CASES = [
    pytest.param(POOL, {}, Bind("node-1"), id="empty-pool-ties-go-to-first-name"),
    pytest.param(POOL, {"node-1": 1}, Bind("node-2"), id="full-node-skipped"),
    pytest.param(
        {"nodeSelector": {k.LABEL_POOL: "gpu"}}, {}, Bind("gpu-1"), id="selector-picks-pool"
    ),
    pytest.param(
        {"nodeSelector": {k.LABEL_POOL: "default", k.LABEL_SNAPSHOT_CPU_CLASS: "zen4"}},
        {},
        Unschedulable(
            "0/3 nodes are available: 3 node(s) didn't match Pod's node affinity/selector."
        ),
        id="snapshot-class-is-hard",
    ),
    pytest.param({**POOL, **_required("node-2")}, {}, Bind("node-2"), id="required-affinity-pins"),
    pytest.param(
        {**POOL, **_required("node-2")},
        {"node-2": 1},
        Unschedulable(
            "0/3 nodes are available: 1 Insufficient seats, "
            "2 node(s) didn't match Pod's node affinity/selector."
        ),
        id="pinned-node-full",
    ),
    pytest.param(_required("node-1", op="NotIn"), {}, Bind("gpu-1"), id="notin-prefers-free-seats"),
    pytest.param(
        _required(op="DoesNotExist", key=k.LABEL_SNAPSHOT_CPU_CLASS),
        {"node-1": 1},
        Bind("node-2"),
        id="does-not-exist",
    ),
    pytest.param({**POOL, **_preferred("node-2")}, {}, Bind("node-2"), id="preferred-wins"),
    pytest.param(
        {**POOL, **_preferred("node-1")},
        {"node-1": 1},
        Bind("node-2"),
        id="preferred-is-never-required",
    ),
    pytest.param(
        POOL,
        {"node-1": 1, "node-2": 1},
        Unschedulable(
            "0/3 nodes are available: "
            "1 node(s) didn't match Pod's node affinity/selector, 2 Insufficient seats."
        ),
        id="pool-full-message",
    ),
]


@pytest.mark.parametrize(("spec", "used", "want"), CASES)
def test_place(spec: dict[str, Any], used: dict[str, int], want: Bind | Unschedulable) -> None:
    got = place(spec, NODES, used)
    if isinstance(want, Bind):
        assert got == want
    else:
        assert isinstance(got, Unschedulable)
        assert got.message == want.message


def test_two_full_nodes_message_matches_kube_scheduler_shape() -> None:
    got = place(POOL, [N1, N2], {"node-1": 1, "node-2": 1})
    assert got == Unschedulable(
        "0/2 nodes are available: 2 Insufficient seats.", {"Insufficient seats": 2}
    )


def test_no_nodes_at_all() -> None:
    got = place(POOL, [], {})
    assert isinstance(got, Unschedulable)
    assert got.message == "0/0 nodes are available."


def test_required_terms_are_ored_and_expressions_anded() -> None:
    spec = {
        "affinity": {
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [
                        {
                            "matchExpressions": [
                                {"key": k.LABEL_POOL, "operator": "In", "values": ["default"]},
                                {"key": k.LABEL_HOSTNAME, "operator": "In", "values": ["gpu-1"]},
                            ]
                        },
                        {
                            "matchFields": [
                                {"key": "metadata.name", "operator": "In", "values": ["node-2"]}
                            ]
                        },
                    ]
                }
            }
        }
    }
    # term 1 matches no node (gpu-1 is not in the default pool); term 2 matches node-2 by name.
    assert place(spec, NODES, {}) == Bind("node-2")


def test_preference_weights_add_up() -> None:
    pref = _preferred("node-1", 10)["affinity"]["nodeAffinity"][
        "preferredDuringSchedulingIgnoredDuringExecution"
    ] + [
        {
            "weight": 50,
            "preference": {
                "matchExpressions": [{"key": k.LABEL_POOL, "operator": "In", "values": ["gpu"]}]
            },
        }
    ]
    spec = {"affinity": {"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": pref}}}
    assert place(spec, NODES, {}) == Bind("gpu-1")


def test_gt_lt_on_numeric_labels() -> None:
    big = NodeInfo("big", {"seats-class": "8"}, seats=1)
    small = NodeInfo("small", {"seats-class": "2"}, seats=1)
    spec = _required("4", op="Gt", key="seats-class")
    assert place(spec, [small, big], {}) == Bind("big")
    spec = _required("4", op="Lt", key="seats-class")
    assert place(spec, [small, big], {}) == Bind("small")
