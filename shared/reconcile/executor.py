"""The executor: perform one step, fold its result into the view, decide again.

`reconcile_set` is level-triggered and safe for any set: it reads the set and
its pods once, then loops decide → act until a terminal step (bounded). It
uses the object each write returns as the new state instead of re-reading,
so a complete release of a main-only set whose VM already hibernated costs
GET set, LIST pods, PATCH set (stash + round) beside PATCH pod (flag), DELETE
pod, PATCH status beside POST event, PATCH set (reported) = 8 API requests in
6 round trips, and one registry HEAD. A pair sent "beside" each other is two
writes that do not read each other (`together.py`); the run waits for both.

Concurrency (docs/design.md#concurrency): every set write that depends on the read carries its
resourceVersion; a 409 re-reads and re-decides (at most MAX_CONFLICTS times,
then TransientError so the platform redelivers). Pod deletes carry a UID
precondition; the main pod has a deterministic name (AlreadyExists = another
invocation created it).

"Once" effects (SeatReleased + the pods-deleted count + `released`;
WakeCompleted + the placement count + `woken`) are never emitted from this
invocation's memory: the write that makes the effect real leaves durable
evidence that its report is owed (`owed.py`), decide() returns a Report step
while it is, and the report is named by the occurrence's identity (Event
name, lifecycle `id`), so a redelivery or the sweep re-emits it idempotently.
The Event's create decides the count (201 counts, AlreadyExists does not);
the evidence is cleared only after the Event exists and the lifecycle event
was published, so any failure on the way fails the invocation (redelivery).

Other lifecycle CloudEvents (`waking`, a new WakeNoCapacity) go out beside
their write; `publisher=None` turns them off, and a failed publish of those is
a warning, never a failed reconcile.

Ghost main pods (docs/design.md#wake-ghost) end the
invocation with a TransientError: the platform redelivers with backoff, by
which time the pod is gone and the next run restores. That keeps a function
instance from sleeping on a timer it is billed for.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime

from shared import constants as k
from shared import lifecycle, log, seat_freed
from shared.config import Settings
from shared.constants import ANN_SEAT_WAIT, METRIC_SEAT_WAIT, METRIC_WAKE_DURATION
from shared.constants import GATE_SEAT_ORDER as SEAT_GATE
from shared.durations import format_rfc3339, parse_rfc3339
from shared.enums import CocoonSetPhase as Phase
from shared.errors import (
    AdmissionDenied,
    AlreadyExists,
    CocoonError,
    ConfigError,
    Conflict,
    NotFound,
    TransientError,
)
from shared.lifecycle import FROM_SETTINGS, LifecyclePublisher, PublisherArg, resolve_publisher
from shared.models import CocoonSet, Pod
from shared.names import LEGACY_OWNERS_MAX, SetRef, legacy_owners
from shared.ports import KubeApi, SnapshotRegistry
from shared.reconcile import owed
from shared.reconcile.decide import (
    Observed,
    decide,
    main_pod,
    owned_pods,
    released_seat_evidence,
)
from shared.reconcile.status import build_status
from shared.reconcile.steps import (
    OBSERVING,
    TERMINAL,
    CheckSharedNames,
    ClearStaleHint,
    CompleteWake,
    CreateMain,
    DiscardSnapshot,
    Done,
    DropSnapshot,
    FlagAndDelete,
    JoinLine,
    LostSnapshot,
    NotOurs,
    OutcomeResult,
    PersistWaking,
    PodTarget,
    Probe,
    ProbeRegistry,
    Refuse,
    ReportNoCapacity,
    ReportReleased,
    ReportWoken,
    RequestHibernation,
    RereadMain,
    Retry,
    SetPhase,
    SharedVMName,
    StampGeneration,
    Stash,
    Step,
    Wait,
    WaitInLine,
)
from shared.reconcile.together import beside, together
from shared.refusal import report_refusal
from shared.seats.reclaim.decide import SeatWait
from shared.seats.wake import WakeSeats, leave_gate

MAX_STEPS = 24
MAX_CONFLICTS = 5


class _Gone:
    """A flag's answer: the pod is gone (404)."""


GONE = _Gone()

StepHook = Callable[[Step], None]


@dataclass(frozen=True, slots=True)
class Outcome:
    """How one reconcile ended (every invocation logs it)."""

    ref: SetRef
    result: OutcomeResult
    reason: str
    steps: tuple[str, ...] = ()
    deleted_pods: int = 0
    created_main: bool = False


def _step_name(step: Step) -> str:
    if isinstance(step, SetPhase) and step.report is not None:
        return "SetPhase+ReportReleased"  # the report the log would otherwise not show
    return type(step).__name__


