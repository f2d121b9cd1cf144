"""The release and wake state machines as pure decisions: `decide(observed)` returns the
one next step from the set, its owned pods and what this invocation learned; no clock,
network or environment. The invariants they keep: docs/design.md#invariants.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import TypeGuard

from shared import constants as k
from shared.enums import CocoonSetPhase as Phase
from shared.enums import LifecycleState
from shared.models import CocoonSet, Pod
from shared.names import recorded_vm_names, vm_name_for_pod, vm_names
from shared.reconcile import steps
from shared.reconcile.mainpod import build_main_pod
from shared.reconcile.owed import release_owed, round_to_stamp, wake_owed
from shared.reconcile.steps import Probe, Step

NO_REGISTRY = "COCOON_REGISTRY_BASE is not set: refusing to release or wake without a registry"


@dataclass(frozen=True)
class Observed:
    """Everything a decision may look at: a fresh read plus this invocation's findings."""

    cs: CocoonSet
    pods: tuple[Pod, ...]
    # `<vm>:hibernate` HEAD answers of this invocation (absent key = not asked yet).
    probes: Mapping[str, Probe] = field(default_factory=dict)
    dropped: frozenset[str] = frozenset()  # VMs whose `:hibernate` this invocation deleted
    reread: Mapping[str, bool] = field(default_factory=dict)  # main pod uid -> alive (ghosts)
    registry_configured: bool = True
    # This invocation cleared the hint (the in-flight marker): the phase still gets written.
    completed_wake: bool = False
    seat_order: bool = False  # COCOON_SEAT_ORDER=gate: restore pods wait in their pool's line
    operator_present: bool = False  # COCOON_OPERATOR=present: a cocoon-operator runs too
    # Legacy-form VM names -> the other sets that record them (absent key = not asked yet).
    shared: Mapping[str, tuple[str, ...]] = field(default_factory=dict)


def owned_pods(cs: CocoonSet, pods: tuple[Pod, ...]) -> tuple[Pod, ...]:
    """The pods `cs` controls: a label is only a hint, and a labelled stranger is never
    flagged, stamped, gated on, stashed or deleted."""
    return tuple(p for p in pods if p.controlled_by(cs.metadata.uid))


def decide(o: Observed) -> Step:
    cs = o.cs
    o = replace(o, pods=owned_pods(cs, o.pods))
    if cs.metadata.deletion_timestamp is not None:
        return steps.NotOurs("the set is being deleted")
    # A completed wake whose report a crash left owed goes out first.
    owed_wake = wake_owed(cs)
    if owed_wake is not None:
        return owed_wake
    seen = cs.status.observed_generation or 0
    if o.operator_present and seen < cs.generation:
        # No act for a generation the operator's cache has not seen: it could undo it from there.
        behind = f"waiting for cocoon-operator to observe generation {cs.generation}"
        return _discard_for_operator(o) or steps.Wait(
            f"{behind} (status.observedGeneration={seen})"
        )
    # Suspend before the failed main, as today's operator: a suspend skips only terminal pods.
    if cs.suspended:
        if cs.is_release:
            return decide_release(o)
        return steps.NotOurs(
            f"hibernatePolicy={cs.spec.hibernate_policy.value}: the seat stays taken"
        )
    main = main_pod(o.pods)
    if main is not None and main.failed and released_seat_evidence(cs):
        # The operator's `Failed`: written once, never flipped back (that would flap with it).
        if cs.phase is not Phase.FAILED:
            why = main.annotations.get(k.ANN_LIFECYCLE_MESSAGE) or main.status.phase or "failed"
            return steps.SetPhase(Phase.FAILED, f"main pod {main.name} failed: {why}")
        return steps.NotOurs(f"main pod {main.name} failed: the operator's to triage")
    return decide_wake(o)


