"""Which cocoonstack the local stack plays: the August pair or today's upstream.

A setting, not a fork: the simulator's normal flow, its cocoon-operator and its
vk-cocoon differ only where upstream changed (docs/compatibility.md). AUGUST is
cocoon-operator 6151b05 with cocoon-common v0.3.0 and vk-cocoon a9cb04f; TODAY is
the newest file versions the project was checked against.
"""

from __future__ import annotations

from enum import StrEnum

from shared.names import legacy_vm_name, vm_name


class Upstream(StrEnum):
    AUGUST = "august"
    TODAY = "today"


def agent_vm_name(upstream: Upstream, namespace: str, set_name: str, slot: int) -> str:
    """The name the operator of that generation writes on an agent pod."""
    if upstream is Upstream.AUGUST:
        return legacy_vm_name(namespace, set_name, slot)
    return vm_name(namespace, set_name, slot)
