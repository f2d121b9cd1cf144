"""The CloudEvent targets: CloudEvent -> triggers -> runtime."""

from __future__ import annotations

from typing import Any


def release(event: Any) -> None:
    raise NotImplementedError


def wake(event: Any) -> None:
    raise NotImplementedError


def sweep(event: Any) -> None:
    raise NotImplementedError
