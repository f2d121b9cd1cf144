"""The executor: perform one step, fold its answer into the view, decide again. Set writes
that depend on the read carry its resourceVersion (a 409 re-reads and re-decides), pod
deletes a uid; reports owed once come from durable evidence (`owed.py`), never memory.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Mapping
from concurrent.futures import Future
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Any

from shared import constants as k
from shared import lifecycle, log
from shared.config import Settings
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
from shared.ports import KubeApi, Report, SnapshotRegistry
from shared.reconcile import owed, steps
from shared.reconcile.decide import Observed, decide, main_pod, owned_pods, released_seat_evidence
from shared.reconcile.report_wait import observe_seat_freed
from shared.reconcile.status import build_status
from shared.reconcile.steps import Outcome, OutcomeResult, Probe, Step
from shared.reconcile.together import beside, together
from shared.refusal import report_refusal
from shared.seats.reclaim.decide import SeatWait
from shared.seats.wake import WakeSeats, leave_gate

MAX_STEPS = 24
MAX_CONFLICTS = 5


StepHook = Callable[[Step], None]


def _step_name(step: Step) -> str:
    if isinstance(step, steps.SetPhase) and step.report is not None:
        return "SetPhase+ReportReleased"  # the report the log would otherwise not show
    return type(step).__name__


# What a release leaves on the set for its wake: cleared together.
_RELEASE_RECORD = {k.ANN_HIBERNATED_ON_NODE: None, k.ANN_HIBERNATED_IMAGE: None}


@dataclass
class _Run:
    """One reconcile of one set: the read, what the run learned beyond it, what it did."""

    ref: SetRef
    kube: KubeApi
    registry: SnapshotRegistry | None
    now: datetime
    settings: Settings | None = None
    # The line and reclaim; None without settings (a unit test, a library caller).
    seats: WakeSeats | None = None
    publisher: LifecyclePublisher | None = None
    hook: StepHook | None = None
    reclaim: bool = True  # off for a victim's release started by a reclaim
    report: Report | None = None  # vk-cocoon's `hibernated` report, when its time is known
    cs: CocoonSet | None = None
    pods: tuple[Pod, ...] = ()
    probes: dict[str, Probe] = field(default_factory=dict)
    # A failed probe's error, to be re-raised as itself (auth stays a ConfigError).
    probe_errors: dict[str, CocoonError] = field(default_factory=dict)
    dropped: set[str] = field(default_factory=set)
    reread: dict[str, bool] = field(default_factory=dict)
    # Legacy-form VM names -> the other sets recording them, and those sets as read.
    shared: dict[str, tuple[str, ...]] = field(default_factory=dict)
    sharers: dict[str, CocoonSet] = field(default_factory=dict)
    completed_wake: bool = False
    lost_create: bool = False  # a create of the main pod answered AlreadyExists
    flag_tried: set[str] = field(default_factory=set)  # pod uids: one flag attempt each
    done: list[Step] = field(default_factory=list)
    deleted: int = 0
    created: bool = False
    # The wake's start stamp in flight, and the set's resourceVersion it was written over.
    stamp: tuple[Future[CocoonSet], str | None] | None = None

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
        report: Report | None = None,
    ) -> _Run:
        at = now if now is not None else datetime.now(UTC)
        events = resolve_publisher(publisher, settings)
        seats = WakeSeats(kube, settings, at, events) if settings is not None else None
        return cls(ref, kube, registry, at, settings, seats, events, hook, report=report)

    # --- the view ---------------------------------------------------------------

    def read(self, cs: CocoonSet | None = None, *, pods_at: str | None = None) -> bool:
        self.cs = cs if cs is not None else self.kube.get_set(self.ref)
        if self.cs is None:
            return False
        # Pods not older than the set as read, or than `pods_at` (before this run's own write).
        bound = pods_at or self.cs.metadata.resource_version
        self.pods = owned_pods(self.cs, tuple(self.kube.list_pods(self.ref, not_older_than=bound)))
        self.reread.clear()
        return True

    @property
    def set(self) -> CocoonSet:
        assert self.cs is not None
        return self.cs

    @property
    def operator_present(self) -> bool:
        return self.settings is not None and self.settings.operator_present

    def _replace_pod(self, pod: Pod) -> None:
        if not pod.controlled_by(self.set.metadata.uid):
            self._drop_pod(pod.name)  # a labelled pod the set does not control
            return
        self.pods = (*(p for p in self.pods if p.name != pod.name), pod)

    def _drop_pod(self, name: str) -> None:
        self.pods = tuple(p for p in self.pods if p.name != name)

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
        names = tuple(_step_name(s) for s in self.done)
        return Outcome(self.ref, result, reason, names, self.deleted, self.created)

    # --- the loop ---------------------------------------------------------------

    def run(self, initial: CocoonSet | None = None, *, pods_at: str | None = None) -> Outcome:
        try:
            out = self._run(initial, pods_at)
        except BaseException:
            self._settle_stamp(quiet=True)  # the run's own error is the one to raise
            raise
        self._settle_stamp()  # nothing this run sent is in flight when it answers
        return out

    def _run(self, initial: CocoonSet | None, pods_at: str | None) -> Outcome:
        if not self.read(initial, pods_at=pods_at):
            return self.outcome(OutcomeResult.NOT_FOUND, "the set does not exist")
        conflicts = 0
        for _ in range(MAX_STEPS):
            step = self._next_step()
            self.done.append(step)
            end = _ENDS.get(type(step))
            if end is not None:
                return end(self, step)
            if self.hook is not None:
                self.hook(step)
            try:
                _ACTS[type(step)](self, step)
            except AdmissionDenied as e:
                return self.refused(step, e)
            except AlreadyExists:
                raise  # only creates answer it, and CreateMain handles its own: not a lost CAS
            except Conflict as e:
                conflicts += 1
                if conflicts > MAX_CONFLICTS:
                    raise TransientError(
                        f"{self.ref}: still conflicting after {MAX_CONFLICTS} re-reads"
                    ) from e
                log.debug(
                    "conflict: re-read and re-decide", set=str(self.ref), step=_step_name(step)
                )
                self._settle_stamp()  # nothing in flight across a re-read
                if not self.read():
                    return self.outcome(OutcomeResult.NOT_FOUND, "the set was deleted")
        raise TransientError(f"{self.ref}: no terminal step after {MAX_STEPS} steps")

    def _next_step(self) -> Step:
        step = decide(self.observed())
        if self.stamp is not None and not isinstance(step, steps.CreateMain):
            # Only the create goes beside the start stamp; any other step may write the set.
            self._settle_stamp()
            step = decide(self.observed())
        if isinstance(step, steps.CreateMain) and self.lost_create:
            # The name is taken by a pod decide cannot count as the main: a POST repeats the 409.
            return steps.Retry("the main pod's name is taken by another pod: retry shortly")
        return step

    def refused(self, step: Step, err: AdmissionDenied) -> Outcome:
        """An admission plugin or webhook refused a write: redelivery will not fix it, so
        acknowledge and tell the set's owner in the server's words (a required Event)."""
        name = _step_name(step)
        report_refusal(self.kube, self.set, name, err)
        return self.outcome(OutcomeResult.REFUSED, f"{name}: {err.server_message}")

    # --- terminal steps ---------------------------------------------------------

    def end_done(self, step: steps.Done) -> Outcome:
        return self.outcome(OutcomeResult.DONE, step.reason)

    def end_wait(self, step: steps.Wait) -> Outcome:
        main = main_pod(self.pods)
        if main is not None and main.spec.node_name and self.set.phase is Phase.WAKING:
            # Bound: it left the line, so the next in line may try now.
            self.tend_line("bound")
        return self.outcome(OutcomeResult.WAITING, step.reason)

    def end_not_ours(self, step: steps.NotOurs) -> Outcome:
        if step.forget_requester:
            self._annotate({k.ANN_WAKE_REQUESTED_BY: None}, cas=False)
        effects = [_step_name(s) for s in self.done if not isinstance(s, (steps.Look, *_ENDS))]
        if effects:
            # This run moved the set (e.g. completed a wake) into the normal flow's hands.
            return self.outcome(OutcomeResult.DONE, f"{', '.join(effects)}; now {step.reason}")
        return self.outcome(OutcomeResult.NOT_OURS, step.reason)

    def end_retry(self, step: steps.Retry) -> Outcome:
        for vm in step.failed_probes:
            if vm in self.probe_errors:
                raise self.probe_errors[vm]
        raise TransientError(f"{self.ref}: {step.reason}")

    def end_refuse(self, step: steps.Refuse) -> Outcome:
        raise ConfigError(step.reason)

    def end_no_capacity(self, step: steps.ReportNoCapacity) -> Outcome:
        # Named by (pod, message): a repeat is AlreadyExists, so re-entries never recount.
        key = f"{step.pod_uid}/{step.message}"
        if self.required_event(
            k.REASON_WAKE_NO_CAPACITY, step.event_message, key=key, type="Warning"
        ):
            self._count(k.METRIC_WAKE_UNSCHEDULABLE)
            event = lifecycle.wake_no_capacity(
                self.set,
                pod=step.pod_name,
                pod_uid=step.pod_uid,
                message=step.message,
                now=self.now,
            )
            lifecycle.emit(self.publisher, event)
        reclaimed = self.reclaim_seat(step)
        return self.outcome(OutcomeResult.WAITING, f"no capacity: {step.message}{reclaimed}")

    def end_wait_in_line(self, step: steps.WaitInLine) -> Outcome:
        if self.seats is None:
            # No settings, so no line: the gate comes off, as with the fair order off.
            reason = leave_gate(self.kube, main_pod(self.pods), step.pod_name, now=self.now)
        else:
            reason = self.seats.wait_in_line(
                self.ref, main_pod(self.pods), step.pod_name, lambda: self.reclaim_seat(step)
            )
        return self.outcome(OutcomeResult.WAITING, reason)

    def end_shared(self, step: steps.SharedVMName) -> Outcome:
        """One Warning on each sharing set, made once by any of their reconciles; acknowledged."""
        sets = sorted((str(self.ref), *step.others))
        message = (
            f"VM name {step.vm} (cocoon-common v0.3.0 naming) is recorded by {', '.join(sets)}: "
            "the :hibernate tag under it cannot be told apart, so nothing is released or "
            "restored under it; recreate one set's pods under today's naming "
            "(docs/runbook.md#vm-name-shared)"
        )
        key = f"{step.vm}/{','.join(sets)}"
        others = [self.sharers[name] for name in step.others if name in self.sharers]
        for about in (self.set, *others):
            self.required_event(k.REASON_VM_NAME_SHARED, message, key=key, type="Warning", on=about)
        return self.outcome(
            OutcomeResult.REFUSED, f"VM name {step.vm} is shared with {', '.join(step.others)}"
        )

    def end_lost(self, step: steps.LostSnapshot) -> Outcome:
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

    # --- effects ----------------------------------------------------------------

    def probe(self, step: steps.ProbeRegistry) -> None:
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

    def check_shared(self, step: steps.CheckSharedNames) -> None:
        """Which other sets record each legacy-form name (outside COCOON_NAMESPACES: none)."""
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

    def discard_snapshot(self, step: steps.DiscardSnapshot) -> None:
        """The Event, the tag, then the record: a crash in between leaves the record, and the
        next run finishes the discard."""
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
        self._annotate({**_RELEASE_RECORD, k.ANN_WAKE_REQUESTED_BY: None})

    def _annotate(self, annotations: Mapping[str, str | None], *, cas: bool = True) -> None:
        """Merge-patch the set's annotations; `cas`: only over the set as this run read it."""
        rv = self.set.metadata.resource_version if cas else None
        patch = {"metadata": {"annotations": dict(annotations)}}
        self.cs = self.kube.patch_set(self.ref, patch, resource_version=rv)

    def stamp_pods(self, step: steps.RequestHibernation | steps.StampGeneration) -> None:
        """Annotate pods as read: the resourceVersion keeps a stamp from going backwards."""
        annotations = {k.ANN_GENERATION: str(step.generation)}
        if isinstance(step, steps.RequestHibernation):
            annotations[k.ANN_HIBERNATE] = k.TRUE
        for name in step.pods:
            rv = next((p.metadata.resource_version for p in self.pods if p.name == name), None)
            meta: dict[str, object] = {"annotations": annotations}
            if rv:
                meta["resourceVersion"] = rv
            try:
                patched = self.kube.patch_pod(self.ref.namespace, name, {"metadata": meta})
            except NotFound:
                self._drop_pod(name)
                continue
            self._replace_pod(patched)

    def set_phase(self, step: steps.SetPhase) -> None:
        if step.report is None:
            self._write_phase(step.phase)
        else:
            self.report_released(step.report, beside=step.phase)

    def _write_phase(self, phase: Phase) -> None:
        """The phase with the status the operator would write beside it (compare-and-swap)."""
        status = build_status(
            self.set, self.pods, phase, now=self.now, observed_generation=not self.operator_present
        )
        rv = self.set.metadata.resource_version
        self.cs = self.kube.patch_set_status(self.ref, {"status": status}, resource_version=rv)

    def stash(self, step: steps.Stash) -> None:
        wanted = {
            k.ANN_DELETE_VM_NAMES: step.delete_vm_names or None,
            k.ANN_HIBERNATED_ON_NODE: step.hint,
            k.ANN_HIBERNATED_IMAGE: step.image,
            k.ANN_RELEASE_ROUND: step.round,
            k.ANN_RELEASE_ROUND_PODS: None if step.round is None else step.round_pods or "",
        }
        # None leaves a key as it is (in a merge patch it would delete it).
        annotations = {key: value for key, value in wanted.items() if value is not None}
        if not step.flags:
            self._annotate(annotations)
            return
        # Each flag is guarded by its own precondition: one that lands while the stash is
        # refused (409) leaves a state the delete's flag-then-409 path leaves too.
        targets = step.flags
        _, answers = together(
            lambda: self._annotate(annotations), lambda: [self._flag(t) for t in targets]
        )
        for target, answer in zip(targets, answers, strict=True):
            self._flagged(target, answer)

    def _flag(self, target: steps.PodTarget) -> Pod | NotFound | None:
        """The keep-snapshot flag, CAS on the pod the gate verified (Conflict: re-read), else
        best-effort (None: a lost flag costs a pull on wake). Reads only `target`."""
        flag = {k.ANN_KEEP_SNAPSHOT: k.TRUE}
        meta = {"uid": target.uid, "resourceVersion": target.resource_version, "annotations": flag}
        try:
            return self.kube.patch_pod(self.ref.namespace, target.name, {"metadata": meta})
        except NotFound as gone:
            return gone
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

    def _flagged(self, target: steps.PodTarget, answer: Pod | NotFound | None) -> str | None:
        """Fold a flag's answer into the view: the version to delete the pod at (None: gone)."""
        self.flag_tried.add(target.uid)
        if isinstance(answer, NotFound):
            self._drop_pod(target.name)
            return None
        if answer is None:
            return target.resource_version
        self._replace_pod(answer)
        return answer.metadata.resource_version or target.resource_version

    def flag_and_delete(self, step: steps.FlagAndDelete) -> None:
        ns = self.ref.namespace
        for target in step.pods:
            rv: str | None = target.resource_version
            if target.needs_flag and target.uid not in self.flag_tried:
                rv = self._flagged(target, self._flag(target))
                if rv is None:
                    continue
            # uid: never a newer pod under the name; resourceVersion: only the pod as verified.
            # The count is ReportReleased's: a lost answer to this DELETE would lose it.
            deleted = self.kube.delete_pod(ns, target.name, uid=target.uid, resource_version=rv)
            self._drop_pod(target.name)
            if deleted:
                self.deleted += 1
                observe_seat_freed(self.ref, target.name, self.report, now=datetime.now(UTC))

    def persist_waking(self, step: steps.PersistWaking) -> None:
        self._write_phase(Phase.WAKING)
        log.info("wake engaged: phase Waking", set=str(self.ref))
        # Only the CAS winner gets here; the version it wrote names the occurrence.
        event = lifecycle.waking(self.set, hint=self.set.hint, now=self.now)
        if step.stamp_started:
            self._stamp_start()
        lifecycle.emit(self.publisher, event)

    def _stamp_start(self) -> None:
        """The wake's start (the sweep's deadline clock), sent beside the main pod's create.
        Best-effort: until it lands the sweep's clock is the pod's creation."""
        patch = {"metadata": {"annotations": {k.ANN_WAKE_STARTED: format_rfc3339(self.now)}}}
        pending = beside(lambda: self.kube.patch_set(self.ref, patch))
        self.stamp = (pending, self.set.metadata.resource_version)

    def _settle_stamp(self, *, quiet: bool = False) -> None:
        """Wait for the start stamp in flight; take the set it returns unless the run has
        read or written the set since. `quiet`: the run is already failing, so no error raises."""
        if self.stamp is None:
            return
        (pending, base), self.stamp = self.stamp, None
        try:
            stamped = pending.result()
        except Exception as e:
            if not quiet and not isinstance(e, TransientError | NotFound | AdmissionDenied):
                raise
            log.warning("could not stamp the wake start", set=str(self.ref), error=str(e))
            return
        cs = self.cs
        if cs is not None and cs.metadata.resource_version == base:
            self.cs = stamped

    def create_main(self, step: steps.CreateMain) -> None:
        ns = self.ref.namespace
        body = self.seats.restore_pod(self.set, step.body) if self.seats is not None else step.body
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
            gated=k.GATE_SEAT_ORDER in pod.scheduling_gates,
        )

    def drop_snapshot(self, step: steps.DropSnapshot) -> None:
        assert self.registry is not None
        if self.registry.drop_snapshot(step.vm) is False:
            # Shared with another tag, which a delete would take too; a stale one is harmless.
            log.warning("kept a shared :hibernate manifest", set=str(self.ref), vm=step.vm)
        self.dropped.add(step.vm)

    def clear_stale_hint(self, step: steps.ClearStaleHint) -> None:
        self._annotate(_RELEASE_RECORD)
        log.info("cleared a stale hibernated-on-node hint", set=str(self.ref), reason=step.reason)

    def reread_main(self, step: steps.RereadMain) -> None:
        fresh = self.kube.get_pod(self.ref.namespace, step.name)
        alive = fresh is not None and not fresh.terminating
        self.reread[step.uid] = alive
        if fresh is not None and alive:
            self._replace_pod(fresh)
            self.reread[fresh.metadata.uid or ""] = True

    def adopt_into_line(self, step: steps.JoinLine) -> None:
        assert self.seats is not None  # decided only with the fair order on
        self.cs, pod = self.seats.adopt(
            self.ref, self.set, pod_name=step.pod_name, pod_uid=step.pod_uid, since=step.since
        )
        self._replace_pod(pod)

    def complete_wake(self, step: steps.CompleteWake) -> None:
        cs = self.set
        main = main_pod(self.pods)
        pod_uid = (main.metadata.uid if main is not None else None) or ""
        # One CAS: the hint goes and the report becomes owed in the same write.
        self._annotate(
            {
                **_RELEASE_RECORD,
                k.ANN_WAKE_STARTED: None,
                k.ANN_LAST_WAKE: format_rfc3339(self.now),
                k.ANN_LAST_WAKE_POD: pod_uid or None,
                k.ANN_WAKE_REPORT_OWED: owed.wake_owed_value(step.placement, pod_uid, cs.hint),
                k.ANN_SEAT_WAIT: None,
            }
        )
        self.completed_wake = True
        self._observe_wake(cs, step.placement)
        # The seat is settled: the next in line may try (the hand-off at bind may be missed).
        self.tend_line("completed")

    def _observe_wake(self, before: CocoonSet, placement: str) -> None:
        """The wake's durations, from the records the CAS just cleared: only its winner gets
        here, so each wake is observed once. A record that does not parse is no sample."""
        ns = self.ref.namespace
        with contextlib.suppress(ValueError):  # also when no start was recorded
            started = parse_rfc3339(before.metadata.annotations.get(k.ANN_WAKE_STARTED, ""))
            waited = (self.now - started).total_seconds()
            log.observe(k.METRIC_WAKE_DURATION, waited, namespace=ns, placement=placement)
        wait = SeatWait.decode(before.metadata.annotations.get(k.ANN_SEAT_WAIT))
        if wait is not None:
            log.observe(k.METRIC_SEAT_WAIT, (self.now - wait.since).total_seconds(), namespace=ns)

    def report_released(self, step: steps.ReportReleased, beside: Phase | None = None) -> None:
        """`beside`: the phase written at once; the Event is named by the round and the phase
        is a CAS, so either may land alone and the next decision finishes the other."""
        before = self.set
        if beside is None:
            self._release_event(before, step)
        else:
            together(lambda: self._write_phase(beside), lambda: self._release_event(before, step))
        cs = self.set
        event = lifecycle.released(
            cs, deleted_pods=step.pods, hint=cs.hint, now=self.now, occurrence=f"g{step.round}"
        )
        lifecycle.publish(self.publisher, event)
        # No precondition: every reporter writes the same value (a newer round's stays owed).
        self._annotate({k.ANN_RELEASE_REPORTED: step.round}, cas=False)

    def _release_event(self, cs: CocoonSet, step: steps.ReportReleased) -> None:
        """The round's SeatReleased, whose create decides the count; reads `cs` as passed (it
        may run beside the phase write)."""
        identity = owed.release_identity(cs, step.round)
        n = len(step.pods)
        # No pods recorded: cocoon-operator's own slot release deleted them.
        what = f"deleted {n} pod(s)" if n else "cocoon-operator deleted the pods"
        created = self.required_event(
            k.REASON_SEAT_RELEASED,
            f"Snapshot verified in the registry; {what} to free the seat "
            f"(round {step.round}, hint node: {cs.hint or 'none'})",
            key=identity,
            on=cs,
        )
        if created and n:
            self._count(k.METRIC_PODS_DELETED, n)

    def report_woken(self, step: steps.ReportWoken) -> None:
        cs, uid = self.set, step.pod_uid
        requester = cs.metadata.annotations.get(k.ANN_WAKE_REQUESTED_BY)
        asked = f", requested by {requester}" if requester else ""
        created = self.required_event(
            k.REASON_WAKE_COMPLETED,
            f"Restored from the hibernation snapshot (placement: {step.placement}, "
            f"hint node: {step.hint or 'none'}{asked})",
            key=owed.wake_identity(cs, uid),
        )
        if created:
            self._count(k.METRIC_WAKE, placement=step.placement)
        node = next((p.spec.node_name for p in self.pods if p.metadata.uid == uid), None)
        event = lifecycle.woken(
            cs, placement=step.placement, node=node, hint=step.hint, now=self.now, occurrence=uid
        )
        lifecycle.publish(self.publisher, event)
        # CAS: only this occurrence's marker goes, and its requester (the next wake's is new).
        self._annotate({k.ANN_WAKE_REPORT_OWED: None, k.ANN_WAKE_REQUESTED_BY: None})

    def required_event(
        self,
        reason: str,
        message: str,
        *,
        key: str,
        type: str = "Normal",
        on: CocoonSet | None = None,
    ) -> bool:
        """An Event named by `key` about `on` (default: the set); True when this call created
        it. A failure fails the invocation, so an owed report stays owed."""
        about = on if on is not None else self.set
        return self.kube.emit_event(about, reason=reason, message=message, type=type, key=key)

    def _count(self, metric: str, n: int = 1, **labels: str) -> None:
        log.count(metric, n, namespace=self.ref.namespace, cocoonset=self.ref.name, **labels)

    # --- the seat economy's part of a wake ----------------------------------------

    def tend_line(self, why: str) -> None:
        if self.seats is not None:
            self.seats.tend(self.ref, main_pod(self.pods), why)

    def reclaim_seat(self, step: steps.ReportNoCapacity | steps.WaitInLine) -> str:
        """Try to take an idle seat for this waiting wake; a note for the log."""
        if not self.reclaim or self.seats is None:
            return ""

        def start_release(ref: SetRef) -> Outcome:
            # The victim's release, now rather than on its next event.
            kin = (self.kube, self.registry, self.now, self.settings, self.seats, self.publisher)
            return _Run(ref, *kin, reclaim=False).run()

        return self.seats.reclaim(self.ref, self.set, step.pod_uid, start_release)


