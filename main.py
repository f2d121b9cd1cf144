"""The targets (docs/design.md#targets): `release`, `wake`, `sweep` (CloudEvent), `ingest` (HTTP).

Cloud Run functions load `main.py` at the root of the source archive, so this
file stays; the targets themselves live in the `functions` package
(`functions/entrypoints.py`) so an installed wheel has them too
(`cocoon-hibernation serve` finds them there, never through this file).
"""

from __future__ import annotations

from functions.entrypoints import ingest, release, sweep, wake

__all__ = ["ingest", "release", "sweep", "wake"]
