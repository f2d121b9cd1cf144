"""Ack or retry, decided in one place.

`run` executes triggers. It returns normally when every trigger was handled
or was permanently irrelevant (acknowledge: 2xx), and raises when a transient
failure left work undone (functions-framework answers 500 and the platform
redelivers with backoff).
"""

from __future__ import annotations

from collections.abc import Sequence

from shared.config import Settings
from shared.triggers import Trigger


def run(triggers: Sequence[Trigger], *, settings: Settings, target: str) -> None:
    raise NotImplementedError("the reconciler lands with the release/wake work")
