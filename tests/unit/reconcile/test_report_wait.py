"""When a push invocation waits for vk-cocoon's report (shared/reconcile/report_wait.py)."""

from __future__ import annotations

from datetime import timedelta

import pytest

from shared.config import Settings
from shared.errors import ConfigError
from shared.reconcile.report_wait import awaiting_report
from tests.fixtures.cocoon_objects import VM0, make_pod, make_set

CS = make_set()  # generation 2


@pytest.mark.parametrize(
    ("pod_kw", "waits"),
    [
        # Asked for this round, vk-cocoon at work (or not even started): wait.
        ({"hibernate": True, "state": "hibernating"}, True),
        ({"hibernate": True, "state": "ready"}, True),
        ({"hibernate": True, "state": None}, True),
        # A report for an earlier round is no report for this one.
        ({"hibernate": True, "state": "hibernated", "generation": 1}, True),
        # Reported, or failed: nothing to wait for.
        ({"hibernate": True, "state": "hibernated", "generation": 2}, False),
        ({"hibernate": True, "state": "failed"}, False),
        # Not asked (or asked for an earlier round): the reconcile asks first, no wait.
        ({"hibernate": False, "state": "ready"}, False),
        ({"hibernate": True, "state": "hibernating", "stamp": 1}, False),
        ({"hibernate": True, "state": "hibernating", "terminating": True}, False),
    ],
)
def test_it_waits_only_while_vk_cocoon_owes_this_rounds_report(
    pod_kw: dict[str, object], waits: bool
) -> None:
    assert awaiting_report(CS, make_pod(**pod_kw), VM0) is waits


def test_another_vms_pod_or_a_gone_pod_is_never_waited_for() -> None:
    pod = make_pod(hibernate=True, state="hibernating")
    assert awaiting_report(CS, pod, "vk-other-vm-0") is False
    assert awaiting_report(CS, None, VM0) is False


def test_the_bound_is_a_setting_with_a_ceiling() -> None:
    assert Settings.from_env({}).report_wait == timedelta(seconds=4)
    assert Settings.from_env({"COCOON_REPORT_WAIT": "750ms"}).report_wait == timedelta(
        milliseconds=750
    )
    assert Settings.from_env({"COCOON_REPORT_WAIT": "off"}).report_wait == timedelta(0)
    with pytest.raises(ConfigError, match="COCOON_REPORT_WAIT"):
        Settings.from_env({"COCOON_REPORT_WAIT": "soon"})
    with pytest.raises(ConfigError, match="over 5m"):
        Settings.from_env({"COCOON_REPORT_WAIT": "10m"})
