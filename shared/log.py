"""Structured logs: one JSON line per record, with Cloud Logging's field names. Counters and
histograms are log lines too (a field `metric`), so Terraform's log-based metrics count them
without a metrics client on the cold-start path; `serve` adds Prometheus sinks."""

from __future__ import annotations

import functools
import json
import sys
import threading
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from typing import Any, TextIO

from shared.config import LogFormat

_lock = threading.Lock()

# Called with (metric, value, labels) on every count or sample: `serve` feeds Prometheus.
CounterSink = Callable[[str, int, Mapping[str, str]], None]
ObservationSink = Callable[[str, float, Mapping[str, str]], None]
_sinks: list[tuple[CounterSink, ObservationSink]] = []


class _State:
    fmt = LogFormat.JSON
    stream: TextIO | None = None
    # Records below this severity are dropped (the CLI's -v/-q); counts are INFO.
    min_level = 0


# Untrusted text quoted in a log field is cut: a log line is not a place for a payload.
DETAIL_MAX = 200


def clip(text: str, limit: int = DETAIL_MAX) -> str:
    """`text`, cut to `limit` characters (and marked so) when it is longer."""
    return text if len(text) <= limit else text[:limit] + "…"


# Cloud Logging's severities, in order.
LEVELS = {"DEBUG": 10, "INFO": 20, "WARNING": 30, "ERROR": 40}


# Never let a secret reach a log line, whatever a caller passes.
_REDACT = frozenset({"token", "authorization", "password", "ingest_token"})


def configure(fmt: LogFormat, stream: TextIO | None = None, *, level: str = "DEBUG") -> None:
    _State.fmt = fmt
    _State.stream = stream
    _State.min_level = LEVELS[level]


def set_format(fmt: LogFormat) -> None:
    """Change the format only, keeping any stream a test or the CLI configured."""
    _State.fmt = fmt


def emit(severity: str, message: str, **fields: Any) -> None:
    if LEVELS.get(severity, 40) < _State.min_level:
        return
    record = {k: ("[redacted]" if k.lower() in _REDACT else v) for k, v in fields.items()}
    out = _State.stream or sys.stdout
    if _State.fmt is LogFormat.TEXT:
        extras = " ".join(f"{k}={v}" for k, v in record.items())
        line = f"{datetime.now(UTC):%H:%M:%S} {severity:<7} {message} {extras}".rstrip()
    else:
        line = json.dumps(
            {"severity": severity, "message": message, **record}, default=str, separators=(",", ":")
        )
    with _lock:
        out.write(line + "\n")
        out.flush()


debug = functools.partial(emit, "DEBUG")
info = functools.partial(emit, "INFO")
warning = functools.partial(emit, "WARNING")
error = functools.partial(emit, "ERROR")


def count(metric: str, value: int = 1, **labels: str) -> None:
    """One increment of a counter, read by log-based metrics."""
    emit("INFO", f"{metric} +{value}", metric=metric, value=value, labels=labels)
    for sink, _ in tuple(_sinks):
        sink(metric, value, labels)


def observe(metric: str, seconds: float, **labels: str) -> None:
    """One sample of a histogram (a distribution log metric); a negative duration (two
    writers' clocks disagreeing) is recorded as 0 rather than hidden."""
    value = round(max(0.0, seconds), 3)
    emit("INFO", f"{metric} {value}s", metric=metric, value=value, kind="histogram", labels=labels)
    for _, sink in tuple(_sinks):
        sink(metric, value, labels)


def add_sinks(counter: CounterSink, observation: ObservationSink) -> None:
    """Also send every count and every histogram sample to these (idempotent)."""
    with _lock:
        if (counter, observation) not in _sinks:
            _sinks.append((counter, observation))
