"""Support for the `ingest` functional tests: the target served by the real framework app."""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import functions_framework
import pytest

import functions.ingest as ingest
from shared.config import Settings
from shared.triggers import Trigger
from tests.conftest import REPO_ROOT

TOKEN = "s3cr3t-ingest-token-0123456789"
BASE_ENV = {
    "COCOON_INGEST_TOKEN": TOKEN,
    "COCOON_REGISTRY_BASE": "127.0.0.1:5000/cocoon",
    "COCOON_REGISTRY_INSECURE": "true",
}


@dataclass
class Recorder:
    """Stands in for `functions.runtime.run` (owned by the reconciler work, and it would
    need a cluster): records what ingest hands over, optionally failing with `error`."""

    calls: list[tuple[list[Trigger], str]] = field(default_factory=list)
    error: Exception | None = None

    def __call__(self, triggers: Sequence[Trigger], *, settings: Settings, target: str) -> None:
        self.calls.append((list(triggers), target))
        if self.error is not None:
            raise self.error

    @property
    def triggers(self) -> list[Trigger]:
        return [t for batch, _ in self.calls for t in batch]


@pytest.fixture
def recorder(monkeypatch: pytest.MonkeyPatch) -> Iterator[Recorder]:
    rec = Recorder()
    monkeypatch.setattr(ingest, "dispatch", rec)
    yield rec


@pytest.fixture
def ingest_env(monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, str]]:
    """The environment a deployment sets; tests edit it before the first request."""
    for key in list(os.environ):
        if key.startswith("COCOON_"):
            monkeypatch.delenv(key)
    for key, value in BASE_ENV.items():
        monkeypatch.setenv(key, value)
    ingest.reset_settings()
    yield BASE_ENV
    ingest.reset_settings()


@pytest.fixture
def client(ingest_env: dict[str, str], recorder: Recorder) -> Any:
    app = functions_framework.create_app(target="ingest", source=str(REPO_ROOT / "main.py"))
    return app.test_client()


def auth(token: str = TOKEN) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}
