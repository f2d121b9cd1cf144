"""What a deploy check reports: a level and a one-line message per check."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum


class Level(StrEnum):
    OK = "ok"
    WARN = "warn"
    # Not checked (no gcloud, credentials or cluster): fails the command unless --allow-unchecked.
    UNCHECKED = "skip"
    FAIL = "FAIL"


@dataclass(frozen=True, slots=True)
class Finding:
    level: Level
    check: str
    message: str