@dataclass
class _Run:
    ref: SetRef
    kube: KubeApi
    registry: SnapshotRegistry | None
    now: datetime
    hook: StepHook | None = None
    publisher: LifecyclePublisher | None = None
    cs: CocoonSet | None = None
    pods: tuple[Pod, ...] = ()
    probes: dict[str, Probe] = field(default_factory=dict)
    probe_errors: dict[str, CocoonError] = field(default_factory=dict)
    dropped: set[str] = field(default_factory=set)
    reread: dict[str, bool] = field(default_factory=dict)
    # Legacy-form VM names -> the other sets recording them, and those sets as read.
    shared: dict[str, tuple[str, ...]] = field(default_factory=dict)
    sharers: dict[str, CocoonSet] = field(default_factory=dict)
    steps: list[str] = field(default_factory=list)
    # The steps this run acted on, beyond looking (names, in order).
    effects: list[str] = field(default_factory=list)
    deleted: int = 0
    created: bool = False
    conflicts: int = 0
    completed_wake: bool = False
    # A create of the main pod answered AlreadyExists (docs/design.md#wake-sequence).
    lost_create: bool = False
    # Pods (uids) whose keep-snapshot flag this run already tried: one attempt each.
    flag_tried: set[str] = field(default_factory=set)
    # The wake's start stamp, in flight beside the main pod's create (`persist_waking`),
    # and the set's resourceVersion it was written over.
    stamping: Future[CocoonSet | None] | None = None
    stamp_base: str | None = None
    # Seat reclaim for a waiting wake (shared.seats): needs the settings (the grace,
    # the namespaces to search); off for the victim's own release started from here.
    settings: Settings | None = None
    # The seat economy's part of a wake (the line, reclaim): built from the settings.
    seats: WakeSeats | None = None
    reclaim: bool = True

    @classmethod
    def start(
        cls,
        ref: SetRef,
        kube: KubeApi,
        registry: SnapshotRegistry | None,
        settings: Settings | None,
        now: datetime | None,
        hook: StepHook | None,
        publisher: PublisherArg,
    ) -> _Run:
        """The one construction of a run, for `reconcile_set` and `request_wake` alike."""
        at = now if now is not None else datetime.now(UTC)
        events = resolve_publisher(publisher, settings)
        return cls(
            ref=ref,
            kube=kube,
            registry=registry,
            now=at,
            hook=hook,
            publisher=events,
            settings=settings,
            # No settings (a unit test, a library caller): no line, no reclaim.
            seats=WakeSeats(kube, settings, at, events) if settings is not None else None,
        )

    # --- state ------------------------------------------------------------------

    def read(self, cs: CocoonSet | None = None, *, pods_at: str | None = None) -> bool:
        # GET by name: a quorum read of etcd (kube-apiserver serves no GET from its
        # cache unless asked), ~2 ms; every set write that depends on it carries its
        # resourceVersion.
        self.cs = cs if cs is not None else self.kube.get_set(self.ref)
        if self.cs is None:
            return False
        # Listed by label, kept only if the set controls them (as the operator keeps them).
        # Not older than the set as read (docs/reads.md): every pod write made before the
        # set's last write is in the answer, without waiting for the watch cache to hear
        # of etcd's newest revision. What it may lack is milliseconds new, and each write
        # it could mislead carries a precondition (the set's CAS, a pod's uid +
        # resourceVersion, the main pod's deterministic name).
        # `pods_at`: the set's version before this invocation's own write to it.
        bound = pods_at or self.cs.metadata.resource_version
        self.pods = owned_pods(self.cs, tuple(self.kube.list_pods(self.ref, not_older_than=bound)))
        # What this invocation learned from the pods no longer holds after a re-read.
        self.reread.clear()
        return True

    def _replace_pod(self, pod: Pod) -> None:
        if not pod.controlled_by(self.set.metadata.uid):
            self._drop_pod(pod.name)  # a labelled pod the set does not control
            return
        self.pods = (*(p for p in self.pods if p.name != pod.name), pod)

    def _stamp(self, names: tuple[str, ...], annotations: dict[str, str]) -> None:
        """Annotate pods as read: the resourceVersion precondition keeps a stamp from
        going backwards over a newer one written since (409 = re-read, re-decide)."""
        for name in names:
            pod = next((p for p in self.pods if p.name == name), None)
            rv = pod.metadata.resource_version if pod is not None else None
            meta: dict[str, object] = {"annotations": annotations}
            if rv:
                meta["resourceVersion"] = rv
            try:
                patched = self.kube.patch_pod(self.ref.namespace, name, {"metadata": meta})
            except NotFound:
                self._drop_pod(name)
                continue
            self._replace_pod(patched)

    def _write_phase(self, phase: Phase) -> None:
        """The phase with the status the operator would write beside it (compare-and-swap)."""
        self.cs = self.kube.patch_set_status(
            self.ref,
            {
                "status": build_status(
                    self.set,
                    self.pods,
                    phase,
                    now=self.now,
                    observed_generation=not self.operator_present,
                )
            },
            resource_version=self.set.metadata.resource_version,
        )

    @property
    def operator_present(self) -> bool:
        # No settings (a unit test, a library caller): the functions act alone.
        return self.settings is not None and self.settings.operator_present

    def _drop_pod(self, name: str) -> None:
        self.pods = tuple(p for p in self.pods if p.name != name)

    @property
    def set(self) -> CocoonSet:
        assert self.cs is not None
        return self.cs

    def observed(self) -> Observed:
        return Observed(
            cs=self.set,
            pods=self.pods,
            probes=dict(self.probes),
            dropped=frozenset(self.dropped),
            reread=dict(self.reread),
            registry_configured=self.registry is not None,
            completed_wake=self.completed_wake,
            operator_present=self.operator_present,
            shared=dict(self.shared),
            seat_order=self.settings is not None and self.settings.seat_order,
        )

    def outcome(self, result: OutcomeResult, reason: str) -> Outcome:
        return Outcome(
            ref=self.ref,
            result=result,
            reason=reason,
            steps=tuple(self.steps),
            deleted_pods=self.deleted,
            created_main=self.created,
        )

    # --- the loop ---------------------------------------------------------------

    def run(self, initial: CocoonSet | None = None, *, pods_at: str | None = None) -> Outcome:
        try:
            out = self._run(initial, pods_at)
        except BaseException:
            self._settle_stamp(quiet=True)  # the run's own error is the one to raise
            raise
        # Nothing this run sent is still in flight when it answers.
        self._settle_stamp()
        return out

    def _run(self, initial: CocoonSet | None, pods_at: str | None) -> Outcome:
        if not self.read(initial, pods_at=pods_at):
            return self.outcome(OutcomeResult.NOT_FOUND, "the set does not exist")
        for _ in range(MAX_STEPS):
            step = decide(self.observed())
            if self.stamping is not None and not isinstance(step, CreateMain):
                # Only the create goes beside the start stamp: any other step may write
                # the set, so it waits for the stamp and is decided again on the set as
                # stamped.
                self._settle_stamp()
                step = decide(self.observed())
            if isinstance(step, CreateMain) and self.lost_create:
                # The name is taken by a pod the decision cannot count as the main
                # (leaving, or not the set's): another POST only repeats the 409.
                step = Retry("the main pod's name is taken by another pod: retry shortly")
            self.steps.append(_step_name(step))
            if not isinstance(step, OBSERVING):
                self.effects.append(_step_name(step))
            if isinstance(step, TERMINAL):
                return self.finish(step)
            if self.hook is not None:
                self.hook(step)
            try:
                self.act(step)
            except AdmissionDenied as e:
                return self.refused(step, e)
            except AlreadyExists:
                # Only creates answer it, and CreateMain handles its own; anything
                # else is unexpected here and must not pass for a lost CAS.
                raise
            except Conflict as e:
                self.conflicts += 1
                if self.conflicts > MAX_CONFLICTS:
                    raise TransientError(
                        f"{self.ref}: still conflicting after {MAX_CONFLICTS} re-reads"
                    ) from e
                log.debug("conflict: re-read and re-decide", set=str(self.ref), step=self.steps[-1])
                self._settle_stamp()  # nothing in flight across a re-read
                if not self.read():
                    return self.outcome(OutcomeResult.NOT_FOUND, "the set was deleted")
        raise TransientError(f"{self.ref}: no terminal step after {MAX_STEPS} steps")

    def finish(self, step: Step) -> Outcome:
        if isinstance(step, Retry):
            for vm in step.failed_probes:
                if vm in self.probe_errors:
                    # The registry's own error type (an auth failure is a ConfigError).
                    raise self.probe_errors[vm]
            raise TransientError(f"{self.ref}: {step.reason}")
        if isinstance(step, Refuse):
            raise ConfigError(step.reason)
        if isinstance(step, ReportNoCapacity):
            self.report_no_capacity(step)
            return self.outcome(
                OutcomeResult.WAITING, f"no capacity: {step.message}{self.reclaim_seat(step)}"
            )
        if isinstance(step, WaitInLine):
            return self.wait_in_line(step)
        if isinstance(step, SharedVMName):
            return self.report_shared(step)
        if isinstance(step, LostSnapshot):
            return self.report_lost(step)
        if isinstance(step, Done):
            return self.outcome(OutcomeResult.DONE, step.reason)
        if isinstance(step, Wait):
            main = main_pod(self.pods)
            if main is not None and main.spec.node_name and self.set.phase is Phase.WAKING:
                # Bound: it left the line, so the next in line may try now rather
                # than after this VM's restore (hand-off, shared.seats.line_act).
                self.tend_line("bound")
            return self.outcome(OutcomeResult.WAITING, step.reason)
        assert isinstance(step, NotOurs)
        effects = self.effects
        if effects:
            # This run moved the set (e.g. completed a wake) and the situation is
            # now the normal flow's: report what was done, not "not ours".
            return self.outcome(OutcomeResult.DONE, f"{', '.join(effects)}; now {step.reason}")
        return self.outcome(OutcomeResult.NOT_OURS, step.reason)

    def refused(self, step: Step, err: AdmissionDenied) -> Outcome:
        """An admission plugin or webhook refused a write (quota, PodSecurity, a missing
        ServiceAccount, cocoon-webhook's POD_CREATORS): redelivery will not fix it, so
        acknowledge and tell the set's owner with the server's own words (and, for a
        webhook, its name, the refused user and the fix); the sweep tries again on its
        next run. Required, like every Event here: if its POST fails the invocation
        fails, the redelivery meets the same refusal and the same name makes it once."""
        name = _step_name(step)
        report_refusal(self.kube, self.set, name, err)
        return self.outcome(OutcomeResult.REFUSED, f"{name}: {err.server_message}")

    # --- effects ----------------------------------------------------------------

    def act(self, step: Step) -> None:
        ns = self.ref.namespace
        if isinstance(step, ProbeRegistry):
            self.probe(step)
        elif isinstance(step, CheckSharedNames):
            self.check_shared(step)
        elif isinstance(step, DiscardSnapshot):
            self.discard_snapshot(step)
        elif isinstance(step, RequestHibernation):
            self._stamp(
                step.pods, {k.ANN_HIBERNATE: k.TRUE, k.ANN_GENERATION: str(step.generation)}
            )
        elif isinstance(step, StampGeneration):
            self._stamp(step.pods, {k.ANN_GENERATION: str(step.generation)})
        elif isinstance(step, SetPhase):
            if step.report is None:
                self._write_phase(step.phase)
            else:
                self.settle_released(step.phase, step.report)
        elif isinstance(step, Stash):
            self.stash(step)
        elif isinstance(step, FlagAndDelete):
            self.flag_and_delete(step)
        elif isinstance(step, PersistWaking):
            self.persist_waking(step)
        elif isinstance(step, CreateMain):
            body = (
                self.seats.restore_pod(self.set, step.body) if self.seats is not None else step.body
            )
            try:
                pod = self.kube.create_pod(ns, body)
            except AlreadyExists:
                # Another invocation created it: re-read so the next decision sees it.
                self.lost_create = True
                pod_now = self.kube.get_pod(ns, str(step.body["metadata"]["name"]))
                if pod_now is not None:
                    self._replace_pod(pod_now)
                return
            self.created = True
            self._replace_pod(pod)
            log.info(
                "created the restore-intent main pod",
                set=str(self.ref),
                pod=pod.name,
                gated=SEAT_GATE in pod.scheduling_gates,
            )
        elif isinstance(step, DropSnapshot):
            assert self.registry is not None
            if self.registry.drop_snapshot(step.vm) is False:
                # The manifest is shared with another tag: deleting it would take that
                # tag too. The stale `:hibernate` is harmless (the next release's gate
                # checks the generation), so the wake completes.
                log.warning("kept a shared :hibernate manifest", set=str(self.ref), vm=step.vm)
            self.dropped.add(step.vm)
        elif isinstance(step, CompleteWake):
            self.complete_wake(step)
        elif isinstance(step, JoinLine):
            self.adopt_into_line(step)
        elif isinstance(step, ReportReleased):
            self.report_released(step)
        elif isinstance(step, ReportWoken):
            self.report_woken(step)
        elif isinstance(step, ClearStaleHint):
            # Compare-and-swap: a re-suspend since the read must keep its hint.
            self.cs = self.kube.patch_set(
                self.ref,
                {
                    "metadata": {
                        "annotations": {
                            k.ANN_HIBERNATED_ON_NODE: None,
                            k.ANN_HIBERNATED_IMAGE: None,
                        }
                    }
                },
                resource_version=self.set.metadata.resource_version,
            )
            log.info(
                "cleared a stale hibernated-on-node hint", set=str(self.ref), reason=step.reason
            )
        elif isinstance(step, RereadMain):
            fresh = self.kube.get_pod(ns, step.name)
            alive = fresh is not None and not fresh.terminating
            self.reread[step.uid] = alive
            if fresh is not None and alive:
                self._replace_pod(fresh)
                self.reread[fresh.metadata.uid or ""] = True
        else:  # pragma: no cover - decide() returns only the steps above
            raise AssertionError(f"unknown step {step!r}")

    def probe(self, step: ProbeRegistry) -> None:
        assert self.registry is not None
        for vm in step.vms:
            try:
                present = self.registry.snapshot_present(vm)
            except (TransientError, ConfigError) as e:
                # An error is an answer of its own; the decision turns it into a retry.
                self.probes[vm] = Probe.ERROR
                self.probe_errors[vm] = e
                log.warning("registry probe failed", set=str(self.ref), vm=vm, error=str(e))
                continue
            self.probes[vm] = Probe.PRESENT if present else Probe.ABSENT

    def check_shared(self, step: CheckSharedNames) -> None:
        """Which other existing sets record each legacy-form name (a GET per possible set,
        a pod LIST only when the set's own records do not say). Namespaces outside
        COCOON_NAMESPACES are not read: the functions act on none of their sets."""
        for vm in step.vms:
            owners = [r for r in legacy_owners(vm) if r != self.ref]
            if len(owners) > LEGACY_OWNERS_MAX:
                self.shared[vm] = (f"{len(owners)} possible sets (too many to check)",)
                continue
            others: list[str] = []
            for ref in owners:
                if self.settings is not None and not self.settings.namespace_allowed(ref.namespace):
                    continue
                other = self.kube.get_set(ref)
                if other is None:
                    continue
                if vm not in other.recorded_vm_names and not any(
                    p.vm_name == vm for p in owned_pods(other, tuple(self.kube.list_pods(ref)))
                ):
                    continue
                others.append(str(ref))
                self.sharers[str(ref)] = other
            self.shared[vm] = tuple(others)

    def report_shared(self, step: SharedVMName) -> Outcome:
        """One Warning on each set that records the name (named by the name and the sets,
        so every reconcile of any of them makes it once); acknowledged: no redelivery
        can tell the snapshots apart."""
        sets = sorted((str(self.ref), *step.others))
        message = (
            f"VM name {step.vm} (cocoon-common v0.3.0 naming) is recorded by {', '.join(sets)}: "
            "the :hibernate tag under it cannot be told apart, so nothing is released or "
            "restored under it; recreate one set's pods under today's naming "
            "(docs/runbook.md#vm-name-shared)"
        )
        key = f"{step.vm}/{','.join(sets)}"
        self.required_event(k.REASON_VM_NAME_SHARED, message, key=key, type="Warning")
        for name in step.others:
            other = self.sharers.get(name)
            if other is not None:
                self.required_event(
                    k.REASON_VM_NAME_SHARED, message, key=key, type="Warning", on=other
                )
        return self.outcome(
            OutcomeResult.REFUSED, f"VM name {step.vm} is shared with {', '.join(step.others)}"
        )

    def report_lost(self, step: LostSnapshot) -> Outcome:
        cs = self.set
        # Once per release: the round (or, for a release not stamped, the hint's node).
        occurrence = cs.metadata.annotations.get(k.ANN_RELEASE_ROUND) or cs.hint
        self.required_event(
            k.REASON_SNAPSHOT_MISSING,
            f"The set was released but {step.vm}:{k.TAG_HIBERNATE} is not in the registry: "
            "no restore pod was created (docs/runbook.md#snapshot-missing)",
            key=f"{step.vm}/{occurrence}",
            type="Warning",
        )
        return self.outcome(
            OutcomeResult.REFUSED, f"released, but {step.vm}:{k.TAG_HIBERNATE} is gone"
        )

    def discard_snapshot(self, step: DiscardSnapshot) -> None:
        """The image changed since the release: the Event, the tag, then the record (a crash
        in between leaves the record, so the next run finishes the discard: the decision
        checks the image before it calls a missing tag lost)."""
        assert self.registry is not None
        self.required_event(
            k.REASON_SNAPSHOT_DISCARDED,
            f"spec.agent.image changed from {step.was} to {step.now} since the release: "
            f"dropped {step.vm}:{k.TAG_HIBERNATE}; the VM boots fresh from the new image",
            key=f"{step.vm}/{step.was}",
            type="Warning",
        )
        self.registry.drop_snapshot(step.vm)
        self.dropped.add(step.vm)
        self.probes[step.vm] = Probe.ABSENT
        # No WakeCompleted follows a fresh boot: the requester goes with the record.
        gone = {
            k.ANN_HIBERNATED_ON_NODE: None,
            k.ANN_HIBERNATED_IMAGE: None,
            k.ANN_WAKE_REQUESTED_BY: None,
        }
        self.cs = self.kube.patch_set(
            self.ref,
            {"metadata": {"annotations": gone}},
            resource_version=self.set.metadata.resource_version,
        )

    def stash(self, step: Stash) -> None:
        annotations: dict[str, str] = {}
        if step.delete_vm_names:
            annotations[k.ANN_DELETE_VM_NAMES] = step.delete_vm_names
        if step.hint is not None:
            annotations[k.ANN_HIBERNATED_ON_NODE] = step.hint
        if step.image is not None:
            annotations[k.ANN_HIBERNATED_IMAGE] = step.image
        if step.round is not None:
            annotations[k.ANN_RELEASE_ROUND] = step.round
            annotations[k.ANN_RELEASE_ROUND_PODS] = step.round_pods or ""
        rv = self.set.metadata.resource_version

        def write() -> CocoonSet:
            return self.kube.patch_set(
                self.ref, {"metadata": {"annotations": annotations}}, resource_version=rv
            )

        if not step.flags:
            self.cs = write()
            return
        # The flags the delete needs, beside the stash (docs/reads.md, "Writes sent at
        # once"): each is guarded by its own precondition, and a flag that lands while
        # the stash is refused (409: the set changed) leaves a state the flag-then-409
        # path of the delete leaves too (a flagged pod the next decision may keep).
        targets = step.flags
        self.cs, answers = together(write, lambda: [self._flag(t) for t in targets])
        for target, answer in zip(targets, answers, strict=True):
            self._flagged(target, answer)

    def _flag(self, target: PodTarget) -> Pod | _Gone | None:
        """The keep-snapshot flag, compare-and-swap on the pod the gate verified: a pod
        recreated under the name, or changed since the read, refuses it (Conflict: the
        run re-reads). Otherwise best-effort (None when it failed): a lost flag costs a
        registry pull on wake, a blocked delete would forfeit the seat. May run beside
        another write, so it reads nothing of the run's view but `target`."""
        try:
            return self.kube.patch_pod(
                self.ref.namespace,
                target.name,
                {
                    "metadata": {
                        "uid": target.uid,
                        "resourceVersion": target.resource_version,
                        "annotations": {k.ANN_KEEP_SNAPSHOT: k.TRUE},
                    }
                },
            )
        except NotFound:
            return GONE
        except Conflict:
            raise  # not a failed flag: the pod is not the one we read
        except CocoonError as e:
            log.warning(
                "keep-snapshot flag failed; deleting anyway",
                set=str(self.ref),
                pod=target.name,
                error=str(e),
            )
            return None

    def _flagged(self, target: PodTarget, answer: Pod | _Gone | None) -> str | None:
        """Fold a flag's answer into the view: the resourceVersion to delete the pod at,
        None when it is gone. One attempt per pod and run, like every write here."""
        self.flag_tried.add(target.uid)
        if isinstance(answer, _Gone):
            self._drop_pod(target.name)
            return None
        if answer is None:
            return target.resource_version
        self._replace_pod(answer)
        return answer.metadata.resource_version or target.resource_version

    def flag_and_delete(self, step: FlagAndDelete) -> None:
        ns = self.ref.namespace
        for target in step.pods:
            rv: str | None = target.resource_version
            if target.needs_flag and target.uid not in self.flag_tried:
                rv = self._flagged(target, self._flag(target))
                if rv is None:
                    continue
            # uid: never a newer pod that reused the name; resourceVersion: only the
            # pod as verified (and flagged) — and only once: the first delete changes
            # it (deletionTimestamp), so a concurrent duplicate gets 409, not a 2nd delete.
            # The count is not decided here: a lost answer to this DELETE would
            # lose it. The round stamped by the stash is reported (and counted)
            # once the seat is free, by ReportReleased.
            deleted = self.kube.delete_pod(ns, target.name, uid=target.uid, resource_version=rv)
            self._drop_pod(target.name)
            if deleted:
                self.deleted += 1
                seat_freed.main_pod_deleted(self.ref, target.name)

    def persist_waking(self, step: PersistWaking) -> None:
        self._write_phase(Phase.WAKING)
        log.info("wake engaged: phase Waking", set=str(self.ref))
        # Only the CAS winner gets here; the version it wrote names the occurrence.
        event = lifecycle.waking(self.set, hint=self.set.hint, now=self.now)
        if step.stamp_started:
            self._stamp_start()
        lifecycle.emit(self.publisher, event)

    def _stamp_start(self) -> None:
        """The wake's start (the sweep's deadline clock), sent beside the main pod's create
        that follows (docs/reads.md, "Writes sent at once"): neither reads the other, and
        until the stamp lands the sweep's clock is the pod's creation, milliseconds later.
        Best-effort, as that fallback makes it: a failure is a warning. Settled before the
        run decides anything but the create (`_settle_stamp`)."""
        # Only the winner of the phase CAS gets here; a merge patch of one key cannot
        # clobber anything else, so no precondition is needed.
        patch = {"metadata": {"annotations": {k.ANN_WAKE_STARTED: format_rfc3339(self.now)}}}

        def send() -> CocoonSet | None:
            try:
                return self.kube.patch_set(self.ref, patch)
            except (TransientError, NotFound, AdmissionDenied) as e:
                log.warning("could not stamp the wake start", set=str(self.ref), error=str(e))
                return None

        self.stamp_base = self.set.metadata.resource_version
        self.stamping = beside(send)

    def _settle_stamp(self, *, quiet: bool = False) -> None:
        """Wait for the start stamp in flight, if any; take the set it returns unless the
        run has read or written the set since. `quiet`: the run is already failing, so
        the stamp's own error is logged, not raised over it."""
        pending, self.stamping = self.stamping, None
        if pending is None:
            return
        try:
            stamped = pending.result()
        except Exception as e:
            if not quiet:
                raise
            log.warning("could not stamp the wake start", set=str(self.ref), error=str(e))
            return
        if (
            stamped is not None
            and self.cs is not None
            and self.cs.metadata.resource_version == self.stamp_base
        ):
            self.cs = stamped

    def adopt_into_line(self, step: JoinLine) -> None:
        # Decided only with the fair order on, so only with settings (and seats).
        assert self.seats is not None
        self.cs, pod = self.seats.adopt(
            self.ref, self.set, pod_name=step.pod_name, pod_uid=step.pod_uid, since=step.since
        )
        self._replace_pod(pod)

    def complete_wake(self, step: CompleteWake) -> None:
        cs = self.set
        main = main_pod(self.pods)
        pod_uid = (main.metadata.uid if main is not None else None) or ""
        # One compare-and-swap: the hint goes and the report becomes owed in the
        # same write, so no crash can clear the one without leaving the other.
        self.cs = self.kube.patch_set(
            self.ref,
            {
                "metadata": {
                    "annotations": {
                        # The release record goes with the hint (today's clearReleaseRecord).
                        k.ANN_HIBERNATED_ON_NODE: None,
                        k.ANN_HIBERNATED_IMAGE: None,
                        k.ANN_WAKE_STARTED: None,
                        k.ANN_LAST_WAKE: format_rfc3339(self.now),
                        k.ANN_LAST_WAKE_POD: pod_uid or None,
                        k.ANN_WAKE_REPORT_OWED: owed.wake_owed_value(
                            step.placement, pod_uid, cs.hint
                        ),
                        # The seat economy's wait record (shared.seats): the wait is over.
                        ANN_SEAT_WAIT: None,
                    }
                }
            },
            resource_version=cs.metadata.resource_version,
        )
        self.completed_wake = True
        self._observe_wake(cs, step.placement)
        # The seat this wake took is settled: the next in line may try (the hand-off
        # at bind may have been missed: events are not guaranteed).
        self.tend_line("completed")

    def _observe_wake(self, before: CocoonSet, placement: str) -> None:
        """The wake's durations, from the records the CAS above just cleared.

        Only the invocation whose compare-and-swap won gets here, so each wake is
        observed once. A record that does not parse is no sample, not an error.
        """
        ns = self.ref.namespace
        started = before.metadata.annotations.get(k.ANN_WAKE_STARTED)
        if started:
            with contextlib.suppress(ValueError):
                waited = self.now - parse_rfc3339(started)
                log.observe(
                    METRIC_WAKE_DURATION, waited.total_seconds(), namespace=ns, placement=placement
                )
        wait = SeatWait.decode(before.metadata.annotations.get(ANN_SEAT_WAIT))
        if wait is not None:
            log.observe(METRIC_SEAT_WAIT, (self.now - wait.since).total_seconds(), namespace=ns)

    def report_released(self, step: ReportReleased) -> None:
        self._release_event(self.set, step)
        self._finish_released(step)

    def settle_released(self, phase: Phase, report: ReportReleased) -> None:
        """The release's phase and its round's Event at once (docs/reads.md, "Writes sent at
        once"): the seat is free, the Event is named by the round and the phase write is a
        compare-and-swap, so either may land alone and the next decision finishes the
        other; the report's lifecycle event and its durable mark follow both."""
        cs = self.set
        together(lambda: self._write_phase(phase), lambda: self._release_event(cs, report))
        self._finish_released(report)

    def _release_event(self, cs: CocoonSet, step: ReportReleased) -> None:
        """The round's SeatReleased, and the count its create decides. May run beside the
        phase write, so it reads `cs` as passed, not the run's view."""
        identity = owed.release_identity(cs, step.round)
        n = len(step.pods)
        # No pods recorded: the round's pods were deleted by cocoon-operator's own slot
        # release (decide_release books such a round); its series counts them.
        what = f"deleted {n} pod(s)" if n else "cocoon-operator deleted the pods"
        created = self.required_event(
            k.REASON_SEAT_RELEASED,
            f"Snapshot verified in the registry; {what} to free the seat "
            f"(round {step.round}, hint node: {cs.hint or 'none'})",
            key=identity,
            on=cs,
        )
        if created and n:
            # The Event's create is the one write that decides the count.
            log.count(
                k.METRIC_PODS_DELETED, n, namespace=self.ref.namespace, cocoonset=self.ref.name
            )

    def _finish_released(self, step: ReportReleased) -> None:
        cs = self.set
        lifecycle.publish(
            self.publisher,
            lifecycle.released(
                cs, deleted_pods=step.pods, hint=cs.hint, now=self.now, occurrence=f"g{step.round}"
            ),
        )
        # No precondition: every reporter writes the same value, and a newer
        # round's stamp differs from it, so it stays owed.
        self.cs = self.kube.patch_set(
            self.ref, {"metadata": {"annotations": {k.ANN_RELEASE_REPORTED: step.round}}}
        )

    def report_woken(self, step: ReportWoken) -> None:
        cs = self.set
        identity = owed.wake_identity(cs, step.pod_uid)
        requester = cs.metadata.annotations.get(k.ANN_WAKE_REQUESTED_BY)
        asked = f", requested by {requester}" if requester else ""
        created = self.required_event(
            k.REASON_WAKE_COMPLETED,
            f"Restored from the hibernation snapshot (placement: {step.placement}, "
            f"hint node: {step.hint or 'none'}{asked})",
            key=identity,
        )
        if created:
            log.count(
                k.METRIC_WAKE,
                namespace=self.ref.namespace,
                cocoonset=self.ref.name,
                placement=step.placement,
            )
        main = next((p for p in self.pods if p.metadata.uid == step.pod_uid), None)
        lifecycle.publish(
            self.publisher,
            lifecycle.woken(
                cs,
                placement=step.placement,
                node=main.spec.node_name if main is not None else None,
                hint=step.hint,
                now=self.now,
                occurrence=step.pod_uid,
            ),
        )
        # Compare-and-swap: only this occurrence's marker is removed (and the requester
        # it named: the next wake is someone else's to sign).
        self.cs = self.kube.patch_set(
            self.ref,
            {
                "metadata": {
                    "annotations": {k.ANN_WAKE_REPORT_OWED: None, k.ANN_WAKE_REQUESTED_BY: None}
                }
            },
            resource_version=cs.metadata.resource_version,
        )

    def required_event(
        self,
        reason: str,
        message: str,
        *,
        key: str,
        type: str = "Normal",
        on: CocoonSet | None = None,
    ) -> bool:
        """Emit an Event named by `key` (about `on`, else the set as the run sees it);
        True when this call created it, False when it existed.

        Not best-effort: an owed report whose Event failed stays owed, and the
        error fails the invocation so the platform redelivers.
        """
        about = on if on is not None else self.set
        return self.kube.emit_event(about, reason=reason, message=message, type=type, key=key)

    def report_no_capacity(self, step: ReportNoCapacity) -> None:
        # The event name is derived from (pod, message): the API server answers
        # AlreadyExists for a repeat, so re-entries neither spam nor recount.
        # Required: a failed POST fails the invocation; the redelivery, still
        # unschedulable, re-decides this step and the same name makes it once.
        created = self.required_event(
            k.REASON_WAKE_NO_CAPACITY,
            step.event_message,
            type="Warning",
            key=f"{step.pod_uid}/{step.message}",
        )
        if created:
            log.count(
                k.METRIC_WAKE_UNSCHEDULABLE, namespace=self.ref.namespace, cocoonset=self.ref.name
            )
            pod = next((p for p in self.pods if p.metadata.uid == step.pod_uid), None)
            lifecycle.emit(
                self.publisher,
                lifecycle.wake_no_capacity(
                    self.set,
                    pod=pod.name if pod is not None else "",
                    pod_uid=step.pod_uid,
                    message=step.message,
                    now=self.now,
                ),
            )

    # --- the seat economy's part of a wake (shared.seats.wake) ----------------------

    def tend_line(self, why: str) -> None:
        if self.seats is not None:
            self.seats.tend(self.ref, main_pod(self.pods), why)

    def wait_in_line(self, step: WaitInLine) -> Outcome:
        if self.seats is None:
            # No settings, so no line: the gate comes off, as with the fair order off.
            reason = leave_gate(self.kube, main_pod(self.pods), step.pod_name, now=self.now)
            return self.outcome(OutcomeResult.WAITING, reason)
        reason = self.seats.wait_in_line(
            self.ref, main_pod(self.pods), step.pod_name, lambda: self.reclaim_seat(step)
        )
        return self.outcome(OutcomeResult.WAITING, reason)

    def reclaim_seat(self, step: ReportNoCapacity | WaitInLine) -> str:
        """Try to take an idle seat for this waiting wake (shared.seats); a note for the log."""
        if not self.reclaim or self.seats is None:
            return ""

        def start_release(ref: SetRef) -> Outcome:
            # The victim's release, now rather than on its next event (as the sweep does).
            return _Run(
                ref=ref,
                kube=self.kube,
                registry=self.registry,
                now=self.now,
                publisher=self.publisher,
                settings=self.settings,
                seats=self.seats,
                reclaim=False,
            ).run()

        return self.seats.reclaim(self.ref, self.set, step.pod_uid, start_release)


