"""The next step of a reconcile, as a value (decide first, then act).

A decision is a pure function of what was read (the set, its pods, the
registry answers gathered so far) and returns exactly one of these. The
executor performs it, updates its view of the world and asks again, so every
step is small and the sequence of docs/design.md#steps appears as a table of decisions.

Terminal steps end the invocation: `Done`, `Wait`, `NotOurs`, `Retry`,
`Refuse`, `ReportNoCapacity`, `WaitInLine`, `SharedVMName`, `LostSnapshot`.
The others are effects.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from shared.enums import CocoonSetPhase


class Probe(StrEnum):
    """What the registry said about `<vm>:hibernate` (a HEAD)."""

    PRESENT = "present"
    ABSENT = "absent"
    # An error is its own answer: never "absent", never "present" (docs/design.md#release-gate).
    ERROR = "error"


# --- terminal steps ---------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Done:
    """Nothing left to do: the set is where this flow wants it."""

    reason: str


@dataclass(frozen=True, slots=True)
class Wait:
    """Not yet (a VM still hibernating, a restore still booting); a later event moves on."""

    reason: str


@dataclass(frozen=True, slots=True)
class NotOurs:
    """Another flow owns this set's current situation (normal flow, in-place wake, retain)."""

    reason: str


@dataclass(frozen=True, slots=True)
class Retry:
    """Stop and fail the invocation so the platform redelivers (registry error, ghost pod)."""

    reason: str
    # The VMs whose registry probe failed: the executor re-raises that error
    # (so an auth failure stays a ConfigError rather than a generic retry).
    failed_probes: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class Refuse:
    """Misconfigured deployment (no registry): act on nothing, fail loudly."""

    reason: str


@dataclass(frozen=True, slots=True)
class ReportNoCapacity:
    """The restored main pod cannot be scheduled: warn (once per situation) and keep waiting."""

    pod_uid: str
    message: str  # the scheduler's
    pod_name: str = ""

    @property
    def event_message(self) -> str:
        """The Warning's text, worded as the operator words its WakeNoCapacity."""
        return f"main pod {self.pod_name} unschedulable: {self.message}"


# --- effects ----------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ProbeRegistry:
    """HEAD `<vm>:hibernate` for each VM; the answers feed the next decision."""

    vms: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class RequestHibernation:
    """Stamp `hibernate: "true"` and the generation, in one patch (docs/design.md#release-request).

    vk-cocoon echoes the pod's generation stamp (never the set's) as the
    observed generation of its `hibernated` report, so the stamp must be
    current before vk-cocoon acts, or the gate never passes.
    """

    pods: tuple[str, ...]
    generation: int


@dataclass(frozen=True, slots=True)
class StampGeneration:
    """Stamp the set's current generation on owned pods whose stamp lags (as the operator does)."""

    pods: tuple[str, ...]
    generation: int


@dataclass(frozen=True, slots=True)
class SetPhase:
    """Write `status.phase` (compare-and-swap on the set's resourceVersion).

    `report`: a release settling `Suspended` with its round's SeatReleased owed; the
    round's Event is created beside the phase write (neither reads the other), then the
    report finishes as `ReportReleased` does.
    """

    phase: CocoonSetPhase
    reason: str
    report: ReportReleased | None = None


@dataclass(frozen=True, slots=True)
class Stash:
    """docs/design.md#release-stash: one write with the VM-name union and the placement hint."""

    delete_vm_names: str
    hint: str | None  # None = leave the hint as it is (main has no node)
    # The release round's durable identity (see `owed.py`): stamped in the same
    # write, before any delete; None = already stamped.
    round: str | None = None
    round_pods: str | None = None
    # The pods the delete that follows will take, whose keep-snapshot flag is missing:
    # flagged beside this write (neither reads the other), so the delete waits for no
    # flag of its own.
    flags: tuple[PodTarget, ...] = ()
    # The main VM's image, recorded beside the hint as today's operator does
    # (`hibernated-image`); None = leave it as it is.
    image: str | None = None


@dataclass(frozen=True, slots=True)
class PodTarget:
    """A pod exactly as the gate saw it: deletes are preconditioned on uid AND resourceVersion."""

    name: str
    uid: str
    resource_version: str
    needs_flag: bool


@dataclass(frozen=True, slots=True)
class FlagAndDelete:
    """Flag keep-snapshot (best-effort), delete preconditioned (docs/design.md#release-delete)."""

    pods: tuple[PodTarget, ...]


@dataclass(frozen=True, slots=True)
class PersistWaking:
    """Persist the restore (`Waking`) before creating anything (docs/design.md#wake-sequence)."""

    stamp_started: bool  # a new wake: record when it started (the sweep's deadline clock)


