"""Durations (`45s`, `30m`, `2h`, `1h30m`) and RFC 3339 timestamps from annotations."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta

# ASCII digits only: `\d` would also take other scripts' digits, which Terraform's
# validation of the same variable refuses.
_PART = re.compile(r"([0-9]+)(ms|s|m|h|d)")
_UNITS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}


def parse_duration(text: str) -> timedelta:
    """Go-style duration with units ms/s/m/h/d; raises ValueError with the bad value."""
    s = text.strip()
    if not s:
        raise ValueError("empty duration")
    pos, total = 0, 0.0
    for m in _PART.finditer(s):
        if m.start() != pos:
            break
        total += int(m.group(1)) * _UNITS[m.group(2)]
        pos = m.end()
    if pos != len(s):
        raise ValueError(f"invalid duration {text!r} (expected e.g. 45s, 30m, 2h)")
    if total <= 0:
        raise ValueError(f"duration {text!r} must be positive")
    return timedelta(seconds=total)


def parse_rfc3339(text: str) -> datetime:
    """An RFC 3339 timestamp (`Z` or an offset); naive input is rejected."""
    s = text.strip()
    if s.endswith(("Z", "z")):
        s = s[:-1] + "+00:00"
    try:
        value = datetime.fromisoformat(s)
    except ValueError as e:
        raise ValueError(f"invalid RFC 3339 timestamp {text!r}") from e
    if value.tzinfo is None:
        raise ValueError(f"timestamp {text!r} has no time zone")
    return value.astimezone(UTC)


def format_rfc3339(value: datetime) -> str:
    return value.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def utcnow() -> datetime:
    return datetime.now(UTC)
