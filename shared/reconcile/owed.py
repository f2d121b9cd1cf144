"""Durable "once" effects: which report is owed, and the identity that names it.

A report (a Kubernetes Event, its counter, its lifecycle CloudEvent) must
survive a crash at any point, so it is never emitted from an invocation's
memory. The write that makes the effect real also records, in the same write
or before it, durable evidence that its report is owed; the report is a step
of the reconcile, idempotent by name (AlreadyExists = done), and the evidence
is cleared only after the Event exists and the lifecycle event is published.
Redelivery or the sweep finds the evidence and emits what is owed.

- Release round: the stash (one write, before the first delete) stamps
  `release-round` = the set's generation and `release-round-pods` = the pods
  it sets out to delete. Once those pods are gone (phase `Suspended`, or a wake
  has created its own main), round != `release-reported` means SeatReleased
  is owed. Identity: `<set uid>:g<round>`.
- Wake: the compare-and-swap that clears the hint also writes
  `wake-report-owed` = `<placement>:<restored main pod uid>:<hint>`; it is
  removed once WakeCompleted exists. Identity: `<set uid>:<pod uid>`.

Pure: no I/O, no clock.
"""

from __future__ import annotations

from collections.abc import Iterable

from shared import constants as k
from shared.models import CocoonSet
from shared.reconcile.steps import ReportReleased, ReportWoken


def _split(value: str) -> tuple[str, ...]:
    return tuple(sorted({p.strip() for p in value.split(",") if p.strip()}))


def round_of(cs: CocoonSet) -> str:
    """The round a release stash would stamp now: the set's generation (one per suspend)."""
    return str(cs.generation)


def stamped_round(cs: CocoonSet) -> tuple[str, tuple[str, ...]]:
    ann = cs.metadata.annotations
    return ann.get(k.ANN_RELEASE_ROUND, ""), _split(ann.get(k.ANN_RELEASE_ROUND_PODS, ""))


def round_to_stamp(cs: CocoonSet, deleting: Iterable[str]) -> tuple[str, str] | None:
    """(round, pods) the stash must write before deleting `deleting`, or None when stamped.

    A new round records only its own pods; within a round the record is a
    union, so a pod that appears mid-round is counted too.
    """
    want = round_of(cs)
    have_round, have_pods = stamped_round(cs)
    base = set(have_pods) if have_round == want else set()
    pods = tuple(sorted(base | {n for n in deleting if n}))
    if have_round == want and pods == have_pods:
        return None
    return want, ",".join(pods)


def release_owed(cs: CocoonSet) -> ReportReleased | None:
    """The stamped round's SeatReleased, unless already reported.

    Only meaningful once the round's pods are gone: callers ask at the points
    where the seat is known to be free (the release settled `Suspended`, or a
    wake is restoring).
    """
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