def _discard_for_operator(o: Observed) -> Step | None:
    """The image-change discard even for a generation the operator has not seen: it tries
    the discard first, so a registry refusing its DELETE by tag keeps it behind for ever."""
    cs = o.cs
    if cs.suspended or not cs.image_changed_since_release:
        return None
    step = decide_wake(o) if main_pod(o.pods) is None else None
    return step if isinstance(step, steps.ProbeRegistry | steps.DiscardSnapshot) else None


# --- release ---------------------------------------------------------------------------


def _hibernation_pending(cs: CocoonSet, pod: Pod) -> str | None:
    """Why `pod` does not yet pass the annotation half of the gate (None = it does)."""
    if not pod.vm_name:
        return f"pod {pod.name} has no VM name yet"
    if pod.lifecycle_state is LifecycleState.FAILED:
        # Sticky until the pod is recreated: the release waits, as the operator does.
        why = pod.annotations.get(k.ANN_LIFECYCLE_MESSAGE) or "no message"
        return f"vk-cocoon reports pod {pod.name} failed: {why}"
    if pod.lifecycle_state is not LifecycleState.HIBERNATED:
        state = pod.annotations.get(k.ANN_LIFECYCLE_STATE, "") or "unknown"
        return f"pod {pod.name} is {state}, not hibernated"
    if pod.lifecycle_generation < cs.generation:
        # An earlier round's snapshot: its tag proves nothing about this round.
        return (
            f"pod {pod.name} hibernated for generation {pod.lifecycle_generation}, "
            f"the set is at {cs.generation}"
        )
    return None


def unbound_restore(pod: Pod) -> bool:
    """A wake's restore pod still waiting for a seat: nothing to hibernate, and vk-cocoon
    never reports it, so a release waiting for it would never settle."""
    return (
        pod.annotations.get(k.ANN_RESTORE) == k.TRUE
        and not pod.spec.node_name
        and not pod.annotations.get(k.ANN_VM_ID)
    )


def _stay_suspending(cs: CocoonSet, reason: str) -> Step:
    if cs.phase is Phase.FAILED:
        # The operator's suspend timeout: its verdict to revisit, never ours to flip back.
        return steps.Wait(f"{reason} (phase Failed: the suspend timed out)")
    if cs.phase is not Phase.SUSPENDING:
        return steps.SetPhase(Phase.SUSPENDING, reason)
    return steps.Wait(reason)


def _probed(o: Observed, vms: Sequence[str]) -> Step | None:
    """Probe the VMs not asked yet; on a registry error, fail closed (never guess absent)."""
    unknown = tuple(vm for vm in vms if vm not in o.probes)
    if unknown:
        return steps.ProbeRegistry(unknown)
    failed = tuple(vm for vm in vms if o.probes[vm] is Probe.ERROR)
    if failed:
        return steps.Retry(f"registry error checking {', '.join(failed)}:{k.TAG_HIBERNATE}", failed)
    return None


def _shared_name(o: Observed, names: tuple[str, ...]) -> Step | None:
    """Ask who else records these legacy-form names, or stop on one that is shared."""
    unknown = tuple(vm for vm in names if vm not in o.shared)
    if unknown:
        return steps.CheckSharedNames(unknown)
    for vm in names:
        if o.shared[vm]:
            return steps.SharedVMName(vm, o.shared[vm])
    return None


def stash_names(cs: CocoonSet, pods: tuple[Pod, ...]) -> str:
    """Status agents' VM names ∪ previously stashed ∪ live pods' VM names, sorted."""
    return ",".join(sorted(cs.recorded_vm_names | {p.vm_name.strip() for p in pods} - {""}))


def _released_by_operator(o: Observed) -> bool:
    """A release record with no round of its generation: only cocoon-operator's slot release
    leaves one (ours stamps before any delete). A spec edit of a released set bumps the
    generation too: an image record other than the spec's image says that is what happened."""
    cs = o.cs
    return o.operator_present and bool(cs.hint) and not cs.image_changed_since_release


