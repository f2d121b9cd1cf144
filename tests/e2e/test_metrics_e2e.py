"""`serve`'s `GET /metrics` after a real release, a real wake and a sweep tick.

The CloudEvents go through functions-framework to the real reconciler against
the Kubernetes API (both backends) and a real Distribution registry; the
metrics are read back the way Prometheus reads them, from `serve`'s router.
What a dashboard plots must be there: the Events by reason, the wake's
duration histogram, the sweep's duration histogram.
"""

from __future__ import annotations

import uuid
from typing import Any

import prometheus_client
import pytest
from cloudevents.http import CloudEvent, to_binary
from prometheus_client.parser import text_string_to_metric_families

from functions.metrics import install
from functions.serve import create_app
from shared import constants as k
from shared.constants import (
    METRIC_ADMISSION_REFUSED,
    METRIC_EVENTS,
    METRIC_SWEEP_DURATION,
    METRIC_WAKE_DURATION,
)
from shared.metric_names import CATALOGUE
from tests.conftest import REPO_ROOT
from tests.e2e.test_real_cluster import (  # the real-cluster fixtures, reused by name
    _changed,
    _full_quota,
    _hibernated,
    _kubelet_finalizes,
    _pushed,
    _wake,
    as_target,
    real,
    rworld,
)
from tests.e2e.test_release_e2e import hibernated_main, metric_lines, pushed_event, suspended_set
from tests.e2e.test_wake_e2e import changed_event, report_live, wake_event
from tests.fixtures.cocoon_objects import NS, SET, VM0
from tests.fixtures.ingest import serve_doors, signed
from tests.fixtures.reconcile_world import World

pytestmark = pytest.mark.e2e

__all__ = ["as_target", "real", "rworld"]  # fixtures, found by pytest through these names


def _post(client: Any, path: str, event: CloudEvent) -> int:
    headers, body = to_binary(event)
    if path != "/":  # serve's routes want their door's credential; a per-target function
        headers = signed(headers, event["type"])  # is behind the platform's
    return int(client.post(path, headers=headers, data=body).status_code)


def _samples(client: Any) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    response = client.get("/metrics")
    assert response.status_code == 200
    out: dict[tuple[str, tuple[tuple[str, str], ...]], float] = {}
    for family in text_string_to_metric_families(response.get_data(as_text=True)):
        for s in family.samples:
            out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out


def _value(samples: dict[Any, float], name: str, **labels: str) -> float:
    return sum(
        v for (n, ls), v in samples.items() if n == name and labels.items() <= dict(ls).items()
    )


def test_metrics_show_the_release_the_wake_and_the_sweep(
    world: World, function_app: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    serve_doors(monkeypatch)
    install()
    client = create_app(REPO_ROOT / "main.py").test_client()
    before = _samples(client)

    # A release: the snapshot is verified, the pod deleted, SeatReleased.
    cs = suspended_set(world, agents_status=None)
    hibernated_main(world, cs, node="node-7")
    world.push_snapshot(VM0)
    assert _post(client, "/release", pushed_event(world)) == 200
    # The kubelet's part of the deletion (a real control plane runs none): gone.
    for pod in world.pods(NS, SET):
        world.core.delete_namespaced_pod(pod.metadata.name, NS, grace_period_seconds=0)
    # Then the wake of that released set, back on its node.
    assert _post(client, "/wake", wake_event()) == 200
    report_live(world, node="node-7")
    assert _post(client, "/wake", changed_event()) == 200
    # A sweep tick.
    tick = CloudEvent(
        {"type": k.CE_SWEEP_REQUESTED, "source": "//tests", "id": uuid.uuid4().hex},
        {"dryRun": True},
    )
    assert _post(client, "/sweep", tick) == 200

    after = _samples(client)

    def delta(name: str, **labels: str) -> float:
        return _value(after, name, **labels) - _value(before, name, **labels)

    assert delta(METRIC_EVENTS, reason=k.REASON_SEAT_RELEASED, namespace=NS) == 1
    assert delta(METRIC_EVENTS, reason=k.REASON_WAKE_COMPLETED, namespace=NS) == 1
    assert delta(k.METRIC_WAKE, placement=k.PLACEMENT_HINT_NODE) == 1
    # The histograms: one wake observed (request -> VM up), one sweep run.
    assert delta(f"{METRIC_WAKE_DURATION}_count", namespace=NS) == 1
    assert delta(f"{METRIC_WAKE_DURATION}_bucket", namespace=NS, le="+Inf") == 1
    assert delta(f"{METRIC_SWEEP_DURATION}_count", dry_run="true") == 1
    # Every histogram of the catalogue is exposed with its buckets, observed or not.
    text = prometheus_client.generate_latest().decode()
    for m in CATALOGUE:
        kind = "histogram" if m.kind == "histogram" else "counter"
        assert f"# TYPE {m.name} {kind}" in text, m.name


# --- admission refusals, on the real kube-apiserver (its admission plugins) ----------------


def test_an_admission_refusal_is_counted_once_per_situation(
    rworld: World, as_target: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    """A redelivery meets the same refusal: one WriteRefused Warning and one count, not two."""
    _hibernated(rworld)
    assert _post(as_target("release"), "/", _pushed(rworld)) == 200
    _kubelet_finalizes(rworld)
    _full_quota(rworld)
    capsys.readouterr()
    assert _post(as_target("wake"), "/", _wake()) == 200
    assert _post(as_target("wake"), "/", _changed()) == 200
    counted = metric_lines(capsys.readouterr().out, METRIC_ADMISSION_REFUSED)
    assert [c["labels"] for c in counted] == [
        {"namespace": NS, "cocoonset": SET, "write": "CreateMain", "webhook": ""}
    ]