def reconcile_set(
    ref: SetRef,
    *,
    kube: KubeApi,
    registry: SnapshotRegistry | None,
    settings: Settings | None = None,
    now: datetime | None = None,
    hook: StepHook | None = None,
    publisher: PublisherArg = FROM_SETTINGS,
) -> Outcome:
    """Take every next safe step of docs/design.md#reconciler for one set (safe for any set).

    `registry=None` means no registry is configured: a release or wake then
    refuses with ConfigError instead of guessing. `hook` is called before each
    effect (tests use it to engineer races deterministically). `publisher`
    receives the lifecycle CloudEvents; by default the process's publisher for
    `settings.events_topic`, None (off) when the topic is unset.
    """
    return _Run.start(ref, kube, registry, settings, now, hook, publisher).run()


def request_wake(
    ref: SetRef,
    *,
    kube: KubeApi,
    registry: SnapshotRegistry | None,
    settings: Settings | None = None,
    now: datetime | None = None,
    hook: StepHook | None = None,
    publisher: PublisherArg = FROM_SETTINGS,
    requester: str | None = None,
) -> Outcome:
    """A user wants the set back: make `spec.suspend=false` durable, then run the wake.

    `requester`: who asked, as authenticated where the request entered; recorded with
    the unsuspend and named in the set's WakeRequested and WakeCompleted Events.
    """
    cs = kube.get_set(ref)
    if cs is None:
        return Outcome(ref=ref, result=OutcomeResult.NOT_FOUND, reason="the set does not exist")
    if not released_seat_evidence(cs):
        # Gated like the wake itself (docs/design.md#wake-engage: phase and state, not the current
        # policy value): a set edited to retain while released is still restored.
        return Outcome(
            ref=ref,
            result=OutcomeResult.NOT_OURS,
            reason=f"hibernatePolicy={cs.spec.hibernate_policy.value}: wake requests are for "
            "release-policy sets",
        )
    steps: tuple[str, ...] = ()
    # The pods are read not older than the set as read here, not as this invocation
    # writes it below: that write changes no pod, and a bound at its own revision would
    # wait for the pods' watch cache to hear of it (~100 ms, docs/reads.md).
    read_at = cs.metadata.resource_version
    if cs.spec.suspend:
        # Desired state, not a derived one: no precondition, so concurrent
        # requests all succeed and agree.
        who = requester or "an unnamed caller"
        patch = {
            "spec": {"suspend": False},
            "metadata": {"annotations": {k.ANN_WAKE_REQUESTED_BY: who}},
        }
        try:
            cs = kube.patch_set(ref, patch)
        except AdmissionDenied as e:
            # cocoon-webhook validates every spec change of a set: one that breaks its
            # rules cannot be unsuspended until fixed. Told once, acknowledged.
            report_refusal(kube, cs, "Unsuspend", e)
            return Outcome(
                ref=ref, result=OutcomeResult.REFUSED, reason=f"Unsuspend: {e.server_message}"
            )
        steps = ("Unsuspend",)
        # Named by the unsuspend's own write: one Event per request that woke the set.
        # Best-effort: who asked is also on the set (and in WakeCompleted), and a failed
        # POST must not fail a wake whose unsuspend already landed.
        try:
            kube.emit_event(
                cs,
                reason=k.REASON_WAKE_REQUESTED,
                message=f"Wake requested by {who}",
                key=f"{cs.metadata.resource_version}",
            )
        except CocoonError as e:
            log.warning("could not record who requested the wake", set=str(ref), error=str(e))
    run = _Run.start(ref, kube, registry, settings, now, hook, publisher)
    out = run.run(cs, pods_at=read_at)
    return replace(out, steps=steps + out.steps)
