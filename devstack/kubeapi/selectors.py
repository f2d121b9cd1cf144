"""Label and field selectors with the grammar and semantics of apimachinery.

Label selectors: `k=v`, `k==v`, `k!=v`, `k in (a,b)`, `k notin (a,b)`, `k`,
`!k`, `k>N`, `k<N`, comma-joined (AND). `!=` and `notin` also match objects
that lack the key, as in Kubernetes. Field selectors: `f=v`, `f==v`, `f!=v`
over a per-resource set of supported fields; any other field is a 400.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from devstack.kubeapi.errors import bad_request

LABEL_KEY = re.compile(
    r"^([a-z0-9A-Z]([a-z0-9A-Z.\-]*[a-z0-9A-Z])?/)?[a-zA-Z0-9]([-a-zA-Z0-9_.]*[a-zA-Z0-9])?$"
)
LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")


@dataclass(frozen=True, slots=True)
class Requirement:
    key: str
    op: str  # "=", "!=", "in", "notin", "exists", "!", "gt", "lt"
    values: tuple[str, ...] = ()

    def matches(self, labels: Mapping[str, str]) -> bool:
        has = self.key in labels
        if self.op == "exists":
            return has
        if self.op == "!":
            return not has
        if self.op in ("=", "in"):
            return has and labels[self.key] in self.values
        if self.op in ("!=", "notin"):
            return not has or labels[self.key] not in self.values
        if not has:
            return False
        try:
            actual = int(labels[self.key])
        except ValueError:
            return False
        bound = int(self.values[0])
        return actual > bound if self.op == "gt" else actual < bound


@dataclass(frozen=True, slots=True)
class LabelSelector:
    requirements: tuple[Requirement, ...]

    def matches(self, labels: Mapping[str, str] | None) -> bool:
        lbl = labels or {}
        return all(r.matches(lbl) for r in self.requirements)

    @property
    def empty(self) -> bool:
        return not self.requirements


def _split_top(text: str) -> list[str]:
    """Split on commas that are not inside a parenthesised value set."""
    parts: list[str] = []
    depth = 0
    cur: list[str] = []
    for ch in text:
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        if ch == "," and depth == 0:
            parts.append("".join(cur))
            cur = []
        else:
            cur.append(ch)
    parts.append("".join(cur))
    return parts


def _check_key(key: str) -> str:
    if not key or not LABEL_KEY.match(key) or len(key.rsplit("/", 1)[-1]) > 63:
        raise bad_request(f"unable to parse requirement: invalid label key {key!r}")
    return key


def _check_value(value: str) -> str:
    if len(value) > 63 or not LABEL_VALUE.match(value):
        raise bad_request(f"unable to parse requirement: invalid label value: {value!r}")
    return value


_SET_OP = re.compile(r"^\s*(\S+)\s+(in|notin)\s*\((.*)\)\s*$")
_CMP_OP = re.compile(r"^\s*([^=!<>\s]+)\s*(==|=|!=|<|>)\s*(\S*)\s*$")


def parse_label_selector(text: str | None) -> LabelSelector:
    if not text or not text.strip():
        return LabelSelector(())
    reqs: list[Requirement] = []
    for raw in _split_top(text):
        part = raw.strip()
        if not part:
            raise bad_request(
                f"unable to parse requirement: found '', expected: identifier in {text!r}"
            )
        m = _SET_OP.match(part)
        if m:
            values = tuple(_check_value(v.strip()) for v in m.group(3).split(","))
            reqs.append(Requirement(_check_key(m.group(1)), m.group(2), values))
            continue
        m = _CMP_OP.match(part)
        if m:
            key, op, value = m.group(1), m.group(2), m.group(3)
            if op in ("<", ">"):
                try:
                    int(value)
                except ValueError:
                    raise bad_request(
                        "unable to parse requirement: for 'Gt', 'Lt' operators, the value "
                        f"must be an integer: {value!r}"
                    ) from None
                reqs.append(Requirement(_check_key(key), "gt" if op == ">" else "lt", (value,)))
            else:
                reqs.append(
                    Requirement(
                        _check_key(key), "!=" if op == "!=" else "=", (_check_value(value),)
                    )
                )
            continue
        if part.startswith("!"):
            reqs.append(Requirement(_check_key(part[1:].strip()), "!"))
            continue
        if re.match(r"^\S+$", part):
            reqs.append(Requirement(_check_key(part), "exists"))
            continue
        raise bad_request(f"unable to parse requirement: {part!r}")
    return LabelSelector(tuple(reqs))


def selector_from_match(
    match_labels: Mapping[str, str] | None, expressions: list[dict[str, Any]] | None
) -> LabelSelector:
    """A metav1.LabelSelector (matchLabels/matchExpressions) as a LabelSelector."""
    reqs = [Requirement(k, "=", (v,)) for k, v in sorted((match_labels or {}).items())]
    ops = {"In": "in", "NotIn": "notin", "Exists": "exists", "DoesNotExist": "!"}
    for e in expressions or []:
        reqs.append(
            Requirement(str(e["key"]), ops[str(e["operator"])], tuple(e.get("values") or ()))
        )
    return LabelSelector(tuple(reqs))


# Field extractors: a field path -> a function giving the object's value as a string.
FieldGetter = Callable[[Mapping[str, Any]], str]


def path_getter(path: str, default: str = "") -> FieldGetter:
    parts = path.split(".")

    def get(obj: Mapping[str, Any]) -> str:
        cur: Any = obj
        for p in parts:
            if not isinstance(cur, Mapping):
                return default
            cur = cur.get(p)
        if cur is None:
            return default
        if isinstance(cur, bool):
            return "true" if cur else "false"
        return str(cur)

    return get


@dataclass(frozen=True, slots=True)
class FieldRequirement:
    getter: FieldGetter
    field: str
    negate: bool
    value: str

    def matches(self, obj: Mapping[str, Any]) -> bool:
        return (self.getter(obj) == self.value) != self.negate


@dataclass(frozen=True, slots=True)
class FieldSelector:
    requirements: tuple[FieldRequirement, ...]

    def matches(self, obj: Mapping[str, Any]) -> bool:
        return all(r.matches(obj) for r in self.requirements)

    @property
    def empty(self) -> bool:
        return not self.requirements


def parse_field_selector(
    text: str | None, fields: Mapping[str, FieldGetter], *, custom_resource: bool = False
) -> FieldSelector:
    if not text or not text.strip():
        return FieldSelector(())
    reqs: list[FieldRequirement] = []
    for raw in text.split(","):
        part = raw.strip()
        m = re.match(r"^([^=!]+?)\s*(==|=|!=)\s*(.*)$", part)
        if not m:
            raise bad_request(f"invalid selector: '{text}'; can't understand '{part}'")
        name, op, value = m.group(1).strip(), m.group(2), m.group(3).strip()
        getter = fields.get(name)
        if getter is None:
            if custom_resource:
                known = ", ".join(f'"{f}"' for f in fields)
                raise bad_request(f'"{name}" is not a known field selector: only {known}')
            raise bad_request(f"field label not supported: {name}")
        reqs.append(FieldRequirement(getter, name, op == "!=", value))
    return FieldSelector(tuple(reqs))
