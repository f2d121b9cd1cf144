"""Shared test configuration: where the upstream reference material (the real CRD) is.

`../shared/reference` (beside the repository) holds the real CocoonSet CRD and
the specs. A user's clone does not have it; tests that need it skip with a
visible reason instead of failing.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parent.parent

# Fixtures shared across test tiers live in tests/fixtures/<name>.py (the embedded
# Kubernetes API, a real Distribution registry, ...); every module there is a plugin.
# `tools` first: the others import it, and pytest rewrites asserts only in a
# plugin it imports itself.
pytest_plugins = [
    "tests.fixtures.tools",
    *sorted(
        f"tests.fixtures.{p.stem}"
        for p in (Path(__file__).parent / "fixtures").glob("*.py")
        if p.stem not in {"__init__", "tools"}
    ),
]


def _find_reference() -> Path | None:
    env = os.environ.get("COCOON_REFERENCE_DIR")
    if env:
        return Path(env) if Path(env).is_dir() else None
    for parent in REPO_ROOT.parents:
        candidate = parent / "shared" / "reference"
        if (candidate / "crds").is_dir():
            return candidate
    return None


REFERENCE_DIR: Path | None = _find_reference()

needs_reference = pytest.mark.skipif(
    REFERENCE_DIR is None,
    reason="../shared/reference (the upstream reference CRD) is not beside this clone",
)


@pytest.fixture(autouse=True)
def _restore_log_output() -> Iterator[None]:
    """Each test starts with JSON logs on stdout, whatever an earlier test (or CLI) chose."""
    from shared import log
    from shared.config import LogFormat

    log.configure(LogFormat.JSON, None)
    yield
    log.configure(LogFormat.JSON, None)
