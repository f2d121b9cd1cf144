"""The seat economy's part of a wake, for the reconciler's executor: the restore pod's place
in its pool's line, ungating whoever's turn it is, and reclaiming an idle seat."""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from shared import constants as k
from shared import log
from shared.config import Settings
from shared.durations import parse_rfc3339
from shared.errors import CocoonError, Conflict, Invalid, NotFound, TransientError
from shared.lifecycle import LifecyclePublisher
from shared.models import CocoonSet, Pod
from shared.names import SetRef
from shared.ports import KubeApi
from shared.seats.line.decide import gate_removal, join_line
from shared.seats.line.executor import Advanced, advance_line, prepare_restore_pod
from shared.seats.reclaim.decide import pool_of
from shared.seats.reclaim.executor import StartRelease, reclaim_for


def leave_gate(kube: KubeApi, main: Pod | None, pod_name: str, *, now: datetime) -> str:
    """Remove our gate from a pod with no line to wait in (the order is off, or it lost its
    line label), or nobody would; the reason the wake still waits."""
    if main is not None and k.GATE_SEAT_ORDER in main.scheduling_gates:
        ns = main.metadata.namespace or ""
        patch = gate_removal(main.metadata.uid or "", main.scheduling_gates, now=now)
        with contextlib.suppress(NotFound, Conflict, Invalid):
            kube.patch_pod(ns, main.name, patch)
            log.info("seat line: gate removed outside a line", pod=f"{ns}/{main.name}")
    return f"{pod_name}: not in a seat line: ungated"


@dataclass(frozen=True, slots=True)
class WakeSeats:
    kube: KubeApi
    settings: Settings
    now: datetime
    publisher: LifecyclePublisher | None

    def restore_pod(self, cs: CocoonSet, body: dict[str, Any]) -> dict[str, Any]:
        """The restore pod with its place in its pool's line, gated if an older waiter is stuck."""
        if not self.settings.seat_order:
            return body
        return prepare_restore_pod(self.kube, self.settings, cs, body, now=self.now)

    def adopt(
        self, ref: SetRef, cs: CocoonSet, *, pod_name: str, pod_uid: str, since: str | None
    ) -> tuple[CocoonSet, Pod]:
        """cocoon-operator's restore pod joins its pool's line; the set and pod as written."""
        started = cs.metadata.annotations.get(k.ANN_WAKE_STARTED) or since
        if k.ANN_WAKE_STARTED not in cs.metadata.annotations and since:
            # The operator persists `Waking` as it creates the pod: its creation starts the wake.
            cs = self.kube.patch_set(
                ref, {"metadata": {"annotations": {k.ANN_WAKE_STARTED: since}}}
            )
        place = parse_rfc3339(started) if started else self.now
        # No gate (one cannot be added after creation): it waits ungated, but in the line.
        patch = {"metadata": {"uid": pod_uid}}
        join_line(patch, pool=pool_of(cs), queued_at=place, gate=False)
        pod = self.kube.patch_pod(ref.namespace, pod_name, patch)
        log.info("the operator's restore pod joined the seat line", set=str(ref), pod=pod.name)
        return cs, pod

    def tend(
        self, ref: SetRef, main: Pod | None, why: str, *, strict: bool = False
    ) -> Advanced | None:
        """Ungate whoever's turn it is in the main pod's pool; None when there is no line.
        A failure is logged (the next reconcile or sweep re-reads), or raised if `strict`."""
        if not self.settings.seat_order or main is None or k.LABEL_SEAT_LINE not in main.labels:
            return None
        pool = main.labels[k.LABEL_SEAT_LINE]
        try:
            res = advance_line(self.kube, self.settings, pool, now=self.now)
        except CocoonError as e:
            if strict:
                raise
            log.warning("seat line not tended", set=str(ref), why=why, error=str(e))
            return None
        if res.ungated:
            log.info("seat line tended", set=str(ref), why=why, ungated=res.ungated)
        return res

    def wait_in_line(
        self, ref: SetRef, main: Pod | None, pod_name: str, reclaim: Callable[[], str]
    ) -> str:
        """A gated restore pod's turn: the reason the wake still waits (TransientError
        when its turn came and the gate could not be removed)."""
        key = f"{ref.namespace}/{pod_name}"
        # Strict: a gated pod whose line cannot be read is retried, not left to the sweep.
        if (res := self.tend(ref, main, "gated", strict=True)) is None:
            return leave_gate(self.kube, main, pod_name, now=self.now)
        if key in res.ungated:
            return f"{pod_name}: its turn in the seat line: ungated"
        if isinstance(res.failed.get(key), TransientError):
            # Its turn, and the gate is still on: redelivery is sooner than the sweep.
            raise TransientError(f"{ref}: removing the seat gate failed: {res.failed[key]}")
        behind = res.kept.get(key, "an older wake")
        # A gated pod waits for a seat as surely as an unschedulable one: it may reclaim.
        return f"{pod_name} is in line for a seat behind {behind}" + reclaim()

    def reclaim(self, ref: SetRef, cs: CocoonSet, pod_uid: str, start_release: StartRelease) -> str:
        """Try to take an idle seat for this waiting wake; a note for the log."""
        if self.settings.seat_reclaim_grace is None:
            return ""
        try:
            res = reclaim_for(
                cs,
                pod_uid,
                kube=self.kube,
                settings=self.settings,
                now=self.now,
                publisher=self.publisher,
                start_release=start_release,
            )
        except CocoonError as e:
            # The wait is durable (phase Waking): the next event or sweep tries again.
            log.warning("seat reclaim failed", set=str(ref), error=str(e))
            return "; seat reclaim failed"
        log.info("seat reclaim", set=str(ref), action=res.action, detail=res.detail)
        return f"; seat reclaim: {res.action} ({res.detail})"
