"""The project's metrics as Prometheus metrics on `serve`'s `GET /metrics`, under the
operator's counter names so its dashboards work. Fed by `shared.log.count`/`observe` (so the
log line and the sample agree); the Cloud Run functions never import prometheus-client.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from typing import Any

import prometheus_client

from shared import log
from shared.metric_names import BY_NAME, CATALOGUE

# name -> (help, labels)
COUNTERS: dict[str, tuple[str, tuple[str, ...]]] = {
    m.name: (m.help, m.labels) for m in CATALOGUE if m.kind == "counter"
}
HISTOGRAMS: dict[str, tuple[str, tuple[str, ...]]] = {
    m.name: (m.help, m.labels) for m in CATALOGUE if m.kind == "histogram"
}

_lock = threading.Lock()
_counters: dict[str, Any] = {}
_histograms: dict[str, Any] = {}


def _count(metric: str, value: int, labels: Mapping[str, str]) -> None:
    counter = _counters.get(metric)
    if counter is None:
        return  # not in the catalogue: logs only
    names = COUNTERS[metric][1]
    counter.labels(*(labels.get(n, "") for n in names)).inc(value)


def _observe(metric: str, seconds: float, labels: Mapping[str, str]) -> None:
    histogram = _histograms.get(metric)
    if histogram is None:
        return
    names = HISTOGRAMS[metric][1]
    histogram.labels(*(labels.get(n, "") for n in names)).observe(seconds)


def install() -> Any:
    """Register the metrics (once per process) and route counts and samples to them."""
    with _lock:
        if not _counters:
            # The operator's counters have no `_created` series; neither do ours.
            prometheus_client.disable_created_metrics()  # type: ignore[no-untyped-call]  # unannotated upstream
            for name, (help_text, labels) in COUNTERS.items():
                # The client appends `_total` to a counter's name itself.
                _counters[name] = prometheus_client.Counter(
                    name.removesuffix("_total"), help_text, labels
                )
            for name, (help_text, labels) in HISTOGRAMS.items():
                _histograms[name] = prometheus_client.Histogram(
                    name, help_text, labels, buckets=BY_NAME[name].buckets
                )
    log.add_counter_sink(_count)
    log.add_observation_sink(_observe)
    return prometheus_client.REGISTRY
