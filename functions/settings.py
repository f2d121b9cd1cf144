"""The process's settings: read from the environment once per function instance.

Light on purpose (no client, no model import): every target asks for the
settings before it knows whether the event matters, so this module sits on
the cold-start path of every request.
"""

from __future__ import annotations

import threading

from shared import log
from shared.config import Settings


class _Cache:
    lock = threading.Lock()
    settings: Settings | None = None


def get() -> Settings:
    """`Settings.from_env()` once (a ConfigError names the variable: fix the deployment)."""
    with _Cache.lock:
        if _Cache.settings is None:
            loaded = Settings.from_env()
            log.set_format(loaded.log_format)
            _Cache.settings = loaded
        return _Cache.settings


def reset() -> None:
    """Forget the cached settings (tests change the environment between cases)."""
    with _Cache.lock:
        _Cache.settings = None