def decide_release(o: Observed) -> Step:
    cs = o.cs
    if not o.registry_configured:
        return steps.Refuse(NO_REGISTRY)
    active = [p for p in o.pods if not p.terminating]

    # 1. Request hibernation, the generation stamp in the same patch (vk-cocoon echoes it).
    unflagged = tuple(
        sorted(
            p.name
            for p in active
            if (p.annotations.get(k.ANN_HIBERNATE) != k.TRUE or p.generation_stamp < cs.generation)
            and not unbound_restore(p)
        )
    )
    if unflagged:
        return steps.RequestHibernation(unflagged, cs.generation)

    # Terminal pods are kept for triage, terminating ones are leaving: nothing else = released.
    deletable = [p for p in active if not p.terminal]
    if not deletable:
        if cs.phase is not Phase.SUSPENDED:
            # The seat is free: a round's report owed goes out beside the phase.
            return steps.SetPhase(
                Phase.SUSPENDED, "no owned pod holds a seat", report=release_owed(cs)
            )
        stamp = round_to_stamp(cs, ())
        if stamp is not None and _released_by_operator(o):
            # Released by cocoon-operator's slot release: book the round so it is reported once.
            return steps.Stash(stash_names(cs, o.pods), None, round=stamp[0], round_pods=stamp[1])
        owed = release_owed(cs)
        if owed is not None:
            return owed
        return steps.Done("released")

    # 2. The gate, from this fresh read: annotations first (free), then the registry.
    gated = [p for p in o.pods if p.managed and not p.terminal and not p.terminating]
    for pod in gated:
        if unbound_restore(pod):
            continue  # its state is the `:hibernate` it was to restore from (probed below)
        why = _hibernation_pending(cs, pod)
        if why is not None:
            return _stay_suspending(cs, why)
    vms = sorted({p.vm_name for p in gated})
    probed = _probed(o, vms)
    if probed is not None:
        return probed
    absent = [vm for vm in vms if o.probes[vm] is Probe.ABSENT]
    if absent:
        return _stay_suspending(cs, f"snapshot {absent[0]}:{k.TAG_HIBERNATE} not in the registry")
    # A v0.3.0 name (not derived from the pod) may be another tenant's: its tag proves nothing.
    unproven = tuple(
        sorted({p.vm_name for p in gated if p.vm_name != vm_name_for_pod(cs.namespace, p.name)})
    )
    shared = _shared_name(o, unproven)
    if shared is not None:
        return shared

    # 3. Stash before the first delete (one write), the keep-snapshot flags beside it.
    targets = tuple(
        steps.PodTarget(
            name=p.name,
            uid=p.metadata.uid or "",
            resource_version=p.metadata.resource_version or "",
            needs_flag=p.annotations.get(k.ANN_KEEP_SNAPSHOT) != k.TRUE,
        )
        for p in sorted(deletable, key=lambda p: p.name)
    )
    names = stash_names(cs, o.pods)
    main = next((p for p in deletable if p.is_main), None)
    hint = main.spec.node_name if main is not None and main.spec.node_name else None
    # The image the snapshot was taken from, beside the hint (today's operator's record).
    image = main.annotations.get(k.ANN_IMAGE) or None if main is not None else None
    if image == cs.hibernated_image:
        image = None
    # The round goes in the same write: the durable evidence a SeatReleased will be owed.
    stamp = round_to_stamp(cs, (p.name for p in deletable))
    if (
        (names and names != cs.metadata.annotations.get(k.ANN_DELETE_VM_NAMES, ""))
        or (hint is not None and hint != cs.hint)
        or image is not None
        or stamp is not None
    ):
        rnd, rnd_pods = stamp if stamp is not None else (None, None)
        flags = tuple(t for t in targets if t.needs_flag)
        return steps.Stash(names, hint, round=rnd, round_pods=rnd_pods, flags=flags, image=image)

    # 4-6. Flag (if the stash did not), delete (uid precondition); the phase settles next.
    return steps.FlagAndDelete(targets)


# --- wake ------------------------------------------------------------------------------


def main_pod(pods: tuple[Pod, ...]) -> Pod | None:
    """The owned main pod that is not being deleted."""
    return next((p for p in pods if p.is_main and not p.terminating), None)


