"""The two dashboards, generated from the one metric list (`shared.metric_names`).
Grafana's (on `serve`'s `/metrics`) and Cloud Monitoring's (on the module's log-based metrics).
`python -m cocoon_hibernation.dashboards` rewrites them; with --check it exits 1 if one is stale."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from shared.metric_names import CATALOGUE, Metric

REPO = Path(__file__).resolve().parent.parent
GRAFANA = REPO / "infra" / "observability" / "grafana-dashboard.json"
CLOUD = REPO / "terraform" / "modules" / "cocoon-hibernation" / "dashboard.json.tftpl"

# The label a panel splits by: the one a person reads first.
_SPLIT = "reason placement target operation step source pool namespace dry_run"


def _split(metric: Metric) -> str:
    return next(label for label in _SPLIT.split() if label in metric.labels)


def grafana() -> dict[str, Any]:
    panels: list[dict[str, Any]] = []
    for i, m in enumerate(CATALOGUE):
        by = _split(m)
        if m.kind == "counter":
            unit, queries = "ops", [("A", f"sum by ({by}) (rate({m.name}[5m]))", f"{{{{{by}}}}}")]
        else:
            unit = "s"
            quantile = "histogram_quantile({}, sum by (le) (rate(" + m.name + "_bucket[5m])))"
            queries = [
                (ref, quantile.format(q), f"p{int(q * 100)}")
                for ref, q in (("A", 0.5), ("B", 0.95))
            ]
        panels.append(
            {
                "id": i + 1,
                "type": "timeseries",
                "title": m.name,
                "description": m.help,
                "datasource": {"type": "prometheus", "uid": "${datasource}"},
                "gridPos": {"h": 8, "w": 12, "x": (i % 2) * 12, "y": (i // 2) * 8},
                "fieldConfig": {"defaults": {"unit": unit}, "overrides": []},
                "targets": [{"refId": r, "expr": e, "legendFormat": f} for r, e, f in queries],
            }
        )
    source = {
        "name": "datasource",
        "type": "datasource",
        "query": "prometheus",
        "label": "Prometheus",
    }
    return {
        "title": "cocoon-hibernation",
        "uid": "cocoon-hibernation",
        "schemaVersion": 39,
        "editable": True,
        "time": {"from": "now-6h", "to": "now"},
        "templating": {"list": [source]},
        "panels": panels,
    }


def _data_set(
    metric_filter: str, legend: str, aligner: str, reducer: str, by: str | None = None
) -> dict[str, Any]:
    aggregation: dict[str, Any] = {
        "alignmentPeriod": "60s",
        "perSeriesAligner": aligner,
        "crossSeriesReducer": reducer,
    }
    if by is not None:
        aggregation["groupByFields"] = [by]
    query = {"timeSeriesFilter": {"filter": metric_filter, "aggregation": aggregation}}
    return {"plotType": "LINE", "legendTemplate": legend, "timeSeriesQuery": query}


def cloud_monitoring() -> dict[str, Any]:
    tiles: list[dict[str, Any]] = []
    for i, m in enumerate(CATALOGUE):
        metric_filter = (
            f'metric.type="logging.googleapis.com/user/${{prefix}}_{m.name}" '
            'resource.type="cloud_run_revision"'
        )
        if m.kind == "counter":
            # `$${` is a literal `${` once templatefile has run.
            legend, by = f"$${{metric.labels.{_split(m)}}}", f"metric.label.{_split(m)}"
            data_sets = [_data_set(metric_filter, legend, "ALIGN_RATE", "REDUCE_SUM", by)]
        else:
            data_sets = [
                _data_set(metric_filter, f"p{p}", "ALIGN_DELTA", f"REDUCE_PERCENTILE_{p}")
                for p in (50, 95)
            ]
        tiles.append(
            {
                "xPos": (i % 2) * 6,
                "yPos": (i // 2) * 4,
                "width": 6,
                "height": 4,
                "widget": {"title": m.name, "xyChart": {"dataSets": data_sets}},
            }
        )
    return {
        "displayName": "cocoon-hibernation (${prefix})",
        "mosaicLayout": {"columns": 12, "tiles": tiles},
    }


def render() -> dict[Path, str]:
    return {
        GRAFANA: json.dumps(grafana(), indent=2) + "\n",
        CLOUD: json.dumps(cloud_monitoring(), indent=2) + "\n",
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="fail if a file is stale")
    args = parser.parse_args(argv)
    texts = render()
    stale = [p for p, text in texts.items() if not p.exists() or p.read_text("utf-8") != text]
    for path in stale:
        if args.check:
            print(f"stale: {path.relative_to(REPO)} (run python -m cocoon_hibernation.dashboards)")
        else:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(texts[path], encoding="utf-8")
            print(f"wrote {path.relative_to(REPO)}")
    return 1 if stale and args.check else 0


if __name__ == "__main__":
    sys.exit(main())
