"""The few trigger shapes every event source is reduced to (envelope -> trigger). Triggers are
hints (the functions re-read live state), carrying only what finds the sets. `event_id`, the
producer's id, is for logs only: out of equality, so redeliveries compare equal."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum

from shared.names import SetRef
from shared.ports import Report


class Source(StrEnum):
    DISTRIBUTION = "distribution"
    HARBOR = "harbor"
    ARTIFACT_REGISTRY = "artifact-registry"
    ECR = "ecr"
    CANONICAL = "canonical"
    K8S_AUDIT = "k8s-audit"
    GKE_AUDIT = "gke-audit"
    KNATIVE = "knative"
    PUBSUB = "pubsub"
    SCHEDULER = "scheduler"
    CLI = "cli"


@dataclass(frozen=True, slots=True)
class SnapshotPushed:
    """A `<vm>:hibernate` manifest landed (repository already under the base). `sets`: the
    sets in allowed namespaces the VM name may belong to (`parse_vm_name`'s order), computed
    once by the adapter; derived, so out of equality like `event_id`."""

    repository: str
    tag: str
    digest: str | None
    source: Source
    vm_name: str
    event_id: str | None = field(default=None, compare=False)
    sets: tuple[SetRef, ...] = field(default=(), compare=False)


@dataclass(frozen=True, slots=True)
class SetChanged:
    ref: SetRef
    why: str
    source: Source
    event_id: str | None = field(default=None, compare=False)
    # The write was vk-cocoon's `hibernated` report, at this time (an audit event's
    # requestReceivedTimestamp): the seat-freed histogram measures from it.
    report: Report | None = field(default=None, compare=False)


@dataclass(frozen=True, slots=True)
class WakeRequested:
    ref: SetRef
    source: Source
    event_id: str | None = field(default=None, compare=False)
    # Who asked, as the door authenticated them (functions.doors.attribute): named in
    # the set's WakeRequested and WakeCompleted Events. Never read from the payload.
    requester: str | None = field(default=None, compare=False)


@dataclass(frozen=True, slots=True)
class SweepTick:
    dry_run: bool
    source: Source
    event_id: str | None = field(default=None, compare=False)


Trigger = SnapshotPushed | SetChanged | WakeRequested | SweepTick


def describe(trigger: Trigger) -> dict[str, object]:
    """What a log line says about a trigger (the fields that find its set or snapshot)."""
    if isinstance(trigger, SnapshotPushed):
        return {"repository": trigger.repository, "tag": trigger.tag, "vm": trigger.vm_name}
    if isinstance(trigger, SetChanged):
        return {"cocoonset": str(trigger.ref), "why": trigger.why}
    if isinstance(trigger, WakeRequested):
        return {"cocoonset": str(trigger.ref)}
    return {"dry_run": trigger.dry_run}
