"""The simulated kube-scheduler's placement decision, pure.

Given a pending pod's scheduling constraints, the nodes and the seats already
taken, decide where the pod goes, or why it cannot go anywhere. The rules are
the subset of kube-scheduler the cocoonstack pods rely on:

- filter: ``nodeSelector`` (every key equal), required node affinity
  (``nodeSelectorTerms`` are ORed, the expressions of one term ANDed; operators
  In, NotIn, Exists, DoesNotExist, Gt, Lt; ``matchFields`` on
  ``metadata.name``) and seats (a node runs at most ``seats`` pods);
- score: the sum of the weights of the preferred node-affinity terms a node
  matches; ties go to the node with the most free seats, then by name, so a
  run of the demo is reproducible;
- when no node fits, a message shaped like kube-scheduler's
  (``0/2 nodes are available: 2 Insufficient seats.``), reasons counted per
  node and listed as sorted ``<count> <reason>`` strings, each node counted under the first filter
  it fails (selector/affinity before seats, as the real filter plugins run).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

REASON_AFFINITY = "node(s) didn't match Pod's node affinity/selector"
REASON_SEATS = "Insufficient seats"


@dataclass(frozen=True, slots=True)
class NodeInfo:
    name: str
    labels: Mapping[str, str]
    seats: int


@dataclass(frozen=True, slots=True)
class Bind:
    node: str


@dataclass(frozen=True, slots=True)
class Unschedulable:
    message: str
    reasons: Mapping[str, int] = field(default_factory=dict)


Placement = Bind | Unschedulable


def _match_expression(expr: Mapping[str, Any], labels: Mapping[str, str]) -> bool:
    key = str(expr.get("key", ""))
    op = str(expr.get("operator", ""))
    values = [str(v) for v in expr.get("values") or []]
    present = key in labels
    value = labels.get(key)
    if op == "In":
        return present and value in values
    if op == "NotIn":
        return not present or value not in values
    if op == "Exists":
        return present
    if op == "DoesNotExist":
        return not present
    if op in ("Gt", "Lt"):
        if not present or len(values) != 1:
            return False
        try:
            have, want = int(str(value)), int(values[0])
        except ValueError:
            return False
        return have > want if op == "Gt" else have < want
    # An unknown operator matches nothing, as the API server would have refused it.
    return False


def match_term(term: Mapping[str, Any], node: NodeInfo) -> bool:
    """One NodeSelectorTerm: all expressions and fields must hold; an empty term matches nothing."""
    exprs = list(term.get("matchExpressions") or [])
    fields = list(term.get("matchFields") or [])
    if not exprs and not fields:
        return False
    if not all(_match_expression(e, node.labels) for e in exprs):
        return False
    return all(_match_expression(f, {"metadata.name": node.name}) for f in fields)


def _node_affinity(spec: Mapping[str, Any]) -> Mapping[str, Any]:
    affinity = spec.get("affinity") or {}
    return affinity.get("nodeAffinity") or {}


def fits_selector(spec: Mapping[str, Any], node: NodeInfo) -> bool:
    """nodeSelector and required node affinity (the filter that is not about seats)."""
    for key, value in (spec.get("nodeSelector") or {}).items():
        if node.labels.get(key) != value:
            return False
    required = _node_affinity(spec).get("requiredDuringSchedulingIgnoredDuringExecution")
    if required:
        terms = required.get("nodeSelectorTerms") or []
        if not any(match_term(t, node) for t in terms):
            return False
    return True


def preference_score(spec: Mapping[str, Any], node: NodeInfo) -> int:
    total = 0
    for pref in _node_affinity(spec).get("preferredDuringSchedulingIgnoredDuringExecution") or []:
        if match_term(pref.get("preference") or {}, node):
            total += int(pref.get("weight", 0))
    return total


def place(spec: Mapping[str, Any], nodes: Sequence[NodeInfo], used: Mapping[str, int]) -> Placement:
    """Where a pod with this `spec` goes, given the seats `used` per node name."""
    reasons: Counter[str] = Counter()
    feasible: list[NodeInfo] = []
    for node in nodes:
        if not fits_selector(spec, node):
            reasons[REASON_AFFINITY] += 1
        elif used.get(node.name, 0) >= node.seats:
            reasons[REASON_SEATS] += 1
        else:
            feasible.append(node)
    if not feasible:
        # kube-scheduler sorts the formatted "<count> <reason>" strings.
        detail = ", ".join(sorted(f"{n} {r}" for r, n in reasons.items()))
        message = f"0/{len(nodes)} nodes are available"
        message += f": {detail}." if detail else "."
        return Unschedulable(message=message, reasons=dict(reasons))
    best = min(
        feasible,
        key=lambda n: (-preference_score(spec, n), used.get(n.name, 0) - n.seats, n.name),
    )
    return Bind(best.name)
