"""The main pod a wake creates (docs/design.md#main-pod), compared with reviewed golden manifests.

The golden files in tests/data/golden/ are the contract written out: each
holds the set, the hint and the exact pod expected. Regenerate only after a
deliberate change (COCOON_UPDATE_GOLDEN=1) and review the diff.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from shared import constants as k
from shared.models import CocoonSet
from shared.reconcile.mainpod import build_main_pod, quantity_is_zero
from tests.fixtures.cocoon_objects import set_manifest

GOLDEN = Path(__file__).resolve().parents[2] / "data" / "golden"

CASES: dict[str, tuple[dict[str, Any], str]] = {
    "hint": (set_manifest(suspend=False, phase="Waking"), "node-a"),
    "pin": (
        set_manifest(suspend=False, phase="Waking", spec={"nodeName": "node-pinned"}),
        "node-a",
    ),
    "neither": (set_manifest(suspend=False, phase="Waking"), ""),
    "storage-class-envfrom": (
        set_manifest(
            suspend=False,
            phase="Waking",
            agent={
                "storage": "20Gi",
                "network": "net-1",
                "forcePull": True,
                "noDirectIO": True,
                "connType": "rdp",
                "os": "windows",
                "mode": "run",
                "backend": "firecracker",
                "probePort": 8080,
                "serviceAccountName": "agent-sa",
                "resources": {
                    "requests": {"cpu": "2", "memory": "4Gi"},
                    "limits": {"memory": "4Gi"},
                },
                "envFrom": [
                    {"secretRef": {"name": "agent-env"}},
                    {"configMapRef": {"name": "cfg"}, "prefix": "C_"},
                ],
            },
            spec={
                "nodePool": "gpu",
                "snapshotCompatibilityClass": "zen4",
                "snapshotPolicy": "main-only",
            },
        ),
        "node-b",
    ),
    "zero-storage": (set_manifest(suspend=False, phase="Waking", agent={"storage": "0Gi"}), ""),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_main_pod_matches_golden(case: str) -> None:
    manifest, hint = CASES[case]
    built = build_main_pod(CocoonSet.model_validate(manifest), hint=hint)
    path = GOLDEN / f"mainpod-{case}.json"
    if os.environ.get("COCOON_UPDATE_GOLDEN") == "1":
        path.write_text(json.dumps({"set": manifest, "hint": hint, "pod": built}, indent=2) + "\n")
    golden = json.loads(path.read_text())
    assert golden["set"] == manifest, "golden input drifted: regenerate deliberately"
    assert built == golden["pod"]


def test_pin_wins_over_hint_and_is_never_spec_node_name() -> None:
    manifest, hint = CASES["pin"]
    pod = build_main_pod(CocoonSet.model_validate(manifest), hint=hint)
    affinity = pod["spec"]["affinity"]["nodeAffinity"]
    assert "preferredDuringSchedulingIgnoredDuringExecution" not in affinity
    term = affinity["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"][0]
    assert term["matchExpressions"][0] == {
        "key": k.LABEL_HOSTNAME,
        "operator": "In",
        "values": ["node-pinned"],
    }
    assert "nodeName" not in pod["spec"]


@pytest.mark.parametrize(
    ("value", "zero"),
    [
        (0, True),
        ("0", True),
        ("0Gi", True),
        ("0.0", True),
        ("1Gi", False),
        (5, False),
        ("junk", False),
    ],
    ids=["int0", "str0", "0Gi", "0.0", "1Gi", "int5", "junk"],
)
def test_quantity_zero(value: int | str, zero: bool) -> None:
    assert quantity_is_zero(value) is zero


@pytest.mark.parametrize(
    ("storage", "canonical"), [("1024Mi", "1Gi"), ("1.5Gi", "1536Mi"), ("1000M", "1G")]
)
def test_storage_is_written_as_the_operator_prints_it(storage: str, canonical: str) -> None:
    """Issue 13, defect 3: the operator compares VM-spec strings and deletes a pod
    that differs; `1024Mi` beside its `1Gi` would cost the restored VM its state."""
    cs = CocoonSet.model_validate(
        set_manifest(suspend=False, phase="Waking", agent={"storage": storage})
    )
    pod = build_main_pod(cs, hint="")
    assert pod["metadata"]["annotations"][k.ANN_STORAGE] == canonical
    res = pod["spec"]["containers"][0]["resources"]
    assert res["requests"]["ephemeral-storage"] == canonical
    assert res["limits"]["ephemeral-storage"] == canonical
