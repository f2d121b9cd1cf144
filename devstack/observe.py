"""What the demo sees: a poll of the API turned into a view of sets and seats, and its diffs.

The observer reads only what a user could read with kubectl (sets, pods,
events); transitions are the differences between two consecutive views, so
the narration never depends on timing details of the parts it watches.
"""

from __future__ import annotations

import json
import queue
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import requests

from devstack.kubehttp import JSON, KubeHTTP, pod_path, set_path
from shared import constants as k


@dataclass(frozen=True, slots=True)
class SetView:
    namespace: str
    name: str
    policy: str
    suspend: bool
    phase: str
    hint: str
    pod: str  # the main pod's state: "-" (none), pending, unschedulable, starting, running, ...
    node: str
    restore: str  # the main pod's lifecycle-state-message (vk's warm/cold note)
    unschedulable: str  # the scheduler's message while unschedulable
    restore_marked: bool = False  # the main pod carries restore-from-hibernate

    def describe_pod(self) -> str:
        return self.pod if not self.node else f"{self.pod} on {self.node}"


@dataclass(frozen=True, slots=True)
class EventView:
    namespace: str
    object_name: str
    reason: str
    type: str
    message: str
    uid: str


@dataclass
class View:
    sets: dict[str, SetView] = field(default_factory=dict)
    seats: dict[str, tuple[int, int]] = field(default_factory=dict)  # node -> (used, total)
    events: list[EventView] = field(default_factory=list)


def _restore_marked(pod: Mapping[str, Any] | None) -> bool:
    if pod is None:
        return False
    ann = (pod.get("metadata") or {}).get("annotations") or {}
    return bool(ann.get(k.ANN_RESTORE) == k.TRUE)


def _main_state(pod: Mapping[str, Any] | None) -> tuple[str, str, str, str]:
    if pod is None:
        return "-", "", "", ""
    meta = pod.get("metadata") or {}
    ann = meta.get("annotations") or {}
    node = str((pod.get("spec") or {}).get("nodeName") or "")
    restore = str(ann.get(k.ANN_LIFECYCLE_MESSAGE) or "")
    if meta.get("deletionTimestamp"):
        return "terminating", node, restore, ""
    for c in (pod.get("status") or {}).get("conditions") or []:
        if c.get("type") == "PodScheduled" and c.get("reason") == "Unschedulable" and not node:
            return "unschedulable", node, restore, str(c.get("message") or "")
    if not node:
        return "pending", node, restore, ""
    state = str(ann.get(k.ANN_LIFECYCLE_STATE) or "")
    if state in ("hibernating", "hibernated", "failed"):
        return state, node, restore, ""
    if not ann.get(k.ANN_VM_ID):
        return "starting", node, restore, ""
    return "running", node, restore, ""


def build_view(
    sets: Sequence[JSON],
    pods: Sequence[JSON],
    events: Sequence[JSON],
    nodes: Mapping[str, int],
) -> View:
    view = View()
    mains: dict[tuple[str, str], JSON] = {}
    used: dict[str, int] = {}
    for p in pods:
        meta = p.get("metadata") or {}
        labels = meta.get("labels") or {}
        key = (str(meta.get("namespace")), str(labels.get(k.LABEL_SET_NAME, "")))
        if labels.get(k.LABEL_ROLE) == k.ROLE_MAIN:
            current = mains.get(key)
            # Prefer the live pod over one being deleted when both exist briefly.
            if current is None or (current.get("metadata") or {}).get("deletionTimestamp"):
                mains[key] = p
        node = (p.get("spec") or {}).get("nodeName")
        if node:
            used[node] = used.get(node, 0) + 1
    for s in sets:
        meta = s.get("metadata") or {}
        spec = s.get("spec") or {}
        ns, name = str(meta.get("namespace")), str(meta.get("name"))
        pod_state, node, restore, unsched = _main_state(mains.get((ns, name)))
        view.sets[name] = SetView(
            namespace=ns,
            name=name,
            policy=str(spec.get("hibernatePolicy") or "retain"),
            suspend=bool(spec.get("suspend")),
            phase=str((s.get("status") or {}).get("phase") or "-"),
            hint=str((meta.get("annotations") or {}).get(k.ANN_HIBERNATED_ON_NODE) or ""),
            pod=pod_state,
            node=node,
            restore=restore,
            unschedulable=unsched,
            restore_marked=_restore_marked(mains.get((ns, name))),
        )
    view.seats = {n: (used.get(n, 0), total) for n, total in sorted(nodes.items())}
    for e in events:
        meta = e.get("metadata") or {}
        regarding = e.get("involvedObject") or e.get("regarding") or {}
        view.events.append(
            EventView(
                namespace=str(meta.get("namespace") or ""),
                object_name=str(regarding.get("name") or ""),
                reason=str(e.get("reason") or ""),
                type=str(e.get("type") or ""),
                message=str(e.get("message") or e.get("note") or ""),
                uid=str(meta.get("uid") or meta.get("name") or ""),
            )
        )
    return view


