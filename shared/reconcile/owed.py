"""Reports that survive a crash: the write that makes an effect real records that its report
is owed, the report is named by the occurrence (AlreadyExists = done), and the record is
cleared only after it went out (release: `release-round` != `release-reported`). Pure.
"""

from __future__ import annotations

from collections.abc import Iterable

from shared import constants as k
from shared.models import CocoonSet
from shared.reconcile.steps import ReportReleased, ReportWoken


def stamped_round(cs: CocoonSet) -> tuple[str, tuple[str, ...]]:
    ann = cs.metadata.annotations
    pods = {p.strip() for p in ann.get(k.ANN_RELEASE_ROUND_PODS, "").split(",")} - {""}
    return ann.get(k.ANN_RELEASE_ROUND, ""), tuple(sorted(pods))


def round_to_stamp(cs: CocoonSet, deleting: Iterable[str]) -> tuple[str, str] | None:
    """(round, pods) the stash must write before deleting `deleting`, or None when stamped.
    Within a round the record is a union, so a pod that appears mid-round is counted too."""
    want = str(cs.generation)  # one round per suspend
    have_round, have_pods = stamped_round(cs)
    base = set(have_pods) if have_round == want else set()
    pods = tuple(sorted(base | {n for n in deleting if n}))
    if have_round == want and pods == have_pods:
        return None
    return want, ",".join(pods)


def release_owed(cs: CocoonSet) -> ReportReleased | None:
    """The stamped round's SeatReleased, unless already reported; asked only where the seat
    is known to be free (the release settled, or a wake is restoring)."""
    rnd, pods = stamped_round(cs)
    if not rnd or cs.metadata.annotations.get(k.ANN_RELEASE_REPORTED) == rnd:
        return None
    return ReportReleased(round=rnd, pods=pods)


def wake_owed_value(placement: str, pod_uid: str, hint: str) -> str:
    return f"{placement}:{pod_uid}:{hint}"


def wake_owed(cs: CocoonSet) -> ReportWoken | None:
    raw = cs.metadata.annotations.get(k.ANN_WAKE_REPORT_OWED)
    if not raw:
        return None
    placement, _, rest = raw.partition(":")
    pod_uid, _, hint = rest.partition(":")
    # A hand-edited value still names one occurrence (its raw text), so the
    # report stays idempotent rather than lost.
    return ReportWoken(placement=placement or "unknown", pod_uid=pod_uid or raw, hint=hint)


def release_identity(cs: CocoonSet, rnd: str) -> str:
    return f"{cs.metadata.uid or cs.name}:g{rnd}"


def wake_identity(cs: CocoonSet, pod_uid: str) -> str:
    return f"{cs.metadata.uid or cs.name}:{pod_uid}"
