"""A CI-sized run of `make bench` (`python -m benchmarks --quick`) proves the harness works.

No timing is asserted (these machines are noisy); what is asserted is that
every benchmark ran, produced its figures, and that the JSON, the markdown
table and the plots were written — so `make bench` on a fresh clone works.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO_ROOT
from tests.fixtures.registry import require_registry_binary

EXPECTED = {
    "kubeapi",
    "reads",
    "coldstart",
    "ingest",
    "release",
    "wake",
    "seatfreed",
    "sweep",
    "reclaim",
    "order",
    "operator",
    "firstevent",
    "workload",
}


@pytest.mark.timeout(900)
def test_quick_bench_writes_json_table_and_plots(tmp_path: Path) -> None:
    require_registry_binary()
    proc = subprocess.run(
        [sys.executable, "-m", "benchmarks", "--quick", "--out", str(tmp_path)],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=880,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    doc = json.loads((tmp_path / "latest.json").read_text())
    assert doc["quick"] is True
    assert doc["machine"]["cores"] >= 1
    results = doc["results"]
    assert set(results) == EXPECTED
    for name, res in results.items():
        assert "error" not in res, f"{name}: {res.get('error')}"
        assert res["figures"], f"{name} produced no figures"
        for fig_name, fig in res["figures"].items():
            assert isinstance(fig["value"], int | float), (name, fig_name)
            assert fig["unit"], (name, fig_name)
    # The counts the contract bounds are counts, not timings: assert them here too.
    heavy = [
        f for n, f in results["coldstart"]["figures"].items() if n.endswith("irrelevant event")
    ]
    assert heavy and all(f["value"] == 0 for f in heavy), heavy
    # Behaviour, not timing: with the gate every freed seat went to the longest waiter.
    assert results["order"]["figures"]["fair_share_gate"]["value"] == 100
    table = (tmp_path / "latest.md").read_text()
    assert "| benchmark | figure | value | unit | note |" in table
    assert (tmp_path / "latency.png").stat().st_size > 0
    assert (tmp_path / "sweep.png").stat().st_size > 0
