"""The next step of a reconcile, as a value: `decide` returns one, the executor performs it
and asks again. Terminal steps end the invocation; the others are effects (or looks)."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from shared.enums import CocoonSetPhase
from shared.names import SetRef


class Probe(StrEnum):
    """What the registry said about `<vm>:hibernate` (a HEAD)."""

    PRESENT = "present"
    ABSENT = "absent"
    ERROR = "error"  # its own answer: never "absent", never "present"


@dataclass(frozen=True, slots=True)
class _Because:
    """A step that carries only why (each subclass is its own step type)."""

    reason: str


# --- terminal steps ---------------------------------------------------------------


class Done(_Because):
    """Nothing left to do: the set is where this flow wants it."""


class Wait(_Because):
    """Not yet (a VM still hibernating, a restore still booting); a later event moves on."""


@dataclass(frozen=True, slots=True)
class NotOurs(_Because):
    """Another flow owns this set's current situation (normal flow, in-place wake, retain)."""

    # The normal flow boots fresh and no WakeCompleted will name the requester: forget it.
    forget_requester: bool = False


@dataclass(frozen=True, slots=True)
class Retry:
    """Stop and fail the invocation so the platform redelivers (registry error, ghost pod)."""

    reason: str
    # The VMs whose probe failed: their own error is raised (auth stays a ConfigError).
    failed_probes: tuple[str, ...] = ()


class Refuse(_Because):
    """Misconfigured deployment (no registry): act on nothing, fail loudly."""


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
class _PodStamp:
    pods: tuple[str, ...]
    generation: int


class RequestHibernation(_PodStamp):
    """`hibernate: "true"` and the generation in one patch: vk-cocoon echoes the pod's stamp."""


class StampGeneration(_PodStamp):
    """Stamp the set's current generation on owned pods whose stamp lags (as the operator does)."""


@dataclass(frozen=True, slots=True)
class SetPhase:
    """Write `status.phase` (CAS); `report`: a round's SeatReleased owed, sent beside it."""

    phase: CocoonSetPhase
    reason: str
    report: ReportReleased | None = None


@dataclass(frozen=True, slots=True)
class Stash:
    """One write before any delete: the VM-name union, the hint, the image and the round."""

    delete_vm_names: str
    hint: str | None  # None = leave the hint as it is (main has no node)
    round: str | None = None  # the release round (`owed.py`); None = already stamped
    round_pods: str | None = None
    flags: tuple[PodTarget, ...] = ()  # pods to flag keep-snapshot beside this write
    image: str | None = None  # the main VM's image; None = leave it as it is


@dataclass(frozen=True, slots=True)
class PodTarget:
    """A pod exactly as the gate saw it: deletes are preconditioned on uid AND resourceVersion."""

    name: str
    uid: str
    resource_version: str
    needs_flag: bool


@dataclass(frozen=True, slots=True)
class FlagAndDelete:
    """Flag keep-snapshot (best-effort), then delete preconditioned on uid and version."""

    pods: tuple[PodTarget, ...]


@dataclass(frozen=True, slots=True)
class PersistWaking:
    """Persist the restore (`Waking`) before creating anything."""

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


class ClearStaleHint(_Because):
    """The main is alive and no restore made it: clear the hint (the stash stays for teardown)."""


@dataclass(frozen=True, slots=True)
class ReportReleased:
    """An owed SeatReleased: Event, count, lifecycle event, then `release-reported` = round."""

    round: str
    pods: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class ReportWoken:
    """An owed WakeCompleted: Event, count, lifecycle event, then the marker removed."""

    placement: str
    pod_uid: str
    hint: str


@dataclass(frozen=True, slots=True)
class WaitInLine:
    """The restored main pod is held by the seat line's gate: tend the line, wait its turn."""

    pod_uid: str
    pod_name: str


@dataclass(frozen=True, slots=True)
class JoinLine:
    """A restore pod cocoon-operator created waits outside the seat line: give it its place."""

    pod_name: str
    pod_uid: str
    since: str  # the pod's creationTimestamp


@dataclass(frozen=True, slots=True)
class CheckSharedNames:
    """Find the other sets that record these legacy-form VM names: a v0.3.0 name such as
    `vk-a-b-c-0` is both `a/b-c` and `a-b/c`, so its tag proves nothing about whose VM it is."""

    vms: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class SharedVMName:
    """Terminal: another set records the VM name; nothing acts under it, a Warning says so."""

    vm: str
    others: tuple[str, ...]  # "ns/name" of the other sets


@dataclass(frozen=True, slots=True)
class LostSnapshot:
    """Terminal: released but `<vm>:hibernate` is gone; a fresh boot would lose the VM: warn."""

    vm: str


@dataclass(frozen=True, slots=True)
class DiscardSnapshot:
    """The image changed since the release (vk-cocoon restores no other): drop the snapshot
    and the release record, so the normal flow boots the new image fresh."""

    vm: str
    was: str
    now: str


# Terminal steps end the invocation (the warned ones with a Warning Event); looks only read.
Terminal = Done | Wait | WaitInLine | NotOurs | Retry | Refuse
Warned = ReportNoCapacity | SharedVMName | LostSnapshot
Look = ProbeRegistry | CheckSharedNames | RereadMain
ReleaseWrite = RequestHibernation | Stash | FlagAndDelete | ClearStaleHint
WakeWrite = PersistWaking | CreateMain | JoinLine | DropSnapshot | DiscardSnapshot | CompleteWake
Write = SetPhase | StampGeneration | ReportReleased | ReportWoken
Step = Terminal | Warned | Look | ReleaseWrite | WakeWrite | Write


class OutcomeResult(StrEnum):
    """How one reconcile of a set ended (`Outcome.result`), as logs and the CLI's JSON say it."""

    DONE = "done"
    WAITING = "waiting"
    REFUSED = "refused"
    NOT_OURS = "not-ours"
    NOT_FOUND = "not-found"


@dataclass(frozen=True, slots=True)
class Outcome:
    """How one reconcile ended (every invocation logs it)."""

    ref: SetRef
    result: OutcomeResult
    reason: str
    steps: tuple[str, ...] = ()
    deleted_pods: int = 0
    created_main: bool = False
