"""VM-name helpers and name validation (docs/design.md#names)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from shared.errors import InvalidName
from shared.names import (
    SetRef,
    VMCandidate,
    check_name,
    check_namespace,
    check_repository,
    parse_vm_name,
    vm_name,
)


def test_vm_name_is_deterministic() -> None:
    assert vm_name("team-a", "agent", 0) == "vk-team-a-agent-0"


def test_ambiguous_vm_name_yields_every_valid_split() -> None:
    assert parse_vm_name("vk-a-b-c-0") == [
        VMCandidate("a", "b-c", 0),
        VMCandidate("a-b", "c", 0),
    ]


@pytest.mark.parametrize(
    "name",
    ["vk--a-0", "a-b-0", "vk-a-b-x", "vk-a-b-01", "vk-ab-0", "vk-A-b-0", "vk-a-b-"],
)
def test_unparseable_vm_names_yield_nothing(name: str) -> None:
    assert parse_vm_name(name) == []


labels = st.from_regex(r"\A[a-z0-9]([-a-z0-9]{0,20}[a-z0-9])?\Z")


@given(ns=labels, cs=labels, slot=st.integers(min_value=0, max_value=99))
def test_parse_recovers_the_built_name(ns: str, cs: str, slot: int) -> None:
    assert VMCandidate(ns, cs, slot) in parse_vm_name(vm_name(ns, cs, slot))


@pytest.mark.parametrize(
    "bad", ["../etc", "a%2Fb", "a\x00b", "A", "-a", "a" * 64, "", "a/b", "a.b"]
)
def test_namespace_validation_refuses_injection(bad: str) -> None:
    with pytest.raises(InvalidName):
        check_namespace(bad)


@pytest.mark.parametrize("bad", ["../x", "a%2Fb", "x\x00", "a" * 254, "a_b", "a/b"])
def test_name_validation_refuses_injection(bad: str) -> None:
    with pytest.raises(InvalidName):
        check_name(bad)


@pytest.mark.parametrize("bad", ["../x", "a//b", "A/b", "a/", "/a", "a%2fb", "a" * 256])
def test_repository_validation(bad: str) -> None:
    with pytest.raises(InvalidName):
        check_repository(bad)


def test_repository_accepts_nested_paths() -> None:
    assert check_repository("proj/snapshots/vk-a-b-0") == "proj/snapshots/vk-a-b-0"


def test_setref_parse() -> None:
    assert SetRef.parse("ns/name") == SetRef("ns", "name")
    with pytest.raises(InvalidName):
        SetRef.parse("noslash")
