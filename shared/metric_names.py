"""The one list of metrics this project emits (names, kinds, labels, buckets).

Every metric is a structured log line first (`shared.log.count` / `observe`):
Cloud Run's log-based metrics (terraform/modules/cocoon-hibernation/
monitoring.tf) rebuild them from the lines, and `serve` also feeds
Prometheus from the same calls (`functions/metrics.py`, `GET /metrics`).
tests/deploy holds the Terraform metrics, the Cloud Monitoring dashboard and
the Grafana dashboard (infra/observability/) to this list, so a panel or an
alert can only name a metric that exists. Pure data: importing it costs nothing.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final, Literal

from shared import constants as k

# A seat reclaimed for a waiting wake, by namespace and pool (shared/seats/reclaim_act.py).
METRIC_SEAT_RECLAIMS: Final = "cocoon_hibernation_seat_reclaims_total"
# Events created on CocoonSets, by reason (WakeNoCapacity, WakeTimedOut, WriteRefused, ...).
METRIC_EVENTS: Final = "cocoon_hibernation_events_total"
# A sweep run found a suspended release set not yet Suspended (stuck Suspending counts each run).
METRIC_RELEASE_PENDING: Final = "cocoon_hibernation_release_pending_total"
# An incoming event acknowledged without a reconcile, by target and reason.
METRIC_DROPPED: Final = "cocoon_hibernation_dropped_events_total"
# A write admission refused (quota, PodSecurity, cocoon-webhook), once per refusal situation,
# with the WriteRefused Warning that tells it (shared/refusal.py).
METRIC_ADMISSION_REFUSED: Final = "cocoon_hibernation_admission_refused_total"
# A retry this code decided (a compare-and-swap re-read, a redelivery asked of the platform).
METRIC_RETRIES: Final = "cocoon_hibernation_retries_total"

# Histograms, in seconds.
METRIC_WAKE_DURATION: Final = "cocoon_hibernation_wake_seconds"
METRIC_SEAT_WAIT: Final = "cocoon_hibernation_seat_wait_seconds"
METRIC_RECLAIM_GRACE: Final = "cocoon_hibernation_reclaim_grace_seconds"
METRIC_SWEEP_DURATION: Final = "cocoon_hibernation_sweep_seconds"
METRIC_SEAT_FREED: Final = "cocoon_hibernation_seat_freed_seconds"

# From a seat freed in half a second to a wake waiting an hour.
BUCKETS: Final = (0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0, 600.0, 1800.0, 3600.0)
# A seat freed after vk-cocoon's report: one DELETE away, so tens of milliseconds to seconds
# (a redelivery after a failed invocation: tens of seconds).
SEAT_FREED_BUCKETS: Final = (0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)


@dataclass(frozen=True, slots=True)
class Metric:
    name: str
    kind: Literal["counter", "histogram"]
    help: str
    labels: tuple[str, ...]
    # A histogram's own buckets (seconds); None: the catalogue's BUCKETS.
    own_buckets: tuple[float, ...] | None = None

    @property
    def buckets(self) -> tuple[float, ...]:
        return self.own_buckets if self.own_buckets is not None else BUCKETS


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
        METRIC_SEAT_RECLAIMS,
        "counter",
        "Number of idle reclaimable seats suspended for a wake that found no capacity.",
        ("namespace", "pool"),
    ),
    Metric(
        METRIC_EVENTS,
        "counter",
        "Kubernetes Events created on CocoonSets, by reason and type.",
        ("namespace", "reason", "type"),
    ),
    Metric(
        METRIC_RELEASE_PENDING,
        "counter",
        "Sweep runs that found a suspended release set not yet Suspended and reconciled it.",
        ("namespace", "cocoonset"),
    ),
    Metric(
        METRIC_DROPPED,
        "counter",
        "Incoming events acknowledged without a reconcile, by target and reason.",
        ("target", "reason"),
    ),
    Metric(
        METRIC_ADMISSION_REFUSED,
        "counter",
        "Writes refused by admission (a plugin or a webhook), counted once per refusal "
        "situation, with the Warning Event that reports it.",
        ("namespace", "cocoonset", "write", "webhook"),
    ),
    Metric(
        METRIC_RETRIES,
        "counter",
        "Retries this code decided, by operation.",
        ("operation",),
    ),
    Metric(
        METRIC_WAKE_DURATION,
        "histogram",
        "Seconds from the wake request (wake-started) to the restored VM up (WakeCompleted).",
        ("namespace", "placement"),
    ),
    Metric(
        METRIC_SEAT_WAIT,
        "histogram",
        "Seconds a wake waited Unschedulable for a seat before its pod was scheduled.",
        ("namespace",),
    ),
    Metric(
        METRIC_RECLAIM_GRACE,
        "histogram",
        "Seconds a wake had waited when an idle seat was reclaimed for it.",
        ("pool",),
    ),
    Metric(
        METRIC_SWEEP_DURATION,
        "histogram",
        "Seconds one sweep run took.",
        ("dry_run",),
    ),
    Metric(
        METRIC_SEAT_FREED,
        "histogram",
        "Seconds from vk-cocoon's hibernated report to the main pod's DELETE, where the report "
        "time is known: source=push (the push's bounded wait watched the report land) or "
        "audit (the audit event of the report's write); a release by the sweep, or a push "
        "that found the report already there, is not observed.",
        ("namespace", "source"),
        own_buckets=SEAT_FREED_BUCKETS,
    ),
)

BY_NAME: Final = {m.name: m for m in CATALOGUE}
