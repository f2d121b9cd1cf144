"""One value per key for the life of the process: how every client is reused by warm
invocations, keyed by what configures it. Standard library only (on the cold-start path)."""

from __future__ import annotations

import threading
from collections.abc import Callable, Hashable
from typing import Generic, TypeVar

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


class ProcessCache(Generic[K, V]):
    """`get(key)` builds the value once per key; `reset()` forgets (and closes) them all."""

    def __init__(self, build: Callable[[K], V], close: Callable[[V], None] | None = None) -> None:
        self._build = build
        self._close = close
        self._values: dict[K, V] = {}
        self._lock = threading.Lock()

    def get(self, key: K) -> V:
        with self._lock:
            if key not in self._values:
                self._values[key] = self._build(key)
            return self._values[key]

    def reset(self) -> None:
        """Forget every value, closing each one after the lock is released."""
        with self._lock:
            values = list(self._values.values())
            self._values.clear()
        if self._close is not None:
            for value in values:
                self._close(value)
