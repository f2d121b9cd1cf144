"""The `local` extra: what the local stack needs beyond the deployed functions.

The functions and the command line's cluster commands run from the plain
wheel; the local stack runs from a clone (the wheel and the image leave `devstack`
out: not production code), and needs the extra there (the embedded Kubernetes API
evaluates the CRD's CEL rules with cel-python). Every entry point of the local
stack checks it at start, so a missing extra is one line naming the install
command, never a 500 on every request that hits a CEL rule.
"""

from __future__ import annotations

import importlib.util
from typing import Final

from devstack.processes import StackError

INSTALL_HINT: Final = (
    "the local stack runs from a clone (the wheel leaves it out): "
    "uv sync --extra local, then uv run cocoon-hibernation demo"
)

# import name -> distribution, for the message.
_MODULES: Final = {"celpy": "cel-python"}


class LocalExtraMissing(StackError):
    """The local stack was started without the `local` extra installed."""


def missing_local_modules() -> list[str]:
    """Distributions of the `local` extra that cannot be imported here."""
    return [dist for module, dist in _MODULES.items() if importlib.util.find_spec(module) is None]


def require_local_extra() -> None:
    """Raise :class:`LocalExtraMissing` (one line) unless the `local` extra is installed."""
    missing = missing_local_modules()
    if missing:
        raise LocalExtraMissing(
            f"the local stack needs the `local` extra ({', '.join(missing)} is missing): "
            f"{INSTALL_HINT}"
        )