_ACTS: dict[type[Any], Callable[[_Run, Any], None]] = {
    steps.ProbeRegistry: _Run.probe,
    steps.CheckSharedNames: _Run.check_shared,
    steps.DiscardSnapshot: _Run.discard_snapshot,
    steps.RequestHibernation: _Run.stamp_pods,
    steps.StampGeneration: _Run.stamp_pods,
    steps.SetPhase: _Run.set_phase,
    steps.Stash: _Run.stash,
    steps.FlagAndDelete: _Run.flag_and_delete,
    steps.PersistWaking: _Run.persist_waking,
    steps.CreateMain: _Run.create_main,
    steps.DropSnapshot: _Run.drop_snapshot,
    steps.CompleteWake: _Run.complete_wake,
    steps.JoinLine: _Run.adopt_into_line,
    steps.ReportReleased: _Run.report_released,
    steps.ReportWoken: _Run.report_woken,
    steps.ClearStaleHint: _Run.clear_stale_hint,
    steps.RereadMain: _Run.reread_main,
}
_ENDS: dict[type[Any], Callable[[_Run, Any], Outcome]] = {
    steps.Done: _Run.end_done,
    steps.Wait: _Run.end_wait,
    steps.NotOurs: _Run.end_not_ours,
    steps.Retry: _Run.end_retry,
    steps.Refuse: _Run.end_refuse,
    steps.ReportNoCapacity: _Run.end_no_capacity,
    steps.WaitInLine: _Run.end_wait_in_line,
    steps.SharedVMName: _Run.end_shared,
    steps.LostSnapshot: _Run.end_lost,
}


