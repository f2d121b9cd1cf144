"""Every step `decide` can return has exactly one handler in the executor's table."""

from __future__ import annotations

from typing import get_args

from shared.reconcile.executor import _ACTS, _ENDS
from shared.reconcile.steps import Step


def test_each_step_is_acted_on_or_ends_the_run_never_both() -> None:
    assert set(_ACTS) | set(_ENDS) == set(get_args(Step))
    assert not set(_ACTS) & set(_ENDS)
