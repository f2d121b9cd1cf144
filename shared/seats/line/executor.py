"""Keeping a pool's line of waiting wakes (decisions in `decide.py`): it moves when a wake
creates a gated pod, a restore pod is bound, a wake completes, and at every sweep. One LIST
of the pool's unbound restore pods per call, a PATCH per pod ungated (idempotent: no record)."""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from shared import constants as k
from shared import log
from shared.config import Settings
from shared.errors import CocoonError, Conflict, Invalid, NotFound
from shared.models import CocoonSet, Pod
from shared.ports import LineReader
from shared.seats.line.decide import (
    KeepGated,
    Waiter,
    advance,
    gate_at_create,
    gate_removal,
    join_line,
    queued_at,
    waiter_of,
)
from shared.seats.reclaim.decide import pool_of

UNBOUND: str = "spec.nodeName="


def read_line(kube: LineReader, settings: Settings, pool: str) -> list[Waiter]:
    out: list[Waiter] = []
    for scope in settings.scopes:
        # From the watch cache: a stale line mostly delays a turn (the next reconcile
        # re-reads), and a quorum read would cost every wake a round trip to etcd.
        for page in kube.list_pods_matching(
            scope, f"{k.LABEL_SEAT_LINE}={pool}", field_selector=UNBOUND, from_cache=True
        ):
            out.extend(w for p in page if (w := waiter_of(p)) is not None)
    return out


def prepare_restore_pod(
    kube: LineReader, settings: Settings, cs: CocoonSet, body: dict[str, Any], *, now: datetime
) -> dict[str, Any]:
    """`cs`'s restore pod with its place in the line, gated when an older waiter is stuck.
    Fairness is worth a LIST, not a failed wake: an unreadable line leaves it ungated."""
    pool = pool_of(cs)
    place = queued_at(cs.metadata.annotations.get(k.ANN_WAKE_STARTED), now=now)
    try:
        line = read_line(kube, settings, pool)
    except CocoonError as err:
        log.warning("seat line unreadable: restore pod created ungated", pool=pool, error=str(err))
        line = []
    mine = join_line(copy.deepcopy(body), pool=pool, queued_at=place, gate=False)
    me = waiter_of(Pod.model_validate(mine))
    behind = None if me is None else gate_at_create(me, line)
    if behind is not None:
        log.info(
            "seat line: restore pod created gated",
            pool=pool,
            pod=f"{body['metadata'].get('namespace')}/{body['metadata'].get('name')}",
            behind=behind.key,
            behind_state=behind.state.value,
        )
    return join_line(body, pool=pool, queued_at=place, gate=behind is not None)


@dataclass(slots=True)
class Advanced:
    ungated: list[str] = field(default_factory=list)
    kept: dict[str, str] = field(default_factory=dict)  # gated pod -> who it waits behind
    failed: dict[str, CocoonError] = field(default_factory=dict)  # its turn, the PATCH failed


def advance_line(kube: LineReader, settings: Settings, pool: str, *, now: datetime) -> Advanced:
    """Ungate, oldest first, every gated pod of `pool`'s line nobody stuck is ahead of.
    Raises CocoonError from the LIST only; a PATCH that fails is recorded in `failed`."""
    result = Advanced()
    for step in advance(read_line(kube, settings, pool), now=now):
        w = step.waiter
        if isinstance(step, KeepGated):
            result.kept[w.key] = step.behind.key
            continue
        try:
            kube.patch_pod(w.namespace, w.name, gate_removal(w.uid, w.gates, now=now))
        except (NotFound, Conflict, Invalid) as err:
            log.info("seat line: ungate skipped", pod=w.key, error=str(err))
        except CocoonError as err:
            # One pod's failure must not hold up the line; its own set's reconcile retries.
            log.warning("seat line: ungate failed", pod=w.key, error=str(err))
            result.failed[w.key] = err
        else:
            result.ungated.append(w.key)
            log.info("seat line: ungated", pool=pool, pod=w.key, waited_since=w.since.isoformat())
    return result
