"""The e2e suite runs on both backends: the embedded API and a real kube-apiserver.

Tests that read the emulator's request log or inject faults through it are marked
`embedded_only` (a real server has neither hook)."""

from __future__ import annotations

import pytest

from tests.fixtures.kube import parametrize_backends


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    parametrize_backends(metafunc)
