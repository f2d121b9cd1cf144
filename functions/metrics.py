"""The operator's slot-release counters as Prometheus metrics, for `serve`.

Dashboards and alerts built for cocoon-operator query these exact names and
labels; `serve` (the self-hosted / Knative mode) exposes them on
`GET /metrics`. The Cloud Run functions never import this module (importing
prometheus-client costs a cold start hundreds of milliseconds on a small
instance): there the same counts are log lines that Terraform's log-based
metrics turn into counters.

Counts arrive through `shared.log.count`, the one place the reconciler counts,
so the log line and the Prometheus sample can never disagree.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from typing import Any

import prometheus_client

from shared import constants as k
from shared import log
from shared.reconcile.refusal import METRIC_ADMISSION_REFUSED
from shared.seats.keys import METRIC_SEAT_RECLAIMS

# name -> (help, labels), as the operator's metrics package defines them.
COUNTERS: dict[str, tuple[str, tuple[str, ...]]] = {
    k.METRIC_PODS_DELETED: (
        "Number of hibernated pods deleted by release-policy suspend to free their "
        "scheduling seat.",
        ("namespace", "cocoonset"),
    ),
    k.METRIC_WAKE: (
        "Number of released-seat wakes that reached a live VM, by placement (hint-node="
        "landed back on the hibernated-on node, pool=rescheduled elsewhere).",
        ("namespace", "cocoonset", "placement"),
    ),
    k.METRIC_WAKE_UNSCHEDULABLE: (
        "Number of released-seat wake pods observed Unschedulable (out of capacity); "
        "counted once per pod and scheduler message.",
        ("namespace", "cocoonset"),
    ),
    # Ours, not the operator's (it has no seat economy): idle seats taken for waiting wakes.
    METRIC_SEAT_RECLAIMS: (
        "Number of idle reclaimable seats suspended for a wake that found no capacity.",
        ("namespace", "pool"),
    ),
    # Ours: a write admission refused (cocoon-webhook's POD_CREATORS, quota, PodSecurity).
    METRIC_ADMISSION_REFUSED: (
        "Number of writes refused by admission (a plugin or a webhook), counted once per "
        "refusal situation, with the Warning Event that reports it.",
        ("namespace", "cocoonset", "write", "webhook"),
    ),
}

_lock = threading.Lock()
_counters: dict[str, Any] = {}


def _sink(metric: str, value: int, labels: Mapping[str, str]) -> None:
    counter = _counters.get(metric)
    if counter is None:
        return  # a count that is not one of the operator's counters: logs only
    names = COUNTERS[metric][1]
    counter.labels(*(labels.get(n, "") for n in names)).inc(value)


def install() -> Any:
    """Register the counters (once per process) and route counts to them; the registry."""
    with _lock:
        if not _counters:
            # The operator's counters have no `_created` series; neither do ours.
            prometheus_client.disable_created_metrics()  # type: ignore[no-untyped-call]  # unannotated upstream
            for name, (help_text, labels) in COUNTERS.items():
                # The client appends `_total` to a counter's name itself.
                _counters[name] = prometheus_client.Counter(
                    name.removesuffix("_total"), help_text, labels
                )
    log.add_counter_sink(_sink)
    return prometheus_client.REGISTRY
