"""The targets for Cloud Run, which loads `main.py` at the archive's root; they live in
`functions.entrypoints` so an installed wheel has them too.
"""

from __future__ import annotations

from functions.entrypoints import ingest, release, sweep, wake

__all__ = ["ingest", "release", "sweep", "wake"]
