"""The targets for Cloud Run, which loads `main.py` at the archive's root; they live in
`functions.entrypoints` so an installed wheel has them too.
"""

from __future__ import annotations

from functions import doors
from functions.entrypoints import ingest, release, sweep, wake

# Run per target: the framework executes this file anew for each, entrypoints only once.
doors.cap_current_app()

__all__ = ["ingest", "release", "sweep", "wake"]