def transitions(before: View | None, after: View, *, phases: bool = True) -> list[str]:
    """One line per change a user would care about, in a stable order.

    `phases=False` leaves phase changes out (a watch reports them, every one of
    them, where two polls could miss a short-lived phase).
    """
    out: list[str] = []
    old_sets = before.sets if before else {}
    for name, s in after.sets.items():
        o = old_sets.get(name)
        if o is None:
            out.append(f"{name}: created ({s.policy}), phase {s.phase}")
            continue
        if o.suspend != s.suspend:
            out.append(f"{name}: spec.suspend={str(s.suspend).lower()}")
        if phases and o.phase != s.phase:
            out.append(f"{name}: phase {o.phase} -> {s.phase}")
        if (o.pod, o.node) != (s.pod, s.node):
            text = f"{name}: pod {o.describe_pod()} -> {s.describe_pod()}"
            if o.pod == "-" and s.restore_marked:
                text += " [restore-from-hibernate]"
            if s.pod == "unschedulable" and s.unschedulable:
                text += f" ({s.unschedulable})"
            out.append(text)
        if o.hint != s.hint:
            out.append(f"{name}: hibernated-on-node {'set to ' + s.hint if s.hint else 'cleared'}")
        if s.restore and o.restore != s.restore:
            out.append(f"{name}: vk-cocoon {s.restore}")
    for name in old_sets:
        if name not in after.sets:
            out.append(f"{name}: deleted")
    old_seats = before.seats if before else {}
    for node, (used, total) in after.seats.items():
        if old_seats.get(node) != (used, total) and before is not None:
            out.append(f"{node}: seats {used}/{total} taken")
    seen = {e.uid for e in before.events} if before else set()
    for e in after.events:
        if e.uid not in seen:
            out.append(f"{e.object_name}: event {e.type} {e.reason}: {e.message}")
    return out


class PhaseWatch:
    """Every phase each set of a namespace goes through, from a watch (none is missed).

    A short-lived phase (``Suspending`` can last a tenth of a second) may fall
    between two polls; a watch delivers every write in order. Reconnects with
    the last resourceVersion; a 410 (history compacted) restarts from now.
    """

    def __init__(self, base_url: str, namespace: str) -> None:
        self.url = f"{base_url.rstrip('/')}{set_path(namespace)}"
        self.lines: queue.Queue[str] = queue.Queue()
        self.requests_made = 0
        self._last: dict[str, str] = {}
        self._stop = threading.Event()
        self._session = requests.Session()
        self._thread = threading.Thread(target=self._run, name="phase-watch", daemon=True)

    def start(self) -> PhaseWatch:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._session.close()

    def drain(self) -> list[str]:
        out: list[str] = []
        while True:
            try:
                out.append(self.lines.get_nowait())
            except queue.Empty:
                return out

    def _run(self) -> None:
        rv = ""
        while not self._stop.is_set():
            params = {"watch": "true", "timeoutSeconds": "60"}
            if rv:
                params["resourceVersion"] = rv
            try:
                self.requests_made += 1
                with self._session.get(
                    self.url, params=params, stream=True, timeout=(5, 90)
                ) as resp:
                    if resp.status_code != 200:
                        rv = ""
                        self._stop.wait(0.2)
                        continue
                    for raw in resp.iter_lines():
                        if self._stop.is_set():
                            return
                        if raw:
                            rv = self._handle(json.loads(raw), rv)
            except (requests.RequestException, ValueError):
                self._stop.wait(0.2)

    def _handle(self, event: Mapping[str, Any], rv: str) -> str:
        obj = event.get("object") or {}
        meta = obj.get("metadata") or {}
        if event.get("type") == "ERROR":
            return ""  # e.g. 410 Gone: start over from the current state
        name = str(meta.get("name") or "")
        if event.get("type") in ("ADDED", "MODIFIED") and name:
            phase = str((obj.get("status") or {}).get("phase") or "-")
            old = self._last.get(name)
            self._last[name] = phase
            if old is not None and old != phase:
                self.lines.put(f"{name}: phase {old} -> {phase}")
        elif event.get("type") == "DELETED":
            self._last.pop(name, None)
        return str(meta.get("resourceVersion") or rv)


class Observer:
    """Polls one namespace of the API; counts its own requests through its client."""

    def __init__(
        self,
        api: KubeHTTP,
        namespace: str,
        nodes: Mapping[str, int],
        *,
        watch: PhaseWatch | None = None,
    ) -> None:
        self.api = api
        self.namespace = namespace
        self.nodes = dict(nodes)
        self.watch = watch
        self.view: View | None = None

    def poll(self) -> tuple[View, list[str]]:
        sets = self.api.list_items(set_path(self.namespace))
        pods = self.api.list_items(pod_path())
        try:
            events = self.api.list_items(f"/api/v1/namespaces/{self.namespace}/events")
        except Exception:  # noqa: BLE001 - events are narration only; an API without them is fine
            events = []
        view = build_view(sets, pods, events, self.nodes)
        if self.watch is not None:
            # Every phase the watch saw up to this list, then the rest of the diff.
            lines = self.watch.drain() + transitions(self.view, view, phases=False)
        else:
            lines = transitions(self.view, view)
        self.view = view
        return view, lines