def reconcile_set(
    ref: SetRef,
    *,
    kube: KubeApi,
    registry: SnapshotRegistry | None,
    settings: Settings | None = None,
    now: datetime | None = None,
    hook: StepHook | None = None,
    publisher: PublisherArg = FROM_SETTINGS,
    report: Report | None = None,
) -> Outcome:
    """Take every next safe step for one set. `registry=None`: a release or wake refuses
    (ConfigError). `hook` runs before each effect (tests engineer races with it); `report`
    times the seat-freed histogram when this run's DELETE of the main pod wins."""
    return _Run.start(ref, kube, registry, settings, now, hook, publisher, report).run()


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
    `requester` (as authenticated where the request entered) is named in its Events."""
    cs = kube.get_set(ref)
    if cs is None:
        return Outcome(ref, OutcomeResult.NOT_FOUND, "the set does not exist")
    if not released_seat_evidence(cs):
        # Gated like the wake itself: a set edited to retain while released is still restored.
        policy = cs.spec.hibernate_policy.value
        why = f"hibernatePolicy={policy}: wake requests are for release-policy sets"
        return Outcome(ref, OutcomeResult.NOT_OURS, why)
    did: tuple[str, ...] = ()
    # Pods not older than the set as read here: the write below changes no pod, and a
    # bound at its own revision would wait for the pods' watch cache to hear of it.
    read_at = cs.metadata.resource_version
    if cs.spec.suspend:
        # Desired state: no precondition, so concurrent requests all succeed and agree.
        who = requester or "an unnamed caller"
        annotations = {k.ANN_WAKE_REQUESTED_BY: who}
        patch = {"spec": {"suspend": False}, "metadata": {"annotations": annotations}}
        try:
            cs = kube.patch_set(ref, patch)
        except AdmissionDenied as e:
            # cocoon-webhook validates every spec change: told once, acknowledged.
            report_refusal(kube, cs, "Unsuspend", e)
            return Outcome(ref, OutcomeResult.REFUSED, f"Unsuspend: {e.server_message}")
        did = ("Unsuspend",)
        # Best-effort: who asked is also on the set, and the unsuspend has landed.
        try:
            kube.emit_event(
                cs,
                reason=k.REASON_WAKE_REQUESTED,
                message=f"Wake requested by {who}",
                key=f"{cs.metadata.resource_version}",
            )
        except CocoonError as e:
            log.warning("could not record who requested the wake", set=str(ref), error=str(e))
    out = _Run.start(ref, kube, registry, settings, now, hook, publisher).run(cs, pods_at=read_at)
    return replace(out, steps=did + out.steps)
