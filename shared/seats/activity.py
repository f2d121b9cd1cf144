"""A VM's CPU use as activity (`idle-cpu-below: <quantity>`), as pure decisions: at or above
the threshold `last-activity` is refreshed (at most once per tenth of its shortest timeout);
below it the idle clock runs; without PodMetrics it is unknown, never suspended for idleness."""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime, timedelta
from decimal import Decimal
from enum import StrEnum
from typing import Any

from shared import constants as k
from shared.durations import parse_duration
from shared.models import CocoonSet
from shared.sweep.decide import parsed, read_time, steady

# CPU quantity suffixes as powers of ten (binary ones are legal but absurd for CPU).
_EXPONENT = {"n": -9, "u": -6, "m": -3, "": 0, "k": 3, "M": 6, "G": 9}
_QUANTITY = re.compile(r"^([+]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+))(n|u|m|k|M|G)?$")
# When no timeout is configured, how often a busy VM's stamp is refreshed.
DEFAULT_REFRESH = timedelta(minutes=1)


def cpu_nanocores(quantity: str) -> int:
    """A CPU quantity (`50m`, `0.5`, `1`, `12345n`) in nanocores; ValueError otherwise."""
    if (m := _QUANTITY.match(quantity.strip())) is None:
        raise ValueError(f"invalid CPU quantity {quantity!r} (expected e.g. 50m, 0.5, 1)")
    return int(Decimal(m.group(1)).scaleb(_EXPONENT[m.group(2) or ""]) * Decimal(10**9))


class Activity(StrEnum):
    NOT_OPTED_IN = "not-opted-in"
    NOT_RUNNING = "not-running"  # only a Running, unsuspended set is measured
    ACTIVE = "active"  # at/above the threshold, stamp recent enough: no write
    REFRESH = "refresh"  # at/above the threshold: write last-activity = now
    QUIET = "quiet"  # below the threshold: the idle clock runs
    UNKNOWN = "unknown"  # no usage for the main pod: never suspend on missing data
    BAD_CONFIG = "bad-config"


@dataclass(frozen=True, slots=True)
class ActivityEval:
    state: Activity
    usage: int | None = None  # nanocores
    threshold: int | None = None


def refresh_every(cs: CocoonSet) -> timedelta:
    """A tenth of the shortest timeout the set uses (what bounds the activity writes)."""
    ann = cs.metadata.annotations
    keys = (k.ANN_IDLE_TIMEOUT, k.ANN_RECLAIMABLE_AFTER)
    timeouts = [t for key in keys if (t := parsed(parse_duration, ann.get(key))) is not None]
    return min(timeouts) / 10 if timeouts else DEFAULT_REFRESH


def evaluate_activity(cs: CocoonSet, usage: int | None, *, now: datetime) -> ActivityEval:
    """`usage`: the main pod's CPU in nanocores from PodMetrics, None when it has none."""
    if (raw := cs.metadata.annotations.get(k.ANN_IDLE_CPU_BELOW)) is None:
        return ActivityEval(Activity.NOT_OPTED_IN)
    if (threshold := parsed(cpu_nanocores, raw)) is None:
        return ActivityEval(Activity.BAD_CONFIG)
    if not steady(cs):
        return ActivityEval(Activity.NOT_RUNNING, threshold=threshold)
    if usage is None:
        return ActivityEval(Activity.UNKNOWN, threshold=threshold)
    if usage < threshold:
        return ActivityEval(Activity.QUIET, usage, threshold)
    # An unreadable stamp is replaced by a good one.
    stored = read_time(cs.metadata.annotations.get(k.ANN_LAST_ACTIVITY))
    if stored is not None and now - stored < refresh_every(cs):
        return ActivityEval(Activity.ACTIVE, usage, threshold)
    return ActivityEval(Activity.REFRESH, usage, threshold)


def main_pod_usage(containers: list[dict[str, object]]) -> int | None:
    """Sum of the containers' CPU usage in a PodMetrics item; None if none is readable."""
    usages = [c.get("usage") for c in containers]
    cpus = [parsed(cpu_nanocores, u.get("cpu")) for u in usages if isinstance(u, dict)]
    readable = [n for n in cpus if n is not None]
    return sum(readable) if readable else None


def cpu_by_pod(items: list[dict[str, Any]]) -> dict[str, int]:
    """Pod name -> CPU nanocores, from a PodMetrics list (pods with no readable usage left out)."""
    out: dict[str, int] = {}
    for item in items:
        name, containers = (item.get("metadata") or {}).get("name"), item.get("containers")
        usage = main_pod_usage(containers) if isinstance(containers, list) else None
        if isinstance(name, str) and usage is not None:
            out[name] = usage
    return out
