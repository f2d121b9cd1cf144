"""A pool's capacity in `status`: the seats kube-scheduler would place pods on.

The `allocatable.pods` of the pool's nodes (vk-cocoon advertises it, VK_NODE_PODS),
counting only nodes a new pod can land on: Ready, not cordoned, labelled with the pool
the restore pod's nodeSelector names.
"""

from __future__ import annotations

from typing import Any

from cocoon_hibernation.cmd_status import Capacity, pool_capacity
from shared import constants as k


def node(pool: str | None, pods: str, *, ready: bool = True, cordoned: bool = False) -> Any:
    labels = {k.LABEL_POOL: pool} if pool else {}
    return {
        "metadata": {"name": f"n-{pool}-{pods}", "labels": labels},
        "spec": {"unschedulable": True} if cordoned else {},
        "status": {
            "allocatable": {"pods": pods},
            "conditions": [{"type": "Ready", "status": "True" if ready else "False"}],
        },
    }


def test_only_nodes_a_pod_can_land_on_count() -> None:
    nodes = [
        node("default", "2"),
        node("default", "3"),
        node("default", "5", ready=False),
        node("default", "7", cordoned=True),
        node(None, "11"),  # no pool label: no restore pod selects it
        node("gpu", "1"),
    ]
    assert pool_capacity(nodes) == {"default": Capacity(5, 2), "gpu": Capacity(1, 1)}
