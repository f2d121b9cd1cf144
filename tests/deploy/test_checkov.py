"""checkov over terraform/ and infra/: zero failed checks, skips justified in place.

checkov has a very large dependency tree, so it is not in the project's lock:
it runs as an isolated uv tool, pinned, installed once per machine into uv's
cache (the first run takes a minute, later ones seconds). Where it cannot be
installed (no index reachable), the tests skip and say so.
"""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import REPO_ROOT
from tests.fixtures.tools import require_tool

# 3.2.x is the line that still supports Python 3.11; pinned for reproducible results.
CHECKOV = "checkov==3.2.533"
_CMD = ["uv", "tool", "run", "--python", "3.11", "--from", CHECKOV, "checkov"]


@pytest.fixture(scope="session")
def checkov() -> list[str]:
    require_tool("uv")  # checkov runs as an isolated uv tool
    try:
        done = subprocess.run(
            [*_CMD, "--version"],
            check=False,
            capture_output=True,
            text=True,
            timeout=900,
            cwd=REPO_ROOT,
        )
    except subprocess.TimeoutExpired:
        pytest.skip(f"installing {CHECKOV} timed out")
    if done.returncode != 0:
        pytest.skip(f"{CHECKOV} could not be installed: {done.stderr.strip()[-500:]}")
    return _CMD


@pytest.fixture(scope="session")
def reports(checkov: list[str]) -> dict[str, dict[str, Any]]:
    """One checkov run over both trees (its start-up dominates), by check type."""
    done = subprocess.run(
        [
            *checkov,
            *("-d", "terraform", "-d", "infra"),
            *("--framework", "terraform", "kubernetes"),
            *("--compact", "--quiet", "-o", "json"),
        ],
        check=False,
        capture_output=True,
        text=True,
        timeout=600,
        cwd=REPO_ROOT,
    )
    # Exit 1 = failed checks (asserted below); anything else is checkov failing.
    assert done.returncode in (0, 1), done.stderr[-2000:]
    # With several -d, checkov prints several JSON documents back to back (a
    # report per directory, then a list of them): decode them all, merge by type.
    decoder = json.JSONDecoder()
    text, pos, found = done.stdout, 0, []
    while pos < len(text):
        if text[pos].isspace():
            pos += 1
            continue
        doc, pos = decoder.raw_decode(text, pos)
        found.extend(doc if isinstance(doc, list) else [doc])
    merged: dict[str, dict[str, Any]] = {}
    for r in found:
        if not (isinstance(r, dict) and "summary" in r):
            continue
        into = merged.setdefault(
            r["check_type"], {"failed": {}, "resource_count": 0, "parsing_errors": 0}
        )
        for f in r["results"].get("failed_checks", []):
            into["failed"][(f["check_id"], f["resource"], f["file_path"])] = f["check_name"]
        into["resource_count"] = max(into["resource_count"], r["summary"]["resource_count"])
        into["parsing_errors"] += r["summary"]["parsing_errors"]
    return merged


@pytest.mark.parametrize(
    ("check_type", "min_resources"),
    [("terraform", 40), ("kubernetes", 10)],
)
def test_checkov_reports_no_failed_check(
    reports: dict[str, dict[str, Any]], check_type: str, min_resources: int
) -> None:
    assert check_type in reports, f"checkov scanned no {check_type} files"
    report = reports[check_type]
    assert report["parsing_errors"] == 0
    # A scan that saw nothing would pass vacuously.
    assert report["resource_count"] >= min_resources
    failed = [
        f"{cid} {res} ({path}): {name}" for (cid, res, path), name in report["failed"].items()
    ]
    assert failed == []


def test_every_checkov_skip_says_why() -> None:
    skip = re.compile(r"#\s*checkov:skip=([A-Z0-9_]+)(?::(.*))?")
    seen = 0
    for path in [
        *Path(REPO_ROOT, "terraform").rglob("*.tf"),
        *Path(REPO_ROOT, "infra").rglob("*.yaml"),
    ]:
        for line in path.read_text(encoding="utf-8").splitlines():
            match = skip.search(line)
            if match:
                seen += 1
                reason = (match.group(2) or "").strip()
                assert len(reason) >= 20, f"{path}: skip of {match.group(1)} needs a reason"
    assert seen > 0  # the module does skip a few checks; each must carry its reason
