"""Every conformance test runs on both backends: the embedded API and a real kube-apiserver."""

from __future__ import annotations

import pytest

from tests.fixtures.kube import parametrize_backends


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    parametrize_backends(metafunc)
