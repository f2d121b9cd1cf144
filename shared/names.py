"""Names: DNS-1123 and OCI validation, and cocoonstack's VM names in both generations. Every
name from an event is checked here before it reaches a URL, a label selector or a log key;
invalid input raises :class:`InvalidName` (permanent)."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable
from dataclasses import dataclass

from shared.errors import InvalidName

# Kubernetes' own limits.
DNS1123_LABEL_MAX = 63
DNS1123_SUBDOMAIN_MAX = 253
_LABEL = r"[a-z0-9](?:[-a-z0-9]*[a-z0-9])?"
_DNS1123_LABEL = re.compile(rf"^{_LABEL}$")
_DNS1123_SUBDOMAIN = re.compile(rf"^{_LABEL}(?:\.{_LABEL})*$")
# OCI distribution-spec repository name grammar, path components separated by '/'.
_OCI_COMPONENT = r"[a-z0-9]+(?:(?:\.|_|__|-+)[a-z0-9]+)*"
_OCI_REPOSITORY = re.compile(rf"^{_OCI_COMPONENT}(?:/{_OCI_COMPONENT})*$")
OCI_REPOSITORY_MAX = 255
_OCI_TAG = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9._-]{0,127}$")
_DIGEST = re.compile(r"^[a-z0-9]+(?:[.+_-][a-z0-9]+)*:[a-zA-Z0-9=_-]+$")

# A Kubernetes label value: the one spelling, used by the CRD's schema and the code's checks.
LABEL_VALUE_MAX = 63
LABEL_VALUE_PATTERN = r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$"
_LABEL_VALUE = re.compile(LABEL_VALUE_PATTERN)

VM_PREFIX = "vk-"


def is_dns1123_label(value: str) -> bool:
    return len(value) <= DNS1123_LABEL_MAX and bool(_DNS1123_LABEL.fullmatch(value))


def is_dns1123_subdomain(value: str) -> bool:
    return len(value) <= DNS1123_SUBDOMAIN_MAX and bool(_DNS1123_SUBDOMAIN.fullmatch(value))


def is_label_value(value: str) -> bool:
    """Whether the API server accepts `value` as a label value ("" included)."""
    return len(value) <= LABEL_VALUE_MAX and _LABEL_VALUE.fullmatch(value) is not None


def _check(value: object, valid: Callable[[str], object], what: str, why: str = "") -> str:
    if not isinstance(value, str) or not valid(value):
        raise InvalidName(f"invalid {what} {value!r}{why}")
    return value


def check_namespace(value: object) -> str:
    return _check(value, is_dns1123_label, "namespace", ": must be a DNS-1123 label")


def check_name(value: object, *, what: str = "name") -> str:
    """A CocoonSet or pod name: a DNS-1123 subdomain."""
    return _check(value, is_dns1123_subdomain, what, ": must be a DNS-1123 subdomain")


def check_repository(value: object) -> str:
    def valid(v: str) -> bool:
        return len(v) <= OCI_REPOSITORY_MAX and bool(_OCI_REPOSITORY.fullmatch(v))

    return _check(value, valid, "repository", ": not an OCI repository name")


def check_tag(value: object) -> str:
    return _check(value, _OCI_TAG.fullmatch, "tag")


def check_digest(value: object) -> str:
    return _check(value, lambda v: len(v) <= 256 and _DIGEST.fullmatch(v), "digest")


@dataclass(frozen=True, slots=True)
class SetRef:
    """A CocoonSet's identity; construction validates both parts."""

    namespace: str
    name: str

    def __post_init__(self) -> None:
        check_namespace(self.namespace)
        check_name(self.name, what="cocoonset name")

    def __str__(self) -> str:
        return f"{self.namespace}/{self.name}"

    @classmethod
    def parse(cls, text: str) -> SetRef:
        """Parse the command line's `NS/NAME`."""
        ns, sep, name = text.partition("/")
        if not sep:
            raise InvalidName(f"expected NAMESPACE/NAME, got {text!r}")
        return cls(ns, name)


@dataclass(frozen=True, slots=True)
class VMCandidate:
    """One (namespace, set, slot) a VM name may stand for: today's names are proven by their
    hash; a v0.3.0 one is only a split, accepted only when the set records the name."""

    namespace: str
    set_name: str
    slot: int

    @property
    def ref(self) -> SetRef:
        return SetRef(self.namespace, self.set_name)


# cocoon-webhook keeps VM names short enough for `<vm>-hibernate-import` beside the live VM.
HIBERNATE_IMPORT_SUFFIX = "-hibernate-import"
VM_NAME_MAX = 63
MANAGED_VM_NAME_MAX = VM_NAME_MAX - len(HIBERNATE_IMPORT_SUFFIX)
_HASH_HEX = 6
# Each dash of a flattened set name may have been a dot; beyond this many
# dashes the dotted spellings are not tried (2**12 hashes per split at most).
_MAX_DOT_GUESSES = 12


def vm_name_for_pod(namespace: str, pod_name: str) -> str:
    """`vk-<ns>-<pod, dots as dashes>-<first 3 bytes of sha256("<ns>/<pod>"), hex>`."""
    digest = hashlib.sha256(f"{namespace}/{pod_name}".encode()).hexdigest()[:_HASH_HEX]
    return f"{VM_PREFIX}{namespace}-{pod_name.replace('.', '-')}-{digest}"


