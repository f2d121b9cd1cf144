"""cocoon-operator as its source behaves, with an informer cache that can lag or stall.

The simulator's default operator (:func:`devstack.sim_normal_flow.decide_operator`)
plays only the normal flow. The real operator (cocoonstack/cocoon-operator at
6151b05, cocoon-common v0.3.0) also runs its **own** slot release and wake for
every ``hibernatePolicy: release`` set, entered from ``Reconcile`` before the
normal flow (``cocoonset/reconciler.go``). This module plays that reconcile,
branch by branch, for main-only sets (sub-agents and toolboxes are not
simulated):

* ``syncCocoonSetGeneration`` first: the *cached* generation is stamped on every
  owned pod whose stamp differs (so a stale cache stamps backwards);
* a failed main is ``Failed`` (``handleFailedMainAgent``);
* suspended + release: ``reconcileSuspendRelease`` (``slotrelease.go``): no pods
  -> ``Suspended``; else ``hibernate=true`` on every pod, wait (``Suspending``,
  requeue 5 s) until every managed pod reports ``hibernated`` for the cached
  generation and ``HEAD :hibernate`` answers present, then stash the VM names,
  write the hint, flag keep-snapshot and delete every pod (no precondition),
  ``Suspended``;
* suspended + retain: ``reconcileSuspend`` (``suspend.go``);
* ``reconcileWake`` (``slotrelease.go``) on ``Waking``/``Suspended``/
  ``Suspending``+hint: no main -> probe the registry, ``Waking``, create the
  restore-marked main with a preferred affinity for the hint node; not live ->
  ``WakeNoCapacity`` while unschedulable, requeue 5 s; live -> ``DELETE
  /v2/<vm>/manifests/hibernate`` **by tag** (Distribution answers 400, so on it
  this arm never gets past here), clear the hint, derive the phase;
* then the normal flow: clear ``hibernate``, delete a drifted main, create the
  main *without* restore intent (``createMainAgent``: intent only comes from
  CocoonHibernation CRs), ``Pending`` until Ready, then the derived phase.

Writes are the operator's: merge patches built from the *cached* object with no
resourceVersion (``commonk8s.Patch``/``PatchStatus`` use ``client.MergeFrom``),
so a status patch only carries the fields that differ from the cache, and
``status.observedGeneration`` is the cached ``metadata.generation``.

When it reconciles: on a set generation change (``GenerationChangedPredicate``),
on any relevant change of an owned pod (``podRelevantChange``: create, delete,
deletion stamp, phase, Ready, labels, annotations), on ``Requeue: true`` (the
next step) and on ``RequeueAfter`` (5 s, its fallback). A thread polls the API
every ``interval`` (20 ms by default) to play the informers' watch.

**Lag.** ``lag`` delays the set informer's view and ``pod_lag`` the pod
informer's (a reconcile sees the sets as they were ``lag`` seconds ago: two
informers lag independently, and a stale set beside fresh pods is the
dangerous view). ``pause()`` stops it with its view frozen (SIGSTOP, an
overloaded informer, a partition); ``resume(stale_sets_for=S)`` wakes it with
the pod informer caught up at once but the set informer still frozen for S
seconds, as two informers resuming a backlog independently can be: that is the
interleaving in which the real operator booted a VM fresh over its snapshot.
``restart()`` is a clean restart (fresh caches, nothing queued).
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import requests

from devstack.kubehttp import (
    JSON,
    ApiError,
    ConflictError,
    KubeHTTP,
    NotFoundError,
    pod_path,
    set_path,
)
from devstack.sim_pods import (
    MANIFEST_ACCEPT,
    ann_of,
    condition_keys,
    is_ready,
    key_of,
    labels_of,
    main_pod_body,
    manifest_url,
    meta_of,
    owned_pods,
    patch_annotations,
    pod_spec_drifted,
    pod_terminal,
    record_error,
    repository,
    spec_of,
    terminating,
    unschedulable_message,
)
from devstack.upstream import Upstream, agent_vm_name
from shared import constants as k
from shared.enums import CocoonSetPhase as Phase
from shared.enums import LifecycleState
from shared.models import CocoonSet, Pod, parse_go_int
from shared.reconcile.mainpod import build_main_pod
from shared.reconcile.status import build_status

REQUEUE_AFTER = 5.0  # requeueSuspendPoll / requeueWaitForMain


@dataclass(frozen=True, slots=True)
class View:
    """What the informer caches hold: every set and pod, as of `at`."""

    at: float
    sets: tuple[JSON, ...]
    pods: tuple[JSON, ...]


@dataclass(frozen=True, slots=True)
class OpAction:
    """Something the operator did (for the tests' invariants and the benchmark)."""

    at: float
    kind: str  # stamp, hibernate, delete, create, status, hint, untag, untag-refused, event
    namespace: str
    name: str
    detail: str = ""


class _Requeue(Exception):  # a control-flow signal, as ctrl.Result is
    def __init__(self, after: float) -> None:
        self.after = after


def _vm_live(pod: Mapping[str, Any]) -> bool:
    """vmLive (migrate.go): a vk-assigned VM id and a running container."""
    statuses = (pod.get("status") or {}).get("containerStatuses") or []
    running = any((c.get("state") or {}).get("running") is not None for c in statuses)
    return bool(ann_of(pod).get(k.ANN_VM_ID)) and running


@dataclass
class UpstreamOperator:
    api: KubeHTTP
    registry_url: str
    registry_prefix: str = ""
    interval: float = 0.02
    # How old the set informer's view is, and the pod informer's (seconds).
    lag: float = 0.0
    pod_lag: float = 0.0
    requeue_after: float = REQUEUE_AFTER
    # True plays a registry that deletes tags (the OCI spec's optional DELETE by tag):
    # the DELETE by tag is carried out (here by the digest it names); False sends it
    # to the registry as is (Distribution 2.8 answers 400).
    registry_deletes_tags: bool = False
    # Which generation is played (devstack.upstream): TODAY adds the image record and
    # its discard, the release record's clearing, suspend-first, the kubelet-only
    # terminal rule and the suspend timeout, and names VMs with the hash.
    upstream: Upstream = Upstream.TODAY
    suspend_timeout: float = 180.0
    actions: list[OpAction] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    _history: deque[View] = field(default_factory=deque)
    _paused: bool = False
    _frozen: View | None = None
    _stale_sets_until: float = 0.0
    _fingerprints: dict[tuple[str, str], Any] = field(default_factory=dict)
    _due: dict[tuple[str, str], float] = field(default_factory=dict)
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None
    _lock: threading.Lock = field(default_factory=threading.Lock)

    # -- lifecycle --
    def start(self) -> None:
        self._thread = threading.Thread(target=self._loop, name="upstream-operator", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=10)

    def _loop(self) -> None:
        while not self._stop.is_set():
            try:
                self.step()
            except Exception as err:  # noqa: BLE001 - a bad pass must not end the operator
                self._error(f"pass: {err}")
            self._stop.wait(self.interval)

    def pause(self) -> None:
        """Stop reconciling; the caches keep what they hold now (SIGSTOP)."""
        with self._lock:
            self._frozen = self._history[-1] if self._history else self._read()
            self._paused = True

    def resume(self, *, stale_sets_for: float = 0.0) -> None:
        """Run again: pods caught up at once, sets still stale for `stale_sets_for` seconds."""
        with self._lock:
            self._paused = False
            self._stale_sets_until = time.monotonic() + stale_sets_for

    def restart(self) -> None:
        """A clean restart (SIGTERM, new process): fresh caches, no work queued."""
        with self._lock:
            self._paused = False
            self._frozen = None
            self._stale_sets_until = 0.0
            self._history.clear()
            self._fingerprints.clear()
            self._due.clear()

    # -- the view --
    def _read(self) -> View:
        return View(
            time.monotonic(),
            tuple(self.api.list_items(set_path())),
            tuple(self.api.list_items(pod_path())),
        )

    def view(self) -> View:
        live = self._read()
        now = live.at
        self._history.append(live)
        oldest = now - max(self.lag, self.pod_lag) - 1.0
        while len(self._history) > 1 and self._history[1].at <= oldest:
            self._history.popleft()
        sets, pods = self._as_of(now - self.lag).sets, self._as_of(now - self.pod_lag).pods
        if self._frozen is not None and now < self._stale_sets_until:
            sets = self._frozen.sets
        elif self._frozen is not None:
            self._frozen = None
        return View(now, sets, pods)

    def _as_of(self, at: float) -> View:
        """The newest view read at or before `at` (the oldest kept, if none is that old)."""
        return next((v for v in reversed(self._history) if v.at <= at), self._history[0])

    # -- one pass: every set whose watch fired or whose requeue is due --
    def step(self) -> None:
        with self._lock:
            if self._paused:
                return
            v = self.view()
            now = time.monotonic()
            for cs in v.sets:
                key = key_of(cs)
                owned = owned_pods(cs, v.pods)
                fp = (
                    meta_of(cs).get("generation"),
                    str(meta_of(cs).get("uid") or ""),
                    tuple(sorted(_pod_fingerprint(p) for p in owned)),
                )
                due = self._due.get(key)
                if self._fingerprints.get(key) == fp and (due is None or now < due):
                    continue
                self._fingerprints[key] = fp
                self._due.pop(key, None)
                try:
                    after = self.reconcile(cs, owned)
                except _Requeue as r:
                    after = r.after
                except (NotFoundError, ConflictError) as err:
                    after = 0.0  # the error path: controller-runtime requeues with backoff
                    self._error(f"{key}: {err}")
                except (ApiError, requests.RequestException) as err:
                    after = 0.0
                    self._error(f"{key}: {err}")
                if after is not None:
                    self._due[key] = now + after

    # -- Reconcile (reconciler.go) --
    def reconcile(self, cs: JSON, owned: Sequence[JSON]) -> float | None:
        """One pass over `cs` as cached; the requeue delay (0 = at once), None = none."""
        live = [p for p in owned if not terminating(p)]  # classifyPods skips them
        main = next((p for p in live if labels_of(p).get(k.LABEL_ROLE) == k.ROLE_MAIN), None)
        gen = int(meta_of(cs).get("generation") or 0)
        ns, _ = key_of(cs)
        for p in live:  # syncCocoonSetGeneration: the cached generation, whatever is there
            if parse_go_int(ann_of(p).get(k.ANN_GENERATION, "")) != gen:
                self._patch_pod(p, {k.ANN_GENERATION: str(gen)}, "stamp", str(gen))
        suspend_first = self.upstream is Upstream.TODAY and bool(spec_of(cs).get("suspend"))
        if main is not None and pod_terminal(main) and not suspend_first:
            if pod_spec_drifted(cs, main):
                self._delete(main)
                return 0.0
            self._status(cs, live, Phase.FAILED)
            return None
        if spec_of(cs).get("suspend"):
            if spec_of(cs).get("hibernatePolicy") == "release":
                return self._suspend_release(cs, live, main)
            return self._suspend_retain(cs, live, main)
        handled = self._wake(cs, live, main)
        if handled is not False:
            return handled
        for p in live:  # applyUnsuspend
            if ann_of(p).get(k.ANN_HIBERNATE) == k.TRUE:
                self._patch_pod(p, {k.ANN_HIBERNATE: None}, "unhibernate")
        if main is not None and pod_spec_drifted(cs, main):
            self._delete(main)
            return 0.0
        if main is None:
            # createMainAgent: restore intent only from CocoonHibernation CRs (none here),
            # so the pod boots from the base image whatever the registry holds.
            self._create(ns, main_pod_body(cs, self.upstream), fresh_over=self._tagged(cs))
            return 0.0
        if not is_ready(main):
            self._status(cs, live, Phase.PENDING)
            return self.requeue_after
        self._status(cs, live, None)
        return None

    # -- slotrelease.go --
    def _suspend_release(self, cs: JSON, live: list[JSON], main: JSON | None) -> float | None:
        if not live:
            self._status(cs, live, Phase.SUSPENDED)
            return None
        for p in live:  # applySuspend
            if ann_of(p).get(k.ANN_HIBERNATE) != k.TRUE:
                self._patch_pod(p, {k.ANN_HIBERNATE: k.TRUE}, "hibernate")
        if not self._all_hibernated(cs, live):
            return self._poll_suspend(cs, live)
        self._clear_suspend_deadline(cs)
        names = _stash_names(cs, live)
        if names and names != ann_of(cs).get(k.ANN_DELETE_VM_NAMES, ""):
            self._patch_set(cs, {k.ANN_DELETE_VM_NAMES: names}, "stash")
        if main is not None and self.upstream is Upstream.TODAY:
            image = ann_of(main).get(k.ANN_IMAGE, "")
            self._patch_set(cs, {k.ANN_HIBERNATED_IMAGE: image}, "image", image)
        if main is not None and (node := str((main.get("spec") or {}).get("nodeName") or "")):
            self._patch_set(cs, {k.ANN_HIBERNATED_ON_NODE: node}, "hint", node)
        for p in sorted(live, key=lambda p: key_of(p)[1]):
            if self._terminal(p):
                continue
            if ann_of(p).get(k.ANN_KEEP_SNAPSHOT) != k.TRUE:
                self._patch_pod(p, {k.ANN_KEEP_SNAPSHOT: k.TRUE}, "flag")
            self._delete(p)
        self._status(cs, live, Phase.SUSPENDED)
        return self.requeue_after

    def _terminal(self, pod: JSON) -> bool:
        """meta.IsPodTerminal: today the kubelet's Failed phase only."""
        if self.upstream is Upstream.TODAY:
            return (pod.get("status") or {}).get("phase") == "Failed"
        return pod_terminal(pod)

    def _poll_suspend(self, cs: JSON, live: list[JSON]) -> float:
        """pollSuspend: Suspending, and today past the timeout SuspendTimedOut + Failed."""
        if self.upstream is Upstream.TODAY:
            phase = str((cs.get("status") or {}).get("phase") or "")
            since = ann_of(cs).get(k.ANN_SUSPENDING_SINCE, "")
            try:
                started = datetime.fromisoformat(since.replace("Z", "+00:00"))
            except ValueError:
                started = None
            if phase != Phase.SUSPENDING.value or started is None:
                now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
                self._patch_set(cs, {k.ANN_SUSPENDING_SINCE: now}, "suspending-since")
            elif (datetime.now(UTC) - started).total_seconds() > self.suspend_timeout:
                ns, name = key_of(cs)
                self._record("event", ns, name, f"{k.REASON_SUSPEND_TIMED_OUT}")
                self._status(cs, live, Phase.FAILED)
                return self.requeue_after
        self._status(cs, live, Phase.SUSPENDING)
        return self.requeue_after

    def _clear_suspend_deadline(self, cs: JSON) -> None:
        if self.upstream is Upstream.TODAY and k.ANN_SUSPENDING_SINCE in ann_of(cs):
            self._patch_set(cs, {k.ANN_SUSPENDING_SINCE: None}, "suspending-since")

    def _all_hibernated(self, cs: JSON, live: list[JSON]) -> bool:
        gen = int(meta_of(cs).get("generation") or 0)
        for p in sorted(live, key=lambda p: key_of(p)[1]):
            if ann_of(p).get(k.ANN_MANAGED) != k.TRUE or self._terminal(p):
                continue
            vm = ann_of(p).get(k.ANN_VM_NAME, "")
            if not vm:
                return False
            state = ann_of(p).get(k.ANN_LIFECYCLE_STATE, "")
            seen = parse_go_int(ann_of(p).get(k.ANN_LIFECYCLE_GENERATION, ""))
            if state != LifecycleState.HIBERNATED.value or seen < gen:
                return False
            if not self._head(vm):
                return False
        return True

    def _wake(self, cs: JSON, live: list[JSON], main: JSON | None) -> float | bool | None:
        """reconcileWake: the requeue delay when handled, False when the normal flow's."""
        hint = ann_of(cs).get(k.ANN_HIBERNATED_ON_NODE, "")
        phase = str((cs.get("status") or {}).get("phase") or "")
        waking = phase == Phase.WAKING.value
        suspended = phase == Phase.SUSPENDED.value
        suspending = phase == Phase.SUSPENDING.value and bool(hint)
        cleanup = (
            main is not None
            and ann_of(main).get(k.ANN_RESTORE) == k.TRUE
            and ann_of(main).get(k.ANN_HIBERNATE) != k.TRUE
            and bool(hint)
        )
        waking = waking or cleanup
        if not (waking or suspended or suspending):
            return False
        ns, name = key_of(cs)
        vm0 = agent_vm_name(self.upstream, ns, name, 0)  # VMNameForDeployment
        if main is None:
            if not self._head(vm0):
                return False  # no snapshot: suspended before first boot, a fresh boot
            released = ann_of(cs).get(k.ANN_HIBERNATED_IMAGE, "")
            image = str((spec_of(cs).get("agent") or {}).get("image") or "")
            if self.upstream is Upstream.TODAY and released and released != image:
                # discardReleasedSnapshotOnImageChange: the normal flow boots fresh.
                self._untag(ns, name, vm0)
                self._clear_release_record(cs)
                return False
            self._status(cs, live, Phase.WAKING)
            body = build_main_pod(CocoonSet.model_validate(cs), hint=hint, vm=vm0)
            self._create(ns, body, fresh_over=False)
            return self.requeue_after
        if waking and not _vm_live(main):
            if msg := unschedulable_message(main):
                self._record("event", ns, name, f"WakeNoCapacity: {msg}")
            self._status(cs, live, Phase.WAKING)
            return self.requeue_after
        if waking:
            # Today the tag of the VM the pod runs (meta.ParseVMSpec(main).VMName).
            vm = ann_of(main).get(k.ANN_VM_NAME, "") if self.upstream is Upstream.TODAY else vm0
            self._untag(ns, name, vm or vm0)  # raises on a refusal: the arm stops here
            if hint:
                self._clear_release_record(cs)
            self._status(cs, live, None)
            return 0.0
        if hint and not pod_terminal(main):
            # confirmReleasedDelete: an uncached read tells a ghost from a live pod.
            try:
                fresh = self.api.get(pod_path(ns, key_of(main)[1]))
            except NotFoundError:
                return self.requeue_after
            if terminating(fresh):
                return self.requeue_after
            return False
        return False

    def _clear_release_record(self, cs: JSON) -> None:
        """clearReleaseRecord: the hint, and today the image record with it."""
        if self.upstream is Upstream.TODAY:
            self._patch_set(
                cs, {k.ANN_HIBERNATED_ON_NODE: None, k.ANN_HIBERNATED_IMAGE: None}, "hint", ""
            )
        else:
            self._patch_set(cs, {k.ANN_HIBERNATED_ON_NODE: None}, "hint", "")

    # -- suspend.go (retain) --
    def _suspend_retain(self, cs: JSON, live: list[JSON], main: JSON | None) -> float | None:
        ns, _ = key_of(cs)
        if main is None:
            body = main_pod_body(cs, self.upstream)
            if self._tagged(cs):
                body["metadata"]["annotations"][k.ANN_RESTORE] = k.TRUE
            self._create(ns, body, fresh_over=False)
            return 0.0
        for p in live:
            if ann_of(p).get(k.ANN_HIBERNATE) != k.TRUE:
                self._patch_pod(p, {k.ANN_HIBERNATE: k.TRUE}, "hibernate")
        if self._all_hibernated(cs, live):
            self._status(cs, live, Phase.SUSPENDED)
            return None
        self._status(cs, live, Phase.SUSPENDING)
        return self.requeue_after

    # -- writes, as the operator makes them (merge patches, no resourceVersion) --
    def _patch_pod(
        self, pod: JSON, annotations: Mapping[str, str | None], kind: str, detail: str = ""
    ) -> None:
        ns, name = key_of(pod)
        patch_annotations(self.api, pod_path(ns, name), annotations)
        self._record(kind, ns, name, detail)

    def _patch_set(
        self, cs: JSON, annotations: Mapping[str, str | None], kind: str, detail: str = ""
    ) -> None:
        ns, name = key_of(cs)
        patch_annotations(self.api, set_path(ns, name), annotations)
        self._record(kind, ns, name, detail)

    def _delete(self, pod: JSON) -> None:
        ns, name = key_of(pod)
        try:
            self.api.delete(pod_path(ns, name))
        except NotFoundError:
            return
        self._record("delete", ns, name, str(meta_of(pod).get("uid") or ""))

    def _create(self, ns: str, body: JSON, *, fresh_over: bool) -> None:
        name = str(body["metadata"]["name"])
        try:
            self.api.post(pod_path(ns), body)
        except ConflictError as err:  # AlreadyExists: the old pod is still there
            raise _Requeue(self.requeue_after) from err
        restore = body["metadata"].get("annotations", {}).get(k.ANN_RESTORE) == k.TRUE
        detail = "restore" if restore else "fresh over a :hibernate snapshot" if fresh_over else ""
        self._record("create", ns, name, detail)

    def _status(self, cs: JSON, live: list[JSON], phase: Phase | None) -> None:
        """patchStatus(buildStatus(...)): only the fields that differ from the cache."""
        model = CocoonSet.model_validate(cs)
        pods = tuple(Pod.model_validate(p) for p in live)
        if phase is None:
            main = next((p for p in live if labels_of(p).get(k.LABEL_ROLE) == k.ROLE_MAIN), None)
            phase = (
                Phase.PENDING
                if main is None
                else Phase.RUNNING
                if is_ready(main)
                else Phase.SCALING
            )
        full = build_status(model, pods, phase, now=datetime.now(UTC))
        cached: Mapping[str, Any] = cs.get("status") or {}
        patch = {
            f: v for f, v in full.items() if cached.get(f) != v and not _same_conds(f, cached, v)
        }
        if not patch:
            return
        ns, name = key_of(cs)
        self.api.merge_patch(set_path(ns, name) + "/status", {"status": patch})
        if "phase" in patch:
            self._record("status", ns, name, str(patch["phase"]))

    # -- the registry --
    def _repository(self, vm: str) -> str:
        return repository(self.registry_prefix, vm)

    def _head(self, vm: str) -> bool:
        resp = requests.head(
            manifest_url(self.registry_url, self._repository(vm), k.TAG_HIBERNATE),
            headers={"Accept": MANIFEST_ACCEPT},
            timeout=5,
        )
        if resp.status_code == 404:
            return False
        if resp.status_code != 200:
            raise ApiError(resp.status_code, "HEAD", vm, resp.text)
        return True

    def _tagged(self, cs: JSON) -> bool:
        ns, name = key_of(cs)
        return self._head(agent_vm_name(self.upstream, ns, name, 0))

    def _untag(self, ns: str, name: str, vm: str) -> None:
        """DeleteManifest(vm, "hibernate"): by tag, 404 tolerated."""
        ref = k.TAG_HIBERNATE
        repo = self._repository(vm)
        if self.registry_deletes_tags:
            head = requests.head(
                manifest_url(self.registry_url, repo, ref),
                headers={"Accept": MANIFEST_ACCEPT},
                timeout=5,
            )
            ref = head.headers.get("Docker-Content-Digest", ref) if head.ok else ref
        resp = requests.delete(manifest_url(self.registry_url, repo, ref), timeout=5)
        if resp.status_code in (200, 202, 404):
            self._record("untag", ns, name, str(resp.status_code))
            return
        self._record("untag-refused", ns, name, str(resp.status_code))
        raise ApiError(resp.status_code, "DELETE", f"{vm}:{k.TAG_HIBERNATE}", resp.text)

    def _record(self, kind: str, ns: str, name: str, detail: str = "") -> None:
        self.actions.append(OpAction(time.monotonic(), kind, ns, name, detail))

    def _error(self, text: str) -> None:
        record_error(self.errors, text)


def _same_conds(f: str, cached: Mapping[str, Any], new: Any) -> bool:
    """Conditions equal but for lastTransitionTime formatting: not a change."""
    if f != "conditions":
        return False
    return condition_keys(cached.get("conditions")) == condition_keys(new)


def _stash_names(cs: JSON, live: list[JSON]) -> str:
    status = cs.get("status") or {}
    names = {str(a.get("vmName") or "") for a in status.get("agents") or ()}
    names.update(str(t.get("vmName") or "") for t in status.get("toolboxes") or ())
    names.update(ann_of(cs).get(k.ANN_DELETE_VM_NAMES, "").split(","))
    names.update(ann_of(p).get(k.ANN_VM_NAME, "") for p in live)
    return ",".join(sorted(n.strip() for n in names if n.strip()))


def _pod_fingerprint(pod: Mapping[str, Any]) -> tuple[Any, ...]:
    """What podRelevantChange compares (predicate.go)."""
    meta = meta_of(pod)
    return (
        str(meta.get("uid") or ""),
        meta.get("deletionTimestamp") is not None,
        (pod.get("status") or {}).get("phase"),
        is_ready(pod),
        tuple(sorted(labels_of(pod).items())),
        tuple(sorted(ann_of(pod).items())),
    )