def _restore(main: Pod | None) -> TypeGuard[Pod]:
    """A restore pod no hibernate request has reached."""
    return (
        main is not None
        and main.annotations.get(k.ANN_RESTORE) == k.TRUE
        and main.annotations.get(k.ANN_HIBERNATE) != k.TRUE
    )


def unfinished_wake(cs: CocoonSet, main: Pod | None) -> bool:
    """A restore whose `Waking` phase a stale status write overwrote."""
    return _restore(main) and bool(cs.hint)


def unbooked_wake(cs: CocoonSet, main: Pod | None) -> bool:
    """A restore cocoon-operator completed first (hint gone) not booked in `last-wake-pod`:
    else the idle sweep and reclaim would take the just-woken set as idle."""
    return (
        _restore(main)
        and not cs.hint
        and main.live
        and bool(main.metadata.uid)
        and cs.metadata.annotations.get(k.ANN_LAST_WAKE_POD) != main.metadata.uid
    )


def main_vm_names(cs: CocoonSet) -> tuple[str, ...]:
    """The names the main VM's snapshot may be under, first to try first (never a pod's)."""
    return recorded_vm_names(cs.namespace, cs.name, 0, cs.recorded_vm_names)


def _legacy(cs: CocoonSet, vm: str) -> tuple[str, ...]:
    return () if vm == vm_names(cs.namespace, cs.name, 0)[0] else (vm,)


def released_seat_evidence(cs: CocoonSet) -> bool:
    """Whether a wake may touch `cs`: release policy, or state a release left behind (so a
    release->retain edit while suspended still restores)."""
    return cs.is_release or bool(cs.hint) or cs.phase is Phase.WAKING


