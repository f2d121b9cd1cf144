"""The local stack: the whole system on one machine (``cocoon-hibernation devstack up``, ``demo``).

    from devstack import Stack, StackConfig

    with Stack(StackConfig(tick_seconds=1)) as stack:
        stack.kubeconfig, stack.registry_base, stack.function_env()
        stack.request_wake("demo", "a")

Modules: :mod:`~devstack.stack` (processes, the stack), :mod:`~devstack.simulator`
(wires the scheduler, operator and vk-cocoon stand-ins: :mod:`~devstack.sim_scheduler`,
:mod:`~devstack.sim_normal_flow`, :mod:`~devstack.sim_vkcocoon`, reading pods through
:mod:`~devstack.sim_pods`), :mod:`~devstack.placement` (the
scheduler's pure placement), :mod:`~devstack.scenario` (the demo's story),
:mod:`~devstack.observe` / :mod:`~devstack.functionlog` /
:mod:`~devstack.narrate` (what the demo shows), :mod:`~devstack.processes`
(child processes that never outlive the stack, the ports they listen on).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from devstack.stack import Stack, StackConfig

__all__ = ["Stack", "StackConfig"]


def __getattr__(name: str) -> Any:
    # Lazy: the pure modules (placement, the simulator's decisions) import without the stack.
    if name in __all__:
        from devstack import stack  # noqa: PLC0415

        return getattr(stack, name)
    raise AttributeError(name)
