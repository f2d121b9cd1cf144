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

_lock = threading.Lock()
_metrics: dict[str, Any] = {}  # name -> the registered Counter or Histogram


def _child(metric: str, kind: str, labels: Mapping[str, str]) -> Any:
    spec = BY_NAME.get(metric)
    if spec is None or spec.kind != kind or metric not in _metrics:
        return None  # not in the catalogue: logs only
    return _metrics[metric].labels(*(labels.get(n, "") for n in spec.labels))


def _count(metric: str, value: int, labels: Mapping[str, str]) -> None:
    if (child := _child(metric, "counter", labels)) is not None:
        child.inc(value)


def _observe(metric: str, seconds: float, labels: Mapping[str, str]) -> None:
    if (child := _child(metric, "histogram", labels)) is not None:
        child.observe(seconds)


def install() -> Any:
    """Register the metrics (once per process) and route counts and samples to them."""
    with _lock:
        if not _metrics:
            # The operator's counters have no `_created` series; neither do ours.
            prometheus_client.disable_created_metrics()  # type: ignore[no-untyped-call]  # unannotated upstream
            for m in sorted(CATALOGUE, key=lambda m: m.kind != "counter"):  # counters first
                if m.kind == "counter":
                    # The client appends `_total` to a counter's name itself.
                    _metrics[m.name] = prometheus_client.Counter(
                        m.name.removesuffix("_total"), m.help, m.labels
                    )
                else:
                    _metrics[m.name] = prometheus_client.Histogram(
                        m.name, m.help, m.labels, buckets=m.buckets
                    )
    log.add_sinks(_count, _observe)
    return prometheus_client.REGISTRY