def vm_name(namespace: str, set_name: str, slot: int) -> str:
    """Today's name of the VM of agent slot `slot` (0 = main): that of pod `<set>-<slot>`."""
    return vm_name_for_pod(namespace, f"{set_name}-{slot}")


def legacy_vm_name(namespace: str, set_name: str, slot: int) -> str:
    """`vk-<ns>-<set>-<slot>`: the name cocoon-common v0.3.0 gave the same VM."""
    return f"{VM_PREFIX}{namespace}-{set_name}-{slot}"


def vm_names(namespace: str, set_name: str, slot: int) -> tuple[str, str]:
    """Both generations' names of one agent VM, today's first."""
    return vm_name(namespace, set_name, slot), legacy_vm_name(namespace, set_name, slot)


def recorded_vm_names(
    namespace: str, set_name: str, slot: int, recorded: frozenset[str]
) -> tuple[str, ...]:
    """The names a VM's snapshot may be under, today's first: of its two names those the set
    recorded, else today's. A pod's annotation never enters: it must not steer a delete."""
    names = vm_names(namespace, set_name, slot)
    return tuple(n for n in names if n in recorded) or names[:1]


def toolbox_vm_name(namespace: str, set_name: str, toolbox: str) -> str:
    return vm_name_for_pod(namespace, f"{set_name}-{toolbox}")


def main_pod_name(set_name: str) -> str:
    return f"{set_name}-0"


def _slot_of(text: str) -> int | None:
    if not text.isdigit() or (len(text) > 1 and text[0] == "0"):
        return None
    return int(text)


def _dotted_spellings(flat: str) -> list[str]:
    """Every set name whose dots-as-dashes spelling is `flat` (plain first)."""
    dashes = [i for i, ch in enumerate(flat) if ch == "-" and 0 < i < len(flat) - 1]
    dashes = [i for i in dashes if flat[i - 1] != "-" and flat[i + 1] != "-"]
    if len(dashes) > _MAX_DOT_GUESSES:
        return [flat]
    out = []
    for mask in range(1 << len(dashes)):
        chars = list(flat)
        for bit, i in enumerate(dashes):
            if mask >> bit & 1:
                chars[i] = "."
        out.append("".join(chars))
    return out


def _ns_splits(text: str) -> list[tuple[str, str]]:
    """Every (namespace, rest) a dash of `text` may separate, the namespace a DNS-1123 label."""
    return [
        (text[:i], text[i + 1 :])
        for i, ch in enumerate(text)
        if ch == "-" and is_dns1123_label(text[:i])
    ]


def _hashed_candidates(name: str) -> list[VMCandidate]:
    body, dash, digest = name[len(VM_PREFIX) :].rpartition("-")
    if not dash or len(digest) != _HASH_HEX or any(c not in "0123456789abcdef" for c in digest):
        return []
    flat_pod, dash, slot_text = body.rpartition("-")
    slot = _slot_of(slot_text)
    if not dash or slot is None:
        return []
    return [
        VMCandidate(ns, set_name, slot)
        for ns, flat_set in _ns_splits(flat_pod)
        for set_name in _dotted_spellings(flat_set)
        if is_dns1123_subdomain(set_name) and vm_name(ns, set_name, slot) == name
    ]


def _legacy_candidates(name: str) -> list[VMCandidate]:
    body, dash, slot_text = name[len(VM_PREFIX) :].rpartition("-")
    slot = _slot_of(slot_text)
    if not dash or slot is None:
        return []
    return [
        VMCandidate(ns, set_name, slot)
        for ns, set_name in _ns_splits(body)
        if is_dns1123_subdomain(set_name)
    ]


def parse_vm_name(name: str) -> list[VMCandidate]:
    """Every (namespace, set, slot) an agent VM name may stand for: the hashed split
    when its hash checks out, else every legacy split (`vk-a-b-c-0`: `a`/`b-c` or `a-b`/`c`)."""
    if not name.startswith(VM_PREFIX) or len(name) > VM_NAME_MAX + len(HIBERNATE_IMPORT_SUFFIX):
        return []
    hashed = _hashed_candidates(name)
    return hashed if hashed else _legacy_candidates(name)


# A legacy name is checked against at most this many possible sets (one GET each);
# a name with more splits is treated as shared (fail closed).
LEGACY_OWNERS_MAX = 32


def legacy_owners(name: str) -> list[SetRef]:
    """Every set a v0.3.0 name `vk-<ns>-<set>-<slot or toolbox>` may belong to."""
    if not name.startswith(VM_PREFIX):
        return []
    out: dict[SetRef, None] = {}
    for ns, rest in _ns_splits(name[len(VM_PREFIX) :]):
        for b, ch in enumerate(rest):
            if ch == "-" and 0 < b < len(rest) - 1 and is_dns1123_subdomain(rest[:b]):
                out[SetRef(ns, rest[:b])] = None
    return list(out)


def pod_set_candidates(pod_name: str) -> list[str]:
    """Set names a pod `<set>-<slot>` may belong to (used when the event has no labels)."""
    base, dash, slot = pod_name.rpartition("-")
    if dash and base and is_dns1123_subdomain(base) and slot:
        return [base]
    return []
