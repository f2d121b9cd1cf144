"""The one list of metrics this project emits: kinds, labels, help and buckets (the names are
in `shared.constants`). Each is a structured log line first (`shared.log.count`/`observe`),
rebuilt by Terraform's log-based metrics and fed to Prometheus by `serve`."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final, Literal

from shared import constants as k

# From a seat freed in half a second to a wake waiting an hour.
BUCKETS: Final = (0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0, 600.0, 1800.0, 3600.0)
# A seat freed after vk-cocoon's report is one DELETE away (a redelivery: a retry later).
SEAT_FREED_BUCKETS: Final = (0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)


@dataclass(frozen=True, slots=True)
class Metric:
    name: str
    kind: Literal["counter", "histogram"]
    help: str
    labels: tuple[str, ...]
    buckets: tuple[float, ...] = BUCKETS  # a histogram's, in seconds


CATALOGUE: Final[tuple[Metric, ...]] = (
    # The reference operator's counters (dashboards built for it query these names).
    Metric(
        k.METRIC_PODS_DELETED,
        "counter",
        "Number of hibernated pods deleted by release-policy suspend to free their "
        "scheduling seat.",
        ("namespace", "cocoonset"),
    ),
    Metric(
        k.METRIC_WAKE,
        "counter",
        "Number of released-seat wakes that reached a live VM, by placement (hint-node="
        "landed back on the hibernated-on node, pool=rescheduled elsewhere).",
        ("namespace", "cocoonset", "placement"),
    ),
    Metric(
        k.METRIC_WAKE_UNSCHEDULABLE,
        "counter",
        "Number of released-seat wake pods observed Unschedulable (out of capacity); "
        "counted once per pod and scheduler message.",
        ("namespace", "cocoonset"),
    ),
    # Ours, not the operator's.
    Metric(
        k.METRIC_SEAT_RECLAIMS,
        "counter",
        "Number of idle reclaimable seats suspended for a wake that found no capacity.",
        ("namespace", "pool"),
    ),
    Metric(
        k.METRIC_EVENTS,
        "counter",
        "Kubernetes Events created on CocoonSets, by reason and type.",
        ("namespace", "reason", "type"),
    ),
    Metric(
        k.METRIC_RELEASE_PENDING,
        "counter",
        "Sweep runs that found a suspended release set not yet Suspended and reconciled it.",
        ("namespace", "cocoonset"),
    ),
    Metric(
        k.METRIC_DROPPED,
        "counter",
        "Incoming events acknowledged without a reconcile, by target and reason.",
        ("target", "reason"),
    ),
    Metric(
        k.METRIC_ADMISSION_REFUSED,
        "counter",
        "Writes refused by admission (a plugin or a webhook), counted once per refusal "
        "situation, with the Warning Event that reports it.",
        ("namespace", "cocoonset", "write", "webhook"),
    ),
    Metric(k.METRIC_RETRIES, "counter", "Retries this code decided, by operation.", ("operation",)),
    Metric(
        k.METRIC_WAKE_DURATION,
        "histogram",
        "Seconds from the wake request (wake-started) to the restored VM up (WakeCompleted).",
        ("namespace", "placement"),
    ),
    Metric(
        k.METRIC_SEAT_WAIT,
        "histogram",
        "Seconds a wake waited Unschedulable for a seat before its pod was scheduled.",
        ("namespace",),
    ),
    Metric(
        k.METRIC_RECLAIM_GRACE,
        "histogram",
        "Seconds a wake had waited when an idle seat was reclaimed for it.",
        ("pool",),
    ),
    Metric(k.METRIC_SWEEP_DURATION, "histogram", "Seconds one sweep run took.", ("dry_run",)),
    Metric(
        k.METRIC_SEAT_FREED,
        "histogram",
        "Seconds from vk-cocoon's hibernated report to the main pod's DELETE, where the report "
        "time is known: source=push (the push's bounded wait watched the report land) or "
        "audit (the audit event of the report's write); a release by the sweep, or a push "
        "that found the report already there, is not observed.",
        ("namespace", "source"),
        buckets=SEAT_FREED_BUCKETS,
    ),
)

BY_NAME: Final = {m.name: m for m in CATALOGUE}
