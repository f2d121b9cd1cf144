"""VM-name helpers and name validation (docs/design.md#names)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from shared.errors import InvalidName
from shared.names import (
    MANAGED_VM_NAME_MAX,
    SetRef,
    VMCandidate,
    check_name,
    check_namespace,
    check_repository,
    check_tag,
    legacy_vm_name,
    parse_vm_name,
    recorded_vm_names,
    toolbox_vm_name,
    vm_name,
    vm_name_for_pod,
)


# The expected strings are cocoon-common's own test vectors (meta/vmname_test.go,
# the hashed generation; docs/compatibility.md): a mismatch here is a wake that
# probes a tag vk-cocoon never pushed.
@pytest.mark.parametrize(
    ("got", "want"),
    [
        (vm_name("prod", "demo", 2), "vk-prod-demo-2-496021"),
        (vm_name_for_pod("prod", "toolbox"), "vk-prod-toolbox-869218"),
        (vm_name("prod", "demo.v1", 0), "vk-prod-demo-v1-0-ac2538"),
        (vm_name("prod", "demo-v1", 0), "vk-prod-demo-v1-0-17548c"),
        (toolbox_vm_name("prod", "demo", "shell"), "vk-prod-demo-shell-c79ab8"),
    ],
)
def test_vm_names_match_upstream_vectors(got: str, want: str) -> None:
    assert got == want


def test_legacy_name_is_the_v0_3_0_formula() -> None:
    assert legacy_vm_name("team-a", "agent", 0) == "vk-team-a-agent-0"


def test_hashed_names_never_collide_across_namespaces() -> None:
    assert vm_name("a", "b-c", 0) != vm_name("a-b", "c", 0)
    assert parse_vm_name(vm_name("a", "b-c", 0)) == [VMCandidate("a", "b-c", 0)]
    assert parse_vm_name(vm_name("a-b", "c", 0)) == [VMCandidate("a-b", "c", 0)]


def test_a_dotted_set_is_found_from_its_flattened_name() -> None:
    assert parse_vm_name("vk-prod-demo-v1-0-ac2538") == [VMCandidate("prod", "demo.v1", 0)]
    assert parse_vm_name("vk-prod-demo-v1-0-17548c") == [VMCandidate("prod", "demo-v1", 0)]


def test_a_hashed_name_with_a_foreign_hash_is_only_a_legacy_candidate() -> None:
    # `000000` reads as a slot with a leading zero: no legacy split either.
    assert parse_vm_name("vk-prod-demo-0-000000") == []
    assert parse_vm_name("vk-prod-demo-0-123456") == [
        VMCandidate("prod", "demo-0", 123456),
        VMCandidate("prod-demo", "0", 123456),
    ]


def test_ambiguous_legacy_name_yields_every_valid_split() -> None:
    assert parse_vm_name("vk-a-b-c-0") == [
        VMCandidate("a", "b-c", 0),
        VMCandidate("a-b", "c", 0),
    ]


def test_the_managed_length_limit_leaves_room_for_the_import_suffix() -> None:
    assert MANAGED_VM_NAME_MAX == 46


@pytest.mark.parametrize(
    "name",
    ["vk--a-0", "a-b-0", "vk-a-b-x", "vk-a-b-01", "vk-ab-0", "vk-A-b-0", "vk-a-b-"],
)
def test_unparseable_vm_names_yield_nothing(name: str) -> None:
    assert parse_vm_name(name) == []


labels = st.from_regex(r"\A[a-z0-9]([-a-z0-9]{0,20}[a-z0-9])?\Z")


@given(ns=labels, cs=labels, slot=st.integers(min_value=0, max_value=99))
def test_parse_recovers_the_built_name(ns: str, cs: str, slot: int) -> None:
    assert parse_vm_name(vm_name(ns, cs, slot)) == [VMCandidate(ns, cs, slot)]
    assert VMCandidate(ns, cs, slot) in parse_vm_name(legacy_vm_name(ns, cs, slot))


@pytest.mark.parametrize(
    "bad", ["../etc", "a%2Fb", "a\x00b", "A", "-a", "a" * 64, "", "a/b", "a.b", "a\n"]
)
def test_namespace_validation_refuses_injection(bad: str) -> None:
    with pytest.raises(InvalidName):
        check_namespace(bad)


@pytest.mark.parametrize("bad", ["../x", "a%2Fb", "x\x00", "a" * 254, "a_b", "a/b", "a\n"])
def test_name_validation_refuses_injection(bad: str) -> None:
    with pytest.raises(InvalidName):
        check_name(bad)


@pytest.mark.parametrize("bad", ["../x", "a//b", "A/b", "a/", "/a", "a%2fb", "a" * 256, "a\n"])
def test_repository_validation(bad: str) -> None:
    with pytest.raises(InvalidName):
        check_repository(bad)


@pytest.mark.parametrize("bad", ["hibernate\n", ".x", ""])
def test_tag_validation_refuses_a_trailing_newline(bad: str) -> None:
    # Python's `$` also matches before a final newline; a name is the whole text.
    with pytest.raises(InvalidName):
        check_tag(bad)


def test_repository_accepts_nested_paths() -> None:
    assert check_repository("proj/snapshots/vk-a-b-0") == "proj/snapshots/vk-a-b-0"


def test_setref_parse() -> None:
    assert SetRef.parse("ns/name") == SetRef("ns", "name")
    with pytest.raises(InvalidName):
        SetRef.parse("noslash")


def test_a_snapshot_is_looked_for_under_the_name_the_set_recorded() -> None:
    hashed, legacy = vm_name("ns", "set", 0), legacy_vm_name("ns", "set", 0)
    assert recorded_vm_names("ns", "set", 0, frozenset()) == (hashed,)
    assert recorded_vm_names("ns", "set", 0, frozenset({legacy})) == (legacy,)
    assert recorded_vm_names("ns", "set", 0, frozenset({legacy, hashed})) == (hashed, legacy)
    # Another set's name in the record never becomes a name to probe or drop.
    assert recorded_vm_names("ns", "set", 0, frozenset({"vk-other-x-0"})) == (hashed,)
