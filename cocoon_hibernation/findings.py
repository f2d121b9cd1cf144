"""What a deploy check reports: a level and a one-line message per check."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum


class Level(StrEnum):
    OK = "ok"
    WARN = "warn"
    # Could not be checked (no gcloud, no credentials, no cluster): a failure of the
    # command unless --allow-unchecked, never a pass.
    UNCHECKED = "skip"
    FAIL = "FAIL"


@dataclass(frozen=True, slots=True)
class Finding:
    level: Level
    check: str
    message: str
