"""Activity without an external writer: a VM's CPU use as the sweep reads it from PodMetrics.

Opt-in per set with `cocoonset.cocoonstack.io/idle-cpu-below: <quantity>`.
Pure decisions; the sweep lists `metrics.k8s.io` PodMetrics (main pods only,
once per namespace per run) and feeds the usage of each set's main pod here.

- usage at or above the threshold = active: `last-activity` is refreshed, but
  only when the stored stamp is older than a tenth of the shortest timeout
  the set uses (idle-timeout, reclaimable-after), so a busy VM costs one write
  per tenth of its timeout, not one per sweep;
- usage below the threshold = no evidence of activity: nothing is written and
  the ordinary idle clock runs;
- no usage for the main pod (metrics-server absent, the pod not scraped yet):
  *unknown*, and an unknown set is never suspended for idleness this run.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime, timedelta
from decimal import Decimal, InvalidOperation
from enum import StrEnum

from shared import constants as k
from shared.durations import parse_duration, parse_rfc3339
from shared.enums import CocoonSetPhase
from shared.models import CocoonSet

# Kubernetes quantity suffixes that matter for CPU (binary suffixes are legal but absurd).
_SUFFIX = {
    "n": Decimal("1e-9"),
    "u": Decimal("1e-6"),
    "m": Decimal("1e-3"),
    "": Decimal(1),
    "k": Decimal(1000),
    "M": Decimal(10**6),
    "G": Decimal(10**9),
}
_QUANTITY = re.compile(r"^([+]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+))(n|u|m|k|M|G)?$")
# When no timeout is configured, how often a busy VM's stamp is refreshed.
DEFAULT_REFRESH = timedelta(minutes=1)


def cpu_nanocores(quantity: str) -> int:
    """A CPU quantity (`50m`, `0.5`, `1`, `12345n`) in nanocores; ValueError otherwise."""
    m = _QUANTITY.match(quantity.strip())
    if m is None:
        raise ValueError(f"invalid CPU quantity {quantity!r} (expected e.g. 50m, 0.5, 1)")
    try:
        value = Decimal(m.group(1)) * _SUFFIX[m.group(2) or ""]
    except InvalidOperation:
        raise ValueError(f"invalid CPU quantity {quantity!r}") from None
    return int(value * Decimal(10**9))


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
    timeouts: list[timedelta] = []
    for key in (k.ANN_IDLE_TIMEOUT, k.ANN_RECLAIMABLE_AFTER):
        raw = ann.get(key)
        if raw is None:
            continue
        try:
            timeouts.append(parse_duration(raw))
        except ValueError:
            continue
    return min(timeouts) / 10 if timeouts else DEFAULT_REFRESH


def evaluate_activity(cs: CocoonSet, usage: int | None, *, now: datetime) -> ActivityEval:
    """`usage`: the main pod's CPU in nanocores from PodMetrics, None when it has none."""
    raw = cs.metadata.annotations.get(k.ANN_IDLE_CPU_BELOW)
    if raw is None:
        return ActivityEval(Activity.NOT_OPTED_IN)
    try:
        threshold = cpu_nanocores(raw)
    except ValueError:
        return ActivityEval(Activity.BAD_CONFIG)
    if cs.phase is not CocoonSetPhase.RUNNING or cs.suspended or cs.hint:
        return ActivityEval(Activity.NOT_RUNNING, threshold=threshold)
    if usage is None:
        return ActivityEval(Activity.UNKNOWN, threshold=threshold)
    if usage < threshold:
        return ActivityEval(Activity.QUIET, usage, threshold)
    stored = cs.metadata.annotations.get(k.ANN_LAST_ACTIVITY)
    if stored is not None:
        try:
            if now - parse_rfc3339(stored) < refresh_every(cs):
                return ActivityEval(Activity.ACTIVE, usage, threshold)
        except ValueError:
            pass  # an unreadable stamp is replaced by a good one
    return ActivityEval(Activity.REFRESH, usage, threshold)


def main_pod_usage(containers: list[dict[str, object]]) -> int | None:
    """Sum of the containers' CPU usage in a PodMetrics item; None if none is readable."""
    total, seen = 0, False
    for c in containers:
        usage = c.get("usage")
        if not isinstance(usage, dict):
            continue
        cpu = usage.get("cpu")
        if not isinstance(cpu, str):
            continue
        try:
            total += cpu_nanocores(cpu)
        except ValueError:
            continue
        seen = True
    return total if seen else None