def decide_wake(o: Observed) -> Step:
    cs = o.cs
    hint = cs.hint
    phase = cs.phase
    main = main_pod(o.pods)
    unbooked = unbooked_wake(cs, main) and cs.is_release
    waking = phase is Phase.WAKING or unfinished_wake(cs, main) or o.completed_wake or unbooked
    engaged = waking or phase is Phase.SUSPENDED or (phase is Phase.SUSPENDING and bool(hint))
    if not engaged:
        # A wake the normal flow took over: no WakeCompleted will name its requester, so forget it.
        normal = steps.NotOurs(
            f"phase {phase.value if phase else 'unset'}: the normal flow's",
            forget_requester=not (hint or cs.hibernated_image)
            and k.ANN_WAKE_REQUESTED_BY in cs.metadata.annotations,
        )
        if hint and main is not None and _stale_hint_suspect(main):
            # The normal flow moved the phase on, but a never-completed release's hint is left.
            step = _check_main_beside_hint(o, main)
            return normal if isinstance(step, steps.Retry | steps.NotOurs) else step
        return normal
    if not released_seat_evidence(cs):
        return steps.NotOurs("hibernatePolicy=retain and no released seat to restore")
    if not o.registry_configured:
        return steps.Refuse(NO_REGISTRY)
    lagging = tuple(
        sorted(p.name for p in o.pods if not p.terminating and p.generation_stamp < cs.generation)
    )
    if lagging:
        # As the operator on every pass, or a later hibernate report would be stale.
        return steps.StampGeneration(lagging, cs.generation)

    if main is None:
        names = main_vm_names(cs)
        probed = _probed(o, names)  # never a fresh boot over a snapshot
        if probed is not None:
            return probed
        present = [vm for vm in names if o.probes[vm] is Probe.PRESENT]
        vm0 = present[0] if present else names[0]
        shared = _shared_name(o, _legacy(cs, vm0)) if present else None
        if shared is not None:
            return shared
        if cs.image_changed_since_release:
            # Checked before "lost", so a discard a crash cut short is finished, not reported.
            return steps.DiscardSnapshot(vm0, cs.hibernated_image, cs.spec.agent.image)
        if not present:
            if hint or cs.hibernated_image:
                # Released (a hint or image is recorded): the VM's state was in that tag.
                return steps.LostSnapshot(vm0)
            return steps.NotOurs(
                "no snapshot: suspended before first boot (a fresh boot is the normal flow's)",
                forget_requester=k.ANN_WAKE_REQUESTED_BY in cs.metadata.annotations,
            )
        if phase is not Phase.WAKING:
            return steps.PersistWaking(stamp_started=True)
        leaving = next((p for p in o.pods if p.is_main and p.terminating), None)
        if leaving is not None:
            # Its name is the restore pod's: a create now only answers AlreadyExists.
            return steps.Retry(f"old main {leaving.name} still terminating: retry shortly")
        return steps.CreateMain(build_main_pod(cs, hint=hint, vm=vm0))

    if waking:
        # A SeatReleased a crash left owed goes out now: after the create, which it never blocks.
        owed = release_owed(cs)
        if owed is not None:
            return owed
        if not main.live:
            if phase is not Phase.WAKING:
                stamp = k.ANN_WAKE_STARTED not in cs.metadata.annotations
                return steps.PersistWaking(stamp_started=stamp)
            uid = main.metadata.uid or ""
            if (
                o.seat_order
                and not main.spec.node_name
                and main.annotations.get(k.ANN_RESTORE) == k.TRUE
                and k.LABEL_SEAT_LINE not in main.labels
            ):
                # The operator's own restore pod: outside the line it would race the gated waiters.
                return steps.JoinLine(main.name, uid, main.metadata.creation_timestamp or "")
            if k.GATE_SEAT_ORDER in main.scheduling_gates:
                return steps.WaitInLine(pod_uid=uid, pod_name=main.name)
            message = main.unschedulable_message()
            if message is not None:
                return steps.ReportNoCapacity(pod_uid=uid, message=message, pod_name=main.name)
            return steps.Wait(f"restoring {main.name}: VM not live yet")
        # The pod's VM only if one of the set's own names: an annotation must not steer the delete.
        own = vm_names(cs.namespace, cs.name, 0)
        vm0 = main.vm_name if main.vm_name in own else main_vm_names(cs)[0]
        shared = _shared_name(o, _legacy(cs, vm0))
        if shared is not None:
            return shared
        if vm0 not in o.dropped:
            return steps.DropSnapshot(vm0)
        if hint or unbooked:
            # Completed by the operator first: the pod's preferred affinity still names the hint.
            want = hint or main.preferred_node
            placement = k.PLACEMENT_HINT_NODE if main.spec.node_name == want else k.PLACEMENT_POOL
            return steps.CompleteWake(placement)
        implied = Phase.RUNNING if main.ready else Phase.PENDING
        if phase is not implied:
            return steps.SetPhase(implied, "the restored VM is live")
        return steps.Done("woken")

    if phase in (Phase.SUSPENDED, Phase.SUSPENDING) and hint and not main.terminal:
        return _check_main_beside_hint(o, main)

    return steps.NotOurs("nothing released to restore (retain placeholder or kept terminal pod)")


def _stale_hint_suspect(main: Pod) -> bool:
    """A main no wake created (no restore marker) beside a hint: the release never completed."""
    return not main.terminal and main.annotations.get(k.ANN_RESTORE) != k.TRUE


def _check_main_beside_hint(o: Observed, main: Pod) -> Step:
    """The main may be a ghost of the deleted pod (a stale cache): re-read it."""
    uid = main.metadata.uid or ""
    alive = o.reread.get(uid)
    if alive is None:
        return steps.RereadMain(main.name, uid)
    if not alive:
        return steps.Retry(f"{main.name} is a ghost of the released pod: retry shortly")
    if _stale_hint_suspect(main):
        # Stashed, but the delete lost and the user unsuspended: no wake will come.
        return steps.ClearStaleHint(f"{main.name} is alive and was never released: stale hint")
    return steps.NotOurs(f"{main.name} is alive: an in-place unsuspend wakes it")
