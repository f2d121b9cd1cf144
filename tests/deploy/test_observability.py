"""One metric list (`shared.metric_names`) behind every place a metric is named.

The Terraform log-based metrics, the Cloud Monitoring dashboard, the Grafana
dashboard, the alerts and docs/observability.md must name only metrics the
code emits, with the labels it logs; `serve`'s /metrics exposes the same list
(tests/e2e/test_metrics_e2e.py shows it after a real release and wake).
"""

from __future__ import annotations

import json
import re
from typing import Any

import pytest

from cocoon_hibernation import dashboards
from shared.metric_names import BUCKETS, BY_NAME, CATALOGUE
from tests.conftest import REPO_ROOT
from tests.deploy._hcl import MODULE_DIR, TfDir, blocks, load_dir

COUNTERS = {m.name: m for m in CATALOGUE if m.kind == "counter"}
HISTOGRAMS = {m.name: m for m in CATALOGUE if m.kind == "histogram"}


@pytest.fixture(scope="module")
def module() -> TfDir:
    return load_dir(MODULE_DIR)


def test_terraform_log_metrics_are_the_catalogue(module: TfDir) -> None:
    counters: dict[str, Any] = module.locals["log_metrics"]
    distributions: dict[str, Any] = module.locals["log_distributions"]
    assert set(counters) == set(COUNTERS)
    assert set(distributions) == set(HISTOGRAMS)
    for name, spec in {**counters, **distributions}.items():
        assert tuple(spec["labels"]) == BY_NAME[name].labels, name
    assert [float(b) for b in module.locals["histogram_buckets"]] == list(BUCKETS)
    # A histogram with its own buckets has them in Terraform too; the others use the common list.
    own: dict[str, Any] = module.locals["distribution_buckets"]
    assert set(own) == {n for n, m in HISTOGRAMS.items() if m.buckets != BUCKETS}
    for name, bounds in own.items():
        assert [float(b) for b in bounds] == list(BY_NAME[name].buckets), name


def test_distributions_extract_the_logged_seconds(module: TfDir) -> None:
    metric = module.resource("google_logging_metric", "distribution")
    assert metric["for_each"] == "${local.log_distributions}"
    assert metric["value_extractor"] == "EXTRACT(jsonPayload.value)"
    descriptor = blocks(metric, "metric_descriptor")[0]
    assert (descriptor["value_type"], descriptor["unit"]) == ("DISTRIBUTION", "s")
    bounds = blocks(blocks(metric, "bucket_options")[0], "explicit_buckets")[0]["bounds"]
    assert bounds == "${lookup(local.distribution_buckets, each.key, local.histogram_buckets)}"


def test_the_committed_dashboards_are_generated_from_the_catalogue() -> None:
    assert dashboards.main(["--check"]) == 0, "run: uv run python -m cocoon_hibernation.dashboards"


def test_grafana_queries_only_metrics_that_exist() -> None:
    board = json.loads(dashboards.GRAFANA.read_text(encoding="utf-8"))
    exprs = [t["expr"] for p in board["panels"] for t in p["targets"]]
    named = set()
    for expr in exprs:
        for name in re.findall(r"\b(cocoon_[a-z_]+)\b", expr):
            base = name.removesuffix("_bucket")
            named.add(base)
            if name.endswith("_bucket"):
                assert base in HISTOGRAMS, name
            else:
                assert name in COUNTERS, name
    assert named == set(BY_NAME), "one panel per metric, none missing"


def test_cloud_monitoring_dashboard_queries_only_metrics_that_exist(module: TfDir) -> None:
    text = dashboards.CLOUD.read_text(encoding="utf-8")
    named = set(re.findall(r"logging\.googleapis\.com/user/\$\{prefix\}_([a-z_]+)", text))
    assert named == set(BY_NAME)
    board = module.resource("google_monitoring_dashboard", "overview")
    assert "dashboard.json.tftpl" in board["dashboard_json"]
    assert "var.name_prefix" in board["dashboard_json"]
    # No `${` other than the template's own variable survives into the JSON.
    assert set(re.findall(r"(?<!\$)\$\{([^}]*)\}", text)) == {"prefix"}


def test_alerts_read_only_metrics_that_exist(module: TfDir) -> None:
    for name, alert in module.locals["alerts"].items():
        for metric in re.findall(r"\$\{local\.user_metric\}([a-z_]+)", alert["filter"]):
            assert metric in COUNTERS, (name, metric)


def test_every_metric_is_documented() -> None:
    doc = (REPO_ROOT / "docs" / "observability.md").read_text(encoding="utf-8")
    for m in CATALOGUE:
        assert f"`{m.name}`" in doc, m.name
