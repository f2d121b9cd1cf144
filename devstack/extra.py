"""The `local` extra: what the local stack needs beyond the deployed functions.

The functions and the command line's cluster commands run from the plain
wheel; the local stack (the embedded Kubernetes API evaluates the CRD's CEL rules
with cel-python) needs the extra. Every entry point of the local stack checks it
at start, so a missing extra is one line naming the install command, never a 500
on every request that hits a CEL rule. The project is not published to a package
index: the command installs from a clone or from the wheel built there.
"""

from __future__ import annotations

import importlib.util
from importlib.metadata import PackageNotFoundError, version
from typing import Final

from devstack.processes import StackError


def _wheel_name() -> str:
    try:
        return f"cocoon_hibernation-{version('cocoon-hibernation')}-py3-none-any.whl"
    except PackageNotFoundError:  # run from a source tree that was never installed
        return "cocoon_hibernation-VERSION-py3-none-any.whl"


INSTALL_HINT: Final = (
    "in a clone: uv sync --extra local; from the wheel (`uv build` in a clone writes it "
    f"to dist/): pip install 'dist/{_wheel_name()}[local]' (not on a package index)"
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