@dataclass(frozen=True, slots=True)
class CreateMain:
    """Create the restore-intent main pod (AlreadyExists = someone else did)."""

    body: dict[str, Any]


@dataclass(frozen=True, slots=True)
class DropSnapshot:
    """The restored VM is live: delete its `:hibernate` manifest (NotFound is fine)."""

    vm: str


@dataclass(frozen=True, slots=True)
class CompleteWake:
    """Clear the hint (compare-and-swap); only the winner counts the placement."""

    placement: str


@dataclass(frozen=True, slots=True)
class RereadMain:
    """The main pod may be a ghost of the deleted one: GET it from the API."""

    name: str
    uid: str


@dataclass(frozen=True, slots=True)
class ClearStaleHint:
    """The main is alive and no restore made it: the release never completed.

    Clear `hibernated-on-node` (compare-and-swap) so it stops marking a wake in
    flight (it blocks idle suspend and costs a safety-net reconcile every
    sweep). The `delete-vm-names` stash stays: teardown still needs it.
    """

    reason: str


@dataclass(frozen=True, slots=True)
class ReportReleased:
    """An owed SeatReleased: the round's Event (named by its identity), count, lifecycle event,
    then `release-reported` = round (the durable "done")."""

    round: str
    pods: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class ReportWoken:
    """An owed WakeCompleted: Event (named by the wake's identity), count, lifecycle event,
    then the `wake-report-owed` marker removed (the durable "done")."""

    placement: str
    pod_uid: str
    hint: str


@dataclass(frozen=True, slots=True)
class WaitInLine:
    """The restored main pod is held by our scheduling gate (shared.seats.line_decide): an
    older wake waits for the same seats. Tend the line; the pod goes when its turn comes."""

    pod_uid: str
    pod_name: str


@dataclass(frozen=True, slots=True)
class JoinLine:
    """A restore pod another actor created (cocoon-operator's startReleasedWake) waits
    outside the seat line: label it into its pool's line, its place the pod's creation
    (shared.seats.line_decide), and stamp the wake's start on the set if nobody did."""

    pod_name: str
    pod_uid: str
    since: str  # the pod's creationTimestamp


@dataclass(frozen=True, slots=True)
class CheckSharedNames:
    """Find the other existing sets that record these legacy-form VM names.

    A v0.3.0 name such as `vk-a-b-c-0` is both `a/b-c` and `a-b/c`: the tag under it
    proves nothing about whose VM was pushed (docs/compatibility.md#names).
    """

    vms: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class SharedVMName:
    """Terminal: another existing set records the same VM name. Nothing is released or
    restored under it; a Warning on every set that shares it says so, once."""

    vm: str
    others: tuple[str, ...]  # "ns/name" of the other sets


@dataclass(frozen=True, slots=True)
class LostSnapshot:
    """Terminal: the set was released (hint or image record) but `<vm>:hibernate` is gone.

    Creating a restore pod would fail, a fresh boot would silently lose the user's VM:
    nothing is created, one Warning names the VM (docs/runbook.md#snapshot-missing).
    """

    vm: str


@dataclass(frozen=True, slots=True)
class DiscardSnapshot:
    """The image changed since the release: drop `:hibernate` and the release record
    (hint, image) so the normal flow boots the new image fresh, as today's operator does;
    vk-cocoon would refuse to restore a snapshot of another base image anyway."""

    vm: str
    was: str
    now: str


Step = (
    Done
    | CheckSharedNames
    | SharedVMName
    | LostSnapshot
    | DiscardSnapshot
    | JoinLine
    | Wait
    | WaitInLine
    | NotOurs
    | Retry
    | Refuse
    | ReportNoCapacity
    | ProbeRegistry
    | RequestHibernation
    | StampGeneration
    | SetPhase
    | Stash
    | FlagAndDelete
    | PersistWaking
    | CreateMain
    | DropSnapshot
    | CompleteWake
    | RereadMain
    | ClearStaleHint
    | ReportReleased
    | ReportWoken
)


TERMINAL = (
    Done,
    Wait,
    NotOurs,
    Retry,
    Refuse,
    ReportNoCapacity,
    WaitInLine,
    SharedVMName,
    LostSnapshot,
)
# Steps that only look (and every terminal step but the two that report): never an
# effect of the run.
OBSERVING = (ProbeRegistry, RereadMain, CheckSharedNames, *TERMINAL)


class OutcomeResult(StrEnum):
    """How one reconcile of a set ended (`Outcome.result`): a StrEnum, so the value
    is what the invocation's log line and the CLI's JSON carry."""

    DONE = "done"
    WAITING = "waiting"
    REFUSED = "refused"
    NOT_OURS = "not-ours"
    NOT_FOUND = "not-found"
