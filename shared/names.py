"""Names: DNS-1123 validation and the deterministic VM names of docs/design.md#names.

Every namespace, set name, pod name and registry repository that comes from
an event is checked here before it reaches a URL, a label selector or a log
field used as a key. Invalid input raises :class:`InvalidName` (a permanent
error: redelivering the event cannot make the name valid).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from shared.errors import InvalidName

# Kubernetes' own limits (k8s.io/apimachinery/pkg/util/validation).
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

# A Kubernetes label value (apimachinery IsValidLabelValue): empty, or at most 63
# characters, alphanumeric at both ends and `-_.` inside. The one spelling of the
# rule: the CRD's schema (shared.models) and the checks in code use it.
LABEL_VALUE_MAX = 63
LABEL_VALUE_PATTERN = r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$"
_LABEL_VALUE = re.compile(LABEL_VALUE_PATTERN)

VM_PREFIX = "vk-"


def is_dns1123_label(value: str) -> bool:
    return len(value) <= DNS1123_LABEL_MAX and bool(_DNS1123_LABEL.match(value))


def is_dns1123_subdomain(value: str) -> bool:
    return len(value) <= DNS1123_SUBDOMAIN_MAX and bool(_DNS1123_SUBDOMAIN.match(value))


def is_label_value(value: str) -> bool:
    """Whether the API server accepts `value` as a label value ("" included)."""
    return len(value) <= LABEL_VALUE_MAX and _LABEL_VALUE.fullmatch(value) is not None


def check_namespace(value: object) -> str:
    if not isinstance(value, str) or not is_dns1123_label(value):
        raise InvalidName(f"invalid namespace {value!r}: must be a DNS-1123 label")
    return value


def check_name(value: object, *, what: str = "name") -> str:
    """A CocoonSet or pod name: a DNS-1123 subdomain."""
    if not isinstance(value, str) or not is_dns1123_subdomain(value):
        raise InvalidName(f"invalid {what} {value!r}: must be a DNS-1123 subdomain")
    return value


def check_repository(value: object) -> str:
    if (
        not isinstance(value, str)
        or len(value) > OCI_REPOSITORY_MAX
        or not _OCI_REPOSITORY.match(value)
    ):
        raise InvalidName(f"invalid repository {value!r}: not an OCI repository name")
    return value


def check_tag(value: object) -> str:
    if not isinstance(value, str) or not _OCI_TAG.match(value):
        raise InvalidName(f"invalid tag {value!r}")
    return value


def check_digest(value: object) -> str:
    if not isinstance(value, str) or len(value) > 256 or not _DIGEST.match(value):
        raise InvalidName(f"invalid digest {value!r}")
    return value


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
    namespace: str
    set_name: str
    slot: int

    @property
    def ref(self) -> SetRef:
        return SetRef(self.namespace, self.set_name)


def vm_name(namespace: str, set_name: str, slot: int) -> str:
    """`vk-<ns>-<cs>-<slot>`: the VM of agent slot `slot` (0 = main)."""
    return f"{VM_PREFIX}{namespace}-{set_name}-{slot}"


def toolbox_vm_name(namespace: str, pod_name: str) -> str:
    return f"{VM_PREFIX}{namespace}-{pod_name}"


def main_pod_name(set_name: str) -> str:
    return f"{set_name}-0"


def parse_vm_name(name: str) -> list[VMCandidate]:
    """Every (namespace, set, slot) split of an agent VM name whose parts are valid.

    `vk-a-b-c-0` may be (`a`, `b-c`) or (`a-b`, `c`): a VM name alone does not
    identify its set, so callers reconcile every candidate that exists.
    """
    if not name.startswith(VM_PREFIX):
        return []
    body, dash, slot_text = name[len(VM_PREFIX) :].rpartition("-")
    if not dash or not slot_text.isdigit() or (len(slot_text) > 1 and slot_text[0] == "0"):
        return []
    slot = int(slot_text)
    out: list[VMCandidate] = []
    for i, ch in enumerate(body):
        if ch != "-":
            continue
        ns, set_name = body[:i], body[i + 1 :]
        if is_dns1123_label(ns) and is_dns1123_subdomain(set_name):
            out.append(VMCandidate(ns, set_name, slot))
    return out


def pod_set_candidates(pod_name: str) -> list[str]:
    """Set names a pod `<set>-<slot>` may belong to (used when the event has no labels)."""
    base, dash, slot = pod_name.rpartition("-")
    if dash and base and is_dns1123_subdomain(base) and slot:
        return [base]
    return []
