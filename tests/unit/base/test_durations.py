"""Durations and timestamps read from annotations and COCOON_WAKE_DEADLINE."""

from __future__ import annotations

from datetime import timedelta

import pytest

from shared.durations import format_rfc3339, parse_duration, parse_rfc3339


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("45s", 45), ("30m", 1800), ("2h", 7200), ("1h30m", 5400), ("2d", 172800), ("500ms", 0.5)],
    ids=["seconds", "minutes", "hours", "compound", "days", "millis"],
)
def test_parse_duration(text: str, seconds: float) -> None:
    assert parse_duration(text) == timedelta(seconds=seconds)


@pytest.mark.parametrize(
    "text",
    ["", "soon", "1.5h", "0s", "10", "m", "-5m", "\u0661\u0660m", "5 m"],
    ids=[
        "empty",
        "word",
        "decimal",
        "zero",
        "no-unit",
        "no-number",
        "negative",
        "arabic-indic-digits",
        "inner-space",
    ],
)
def test_parse_duration_refuses(text: str) -> None:
    with pytest.raises(ValueError):
        parse_duration(text)


def test_rfc3339_round_trip_and_refuses_naive_times() -> None:
    value = parse_rfc3339("2026-11-30T02:00:00+01:00")
    assert format_rfc3339(value) == "2026-11-30T01:00:00Z"
    with pytest.raises(ValueError):
        parse_rfc3339("2026-11-30T02:00:00")
