"""What the seat economy buys, on a workload: agents per seat at a bounded wake wait.

A seeded, time-compressed trace of agent sessions on a fixed pool, run on the
whole local stack (devstack.Stack: the embedded API, a real Distribution
registry, the four targets as functions-framework processes, the simulator
playing kube-scheduler, the operator's normal flow and vk-cocoon with restore
and hibernate times), once per configuration, the same trace each time:

- **retain**: `hibernatePolicy: retain`; idle VMs are suspended in place and keep
  their seats; a returning user unsuspends the set (and writes `last-activity`, as
  whatever sees user traffic does), since wake requests are for release sets;
- **release**: `hibernatePolicy: release` and the idle timeout, without the
  economy (`COCOON_SEAT_RECLAIM_GRACE=off`, `COCOON_SEAT_ORDER=off`, no
  `reclaimable-after`);
- **economy**: release plus reclaim (`reclaimable-after`, the grace) and the fair
  order (`COCOON_SEAT_ORDER=gate`). Sleep windows are not exercised: their cron
  ticks are minutes, which a compressed trace cannot hold.

Every agent exists before the trace, suspended, with its state saved (the release
configurations ran each one once and released it; under retain the agents that
found a seat ran once and were suspended in place, the others never found one).
Each agent then arrives at a seeded time, and alternates an active session (CPU
above `idle-cpu-below` in the PodMetrics the simulator's vk-cocoon serves, the
way the sweep sees activity) and an idle gap (lognormal: most users come back
soon, a few much later; after each session a user may never come back). A
return is a wake request (the `wake` target's CloudEvent, retried like Eventarc
on a non-2xx); the wait ends when the set's main pod is bound with a live,
ready VM. A wake not served within the timeout is given up: the user comes back
after their next gap. Session and gap lengths are fixed by the seed; when they
start depends on the waits, so the three runs see the same users, not the same
clock.

VM state lost is read off the simulator's records: a fresh boot of an agent
that had run before, a `:hibernate` push over a snapshot another VM instance
of the set left unrestored, a restore of another set's VM (or two sets with one
VM name), and a restore that failed for want of its snapshot.

Run: `uv run python -m benchmarks --only workload` (results merged into
results/latest.json), or alone: `uv run python -m benchmarks.bench_workload
[--quick] [--agents N --seats N]`.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import random
import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from typing import Any

from benchmarks._util import fig, percentile
from devstack.kubehttp import ApiError, KubeHTTP, pod_path, set_path
from devstack.processes import StackError
from devstack.sim_vkcocoon import COLD, FRESH, WARM
from devstack.simulator import NodeSpec, SimEvent
from devstack.stack import Stack, StackConfig
from shared import constants as k
from shared.constants import ANN_IDLE_CPU_BELOW, ANN_RECLAIMABLE_AFTER, REASON_SEAT_RECLAIMED
from shared.names import main_pod_name

NS = "agents"
CONFIGS = ("retain", "release", "economy")


@dataclass(frozen=True)
class Params:
    """The trace and the pool. Times are compressed: 1 s here stands for 1 min."""

    agents: int = 60
    seats: int = 12
    seats_per_node: int = 3
    seed: int = 35
    duration_s: float = 90.0  # no user arrives or returns after this
    arrivals_within_s: float = 60.0  # each agent's first arrival: uniform in [0, this)
    session_median_s: float = 4.0  # active session: lognormal
    session_sigma: float = 0.6
    gap_median_s: float = 6.0  # idle gap: lognormal, heavy-tailed
    gap_sigma: float = 1.5
    never_return_p: float = 0.2  # after each session, the user may never come back
    wake_timeout_s: float = 20.0  # a user gives up a wake after this
    idle_timeout_s: int = 10  # idle-timeout (every configuration)
    reclaimable_after_s: int = 3  # reclaimable-after (economy)
    reclaim_grace_s: int = 2  # COCOON_SEAT_RECLAIM_GRACE (economy)
    hibernate_s: float = 0.5  # vk-cocoon: push -> report (removing the VM)
    warm_restore_s: float = 0.3
    cold_restore_s: float = 1.0
    tick_s: float = 1.0  # sweep tick
    active_cpu: str = "500m"  # an active VM's CPU in PodMetrics
    idle_cpu_below: str = "50m"  # idle-cpu-below (every configuration)


QUICK = Params(agents=10, seats=3, duration_s=25.0, arrivals_within_s=12.0, wake_timeout_s=12.0)


@dataclass(frozen=True)
class AgentTrace:
    name: str
    first: float
    sessions: tuple[float, ...]
    gaps: tuple[float | None, ...]  # after session i; None: never comes back


def make_trace(p: Params) -> list[AgentTrace]:
    """Per agent, its own seeded stream, long enough to outlast the trace if served at once."""
    out: list[AgentTrace] = []
    for i in range(p.agents):
        rng = random.Random(f"{p.seed}/{i}")
        first = rng.uniform(0.0, p.arrivals_within_s)
        sessions: list[float] = []
        gaps: list[float | None] = []
        t = first
        while t < p.duration_s and len(sessions) < 200:
            s = rng.lognormvariate(math.log(p.session_median_s), p.session_sigma)
            sessions.append(s)
            gap = (
                None
                if rng.random() < p.never_return_p
                else rng.lognormvariate(math.log(p.gap_median_s), p.gap_sigma)
            )
            gaps.append(gap)
            if gap is None:
                break
            t += s + gap
        out.append(AgentTrace(f"agent-{i:03d}", first, tuple(sessions), tuple(gaps)))
    return out


def offered_load(p: Params, trace: Sequence[AgentTrace]) -> float:
    """Mean active sessions at once if every wake were served instantly, over the trace."""
    busy = 0.0
    for a in trace:
        t = a.first
        for s, g in zip(a.sessions, a.gaps, strict=True):
            if t >= p.duration_s:
                break
            busy += min(s, p.duration_s - t)
            if g is None:
                break
            t += s + g
    return busy / p.duration_s


# --- one configuration ------------------------------------------------------------------


@dataclass
class Agent:
    trace: AgentTrace
    state: str = "away"  # away, waiting, active, gone
    idx: int = 0  # the session the agent is in, or will be in next
    next_at: float = 0.0
    since: float = 0.0
    session_end: float = 0.0
    vm: str = ""


@dataclass
class Wake:
    agent: str
    at: float
    found_ready: bool
    waited: float | None = None  # None: timed out (or still waiting at the end)
    timed_out: bool = False


@dataclass
class Run:
    config: str
    wakes: list[Wake] = field(default_factory=list)
    ran: set[str] = field(default_factory=set)
    interrupted: int = 0
    # (t, seats in use, waiting wakes, seats held by idle VMs)
    timeline: list[tuple[float, int, int, int]] = field(default_factory=list)
    idle_seat_s: float = 0.0
    seat_s: float = 0.0
    reclaims: int = 0
    lost: dict[str, int] = field(default_factory=dict)
    request_errors: int = 0
    restores: dict[str, int] = field(default_factory=dict)  # warm / cold, in the trace
    sim_errors: int = 0
    wall_s: float = 0.0


def _set_body(name: str, config: str, p: Params, *, cpu: bool) -> dict[str, Any]:
    ann = {k.ANN_IDLE_TIMEOUT: f"{p.idle_timeout_s}s"}
    if cpu:
        ann[ANN_IDLE_CPU_BELOW] = p.idle_cpu_below
    if config == "economy":
        ann[ANN_RECLAIMABLE_AFTER] = f"{p.reclaimable_after_s}s"
    return {
        "apiVersion": k.API_VERSION,
        "kind": k.KIND,
        "metadata": {"name": name, "namespace": NS, "annotations": ann},
        "spec": {
            "hibernatePolicy": "retain" if config == "retain" else "release",
            "agent": {"image": f"ghcr.io/acme/{name}:1"},
        },
    }


def _nodes(p: Params) -> list[NodeSpec]:
    nodes: list[NodeSpec] = []
    left, i = p.seats, 1
    while left > 0:
        n = min(p.seats_per_node, left)
        nodes.append(NodeSpec(f"node-{i}", seats=n))
        left, i = left - n, i + 1
    return nodes


def _stack_config(config: str, p: Params) -> StackConfig:
    economy = config == "economy"
    return StackConfig(
        nodes=_nodes(p),
        tick_seconds=p.tick_s,
        sim_interval=0.1,
        log_format="text",
        wake_deadline=f"{int(p.wake_timeout_s)}s",
        seat_reclaim_grace=f"{p.reclaim_grace_s}s" if economy else "off",
        report_gap=p.hibernate_s,
        warm_restore_s=p.warm_restore_s,
        cold_restore_s=p.cold_restore_s,
        extra_env={"COCOON_SEAT_ORDER": "gate" if economy else "off"},
    )


def _ready(pod: Mapping[str, Any]) -> bool:
    """The user's VM is up: bound, booted, ready, not being hibernated or deleted."""
    meta = pod.get("metadata") or {}
    ann = meta.get("annotations") or {}
    return bool(
        (pod.get("spec") or {}).get("nodeName")
        and not meta.get("deletionTimestamp")
        and ann.get(k.ANN_VM_ID)
        and ann.get(k.ANN_LIFECYCLE_STATE) == "ready"
        and ann.get(k.ANN_HIBERNATE) != k.TRUE
    )


def _phases(api: KubeHTTP) -> dict[str, str]:
    return {
        str(s["metadata"]["name"]): str((s.get("status") or {}).get("phase") or "")
        for s in api.list_items(set_path(NS))
    }


def _preseed(
    stack: Stack, api: KubeHTTP, config: str, names: Sequence[str], p: Params, *, cpu: bool
) -> None:
    """Every agent exists, suspended, its state saved, before the trace starts."""
    for n in names:
        api.post(set_path(NS), _set_body(n, config, p, cpu=cpu))
    deadline = time.monotonic() + 60 + 3 * len(names)
    asked: set[str] = set()
    while time.monotonic() < deadline:
        stack.check_alive()
        phases = _phases(api)
        if config == "retain":
            running = [n for n in names if phases.get(n) == "Running"]
            if len(running) >= min(p.seats, len(names)):
                break
        else:
            for n in names:
                if phases.get(n) == "Running" and n not in asked:
                    api.merge_patch(set_path(NS, n), {"spec": {"suspend": True}})
                    asked.add(n)
            if all(phases.get(n) == "Suspended" for n in names):
                return
        time.sleep(0.2)
    else:
        raise TimeoutError(f"{config}: pre-seed did not finish")
    # retain: the agents with a seat hibernate in place; the others stay pending.
    for n in names:
        api.merge_patch(set_path(NS, n), {"spec": {"suspend": True}})
    seated = {n for n in names if phases.get(n) == "Running"}
    stack.wait_for(
        "retain agents suspended in place",
        lambda: all(_phases(api).get(n) == "Suspended" for n in seated),
        60,
    )


class _Requester:
    """Sends the users' wakes off the driver's thread (a wake invocation takes a while)."""

    def __init__(self, stack: Stack, config: str) -> None:
        self.stack, self.config = stack, config
        self.pool = ThreadPoolExecutor(max_workers=4, thread_name_prefix="wake")
        self.local = threading.local()
        self.errors = 0

    def _api(self) -> KubeHTTP:
        api = getattr(self.local, "api", None)
        if api is None:
            api = self.local.api = self.stack.kube_http()
        return api

    def submit(self, name: str) -> None:
        self.pool.submit(self._wake, name)

    def touch(self, name: str) -> None:
        self.pool.submit(self._touch, name)

    def _touch(self, name: str) -> None:
        now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        with contextlib.suppress(ApiError, OSError):
            self._api().merge_patch(
                set_path(NS, name), {"metadata": {"annotations": {k.ANN_LAST_ACTIVITY: now}}}
            )

    def _wake(self, name: str) -> None:
        for attempt in range(1, 6):
            try:
                if self.config == "retain":
                    # A retain set is woken in place by unsuspending it; the user's
                    # traffic is activity (docs/configuration.md: last-activity).
                    now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
                    self._api().merge_patch(
                        set_path(NS, name),
                        {
                            "metadata": {"annotations": {k.ANN_LAST_ACTIVITY: now}},
                            "spec": {"suspend": False},
                        },
                    )
                    return
                if self.stack.request_wake(NS, name) < 300:
                    return
            except (ApiError, OSError):
                pass
            time.sleep(0.2 * attempt)  # redelivered with backoff, as Eventarc does
        self.errors += 1

    def close(self) -> None:
        self.pool.shutdown(wait=True, cancel_futures=True)


@dataclass
class _StateLog:
    """The simulator's records, replayed in order: what happened to each agent's VM state."""

    set_of_pod: dict[str, str]
    events: list[SimEvent] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def on_event(self, ev: SimEvent) -> None:
        if ev.kind in ("booted", "hibernated", "restore-failed"):
            with self.lock:
                self.events.append(ev)

    def judge(self, restores: Sequence[Any], vm_of: Mapping[str, set[str]]) -> dict[str, int]:
        lost = {
            "fresh_boot_over_state": 0,
            "snapshot_overwritten": 0,
            "restore_from_other_set": 0,
            "restore_failed": 0,
        }
        instance: dict[str, int] = {}
        had_state: set[str] = set()
        unrestored: dict[str, int] = {}  # set -> the instance whose snapshot awaits a restore
        with self.lock:
            events = list(self.events)
        for ev in events:
            s = self.set_of_pod.get(ev.name)
            if s is None:
                continue
            if ev.kind == "booted":
                how = ev.detail.split(" ", 1)[0]
                if how == FRESH and s in had_state:
                    lost["fresh_boot_over_state"] += 1
                if how in (FRESH, WARM, COLD):
                    instance[s] = instance.get(s, 0) + 1
                    had_state.add(s)
                    unrestored.pop(s, None)
            elif ev.kind == "hibernated":
                mine = instance.get(s, 0)
                if unrestored.get(s, mine) != mine:
                    lost["snapshot_overwritten"] += 1
                unrestored[s] = mine
            else:
                lost["restore_failed"] += 1
        owners: dict[str, set[str]] = {}
        for s, vms in vm_of.items():
            if len(vms) > 1:
                lost["restore_from_other_set"] += 1  # one set, two VM names
            for vm in vms:
                owners.setdefault(vm, set()).add(s)
        for r in restores:
            s = self.set_of_pod.get(r.pod)
            if s is not None and r.vm not in vm_of.get(s, {r.vm}):
                lost["restore_from_other_set"] += 1
        lost["restore_from_other_set"] += sum(1 for o in owners.values() if len(o) > 1)
        return lost


class _SetupFailed(Exception):
    """The stack or the pre-seed failed before the trace began: safe to start over."""


def run_config(config: str, p: Params, trace: Sequence[AgentTrace], backend: str) -> Run:
    # On a shared machine a free port can be taken between its pick and the bind
    # (a target then dies at start): a set-up failure starts the configuration over.
    for attempt in range(1, 4):
        try:
            return _run_config_once(config, p, trace, backend)
        except _SetupFailed as err:
            if attempt == 3:
                raise
            print(f"   {config}: set-up failed, again: {err}", file=sys.stderr, flush=True)
    raise AssertionError("unreachable")


def _run_config_once(config: str, p: Params, trace: Sequence[AgentTrace], backend: str) -> Run:
    names = [a.name for a in trace]
    log = _StateLog({main_pod_name(n): n for n in names})
    out = Run(config)
    started = time.perf_counter()
    try:
        cfg = _stack_config(config, p)
        cfg.backend = backend
        stack = Stack(cfg, on_event=log.on_event).__enter__()
    except StackError as err:
        raise _SetupFailed(str(err).splitlines()[0]) from err
    with contextlib.ExitStack() as cleanup:
        cleanup.callback(stack.stop)
        sim = stack.simulator
        assert sim is not None
        api = stack.kube_http()
        cpu = backend == "embedded"
        try:
            stack.ensure_namespace(NS)
            _preseed(stack, api, config, names, p, cpu=cpu)
            # The wake instance's first relevant event loads the Kubernetes client
            # (seconds here): warm it, so the trace measures the seats, not a cold start.
            stack.request_wake(NS, "warm-up")
        except (StackError, TimeoutError) as err:
            raise _SetupFailed(str(err).splitlines()[0]) from err
        requester = _Requester(stack, config)
        restores_before = len(sim.restores)
        touched: dict[str, float] = {}
        agents = {a.name: Agent(a, next_at=a.first) for a in trace}
        vm_of: dict[str, set[str]] = {}
        t0 = time.monotonic()
        last = 0.0
        hard_stop = p.duration_s + p.wake_timeout_s + 5
        try:
            while True:
                now = time.monotonic() - t0
                pods = api.list_items(pod_path(NS))
                ready: dict[str, str] = {}
                bound: dict[str, bool] = {}
                for pod in pods:
                    s = str(((pod.get("metadata") or {}).get("labels") or {}).get(k.LABEL_SET_NAME))
                    ann = (pod.get("metadata") or {}).get("annotations") or {}
                    if ann.get(k.ANN_VM_NAME):
                        vm_of.setdefault(s, set()).add(str(ann[k.ANN_VM_NAME]))
                    if (pod.get("spec") or {}).get("nodeName"):
                        bound[s] = True
                    if _ready(pod):
                        ready[s] = str(ann.get(k.ANN_VM_NAME, ""))
                _drive(agents, ready, now, p, out, requester, sim.cpu_load)
                if not cpu:
                    # No PodMetrics on this server: the user's traffic is written as
                    # last-activity (the documented external writer), once a second.
                    for n, a in agents.items():
                        if a.state == "active" and now - touched.get(n, -9.0) >= 1.0:
                            touched[n] = now
                            requester.touch(n)
                waiting = sum(1 for a in agents.values() if a.state == "waiting")
                busy = {n for n, a in agents.items() if a.state in ("active", "waiting")}
                idle = sum(1 for s in bound if s not in busy)
                dt = now - last
                out.seat_s += dt * len(bound)
                out.idle_seat_s += dt * idle
                last = now
                out.timeline.append((round(now, 2), len(bound), waiting, idle))
                if (now >= p.duration_s and waiting == 0) or now >= hard_stop:
                    break
                if len(out.timeline) % 50 == 0:
                    stack.check_alive()  # a target that died would make the figures lie
                time.sleep(0.1)
        finally:
            requester.close()
        for w in out.wakes:  # still waiting at the hard stop: timed out
            if w.waited is None and not w.timed_out:
                w.timed_out = True
        out.request_errors = requester.errors
        events = api.list_items(f"/api/v1/namespaces/{NS}/events")
        reclaim_events = [e for e in events if e.get("reason") == REASON_SEAT_RECLAIMED]
        # One Event on the waker and one on the victim per reclaim.
        out.reclaims = len(reclaim_events) // 2
        out.lost = log.judge(list(sim.restores), vm_of)
        for r in sim.restores[restores_before:]:
            out.restores[r.how] = out.restores.get(r.how, 0) + 1
        out.sim_errors = len(sim.errors)
        api.close()
    out.wall_s = time.perf_counter() - started
    return out


def _drive(
    agents: Mapping[str, Agent],
    ready: Mapping[str, str],
    now: float,
    p: Params,
    out: Run,
    requester: _Requester,
    cpu_load: dict[str, str],
) -> None:
    """One step of every user: return, get served, end a session, give up."""
    for name, a in agents.items():
        if a.state == "away" and now >= a.next_at:
            if a.next_at >= p.duration_s or a.idx >= len(a.trace.sessions):
                a.state = "gone"
                continue
            a.state, a.since = "waiting", now
            out.wakes.append(Wake(name, now, found_ready=name in ready))
            requester.submit(name)
        elif a.state == "waiting":
            wake = next(w for w in reversed(out.wakes) if w.agent == name)
            if name in ready:
                wake.waited = now - a.since
                out.ran.add(name)
                a.state, a.vm = "active", ready[name]
                a.session_end = now + a.trace.sessions[a.idx]
                cpu_load[a.vm] = p.active_cpu
            elif now - a.since >= p.wake_timeout_s:
                wake.timed_out = True
                _next_gap(a, now)
        elif a.state == "active":
            if now >= a.session_end:
                cpu_load.pop(a.vm, None)
                _next_gap(a, now)
            elif name not in ready:
                # The VM went away mid-session (suspended or reclaimed while busy):
                # the user asks for it back at once.
                out.interrupted += 1
                cpu_load.pop(a.vm, None)
                a.state, a.since = "waiting", now
                out.wakes.append(Wake(name, now, found_ready=False))
                requester.submit(name)


def _next_gap(a: Agent, now: float) -> None:
    gap = a.trace.gaps[a.idx]
    a.idx += 1
    if gap is None or a.idx >= len(a.trace.sessions):
        a.state = "gone"
    else:
        a.state, a.next_at = "away", now + gap


# --- figures -----------------------------------------------------------------------------


def summarize(r: Run, p: Params) -> dict[str, Any]:
    served = [w.waited for w in r.wakes if w.waited is not None]
    # A timed-out wake counts as the timeout: a lower bound of what that user waited.
    waits = served + [p.wake_timeout_s for w in r.wakes if w.timed_out]
    restored = [w.waited for w in r.wakes if w.waited is not None and not w.found_ready]
    return {
        "wakes_requested": len(r.wakes),
        "wakes_served": len(served),
        "wakes_timed_out": sum(1 for w in r.wakes if w.timed_out),
        "wakes_finding_vm_up": sum(1 for w in r.wakes if w.found_ready),
        "sessions_interrupted": r.interrupted,
        "wake_wait_p50_s": round(percentile(waits, 50), 2) if waits else None,
        "wake_wait_p99_s": round(percentile(waits, 99), 2) if waits else None,
        "wake_wait_max_s": round(max(waits), 2) if waits else None,
        "wake_wait_p99_served_s": round(percentile(served, 99), 2) if served else None,
        "restore_wait_p50_s": round(percentile(restored, 50), 2) if restored else None,
        "agents_ran": len(r.ran),
        "agents_per_seat": round(len(r.ran) / p.seats, 3),
        "seat_s_total": round(r.seat_s, 1),
        "seat_s_idle": round(r.idle_seat_s, 1),
        "idle_share_of_seat_time": round(r.idle_seat_s / r.seat_s, 3) if r.seat_s else None,
        "reclaims": r.reclaims,
        "restores_warm_cold": r.restores,
        "vm_state_lost": sum(r.lost.values()),
        "vm_state_lost_detail": r.lost,
        "wake_request_errors": r.request_errors,
        "simulator_errors": r.sim_errors,
        "wall_s": round(r.wall_s, 1),
    }


def _series(r: Run, step: float = 0.5) -> dict[str, list[float]]:
    """The timeline thinned to one sample per `step` seconds (for the plot)."""
    t: list[float] = []
    seats: list[float] = []
    waiting: list[float] = []
    idle: list[float] = []
    next_t = 0.0
    for at, s, w, i in r.timeline:
        if at >= next_t:
            t.append(at)
            seats.append(s)
            waiting.append(w)
            idle.append(i)
            next_t = at + step
    return {"t": t, "seats_in_use": seats, "waiting_wakes": waiting, "idle_seats": idle}


def _markdown(p: Params, per: Mapping[str, Mapping[str, Any]], load: float, where: str) -> str:
    rows: list[tuple[str, Callable[[Mapping[str, Any]], str]]] = [
        (
            "wakes requested / served / timed out",
            lambda s: f"{s['wakes_requested']} / {s['wakes_served']} / {s['wakes_timed_out']}",
        ),
        ("of them finding the VM still up", lambda s: str(s["wakes_finding_vm_up"])),
        (
            "wake wait p50 / p99 / max (s)",
            lambda s: f"{s['wake_wait_p50_s']} / {s['wake_wait_p99_s']} / {s['wake_wait_max_s']}",
        ),
        ("served wakes' wait p99 (s)", lambda s: str(s["wake_wait_p99_served_s"])),
        ("agents that ran / per seat", lambda s: f"{s['agents_ran']} / {s['agents_per_seat']}"),
        (
            "seat-time held by idle VMs (seat·s, share)",
            lambda s: f"{s['seat_s_idle']} ({100 * (s['idle_share_of_seat_time'] or 0):.0f} %)",
        ),
        ("reclaims", lambda s: str(s["reclaims"])),
        ("sessions interrupted", lambda s: str(s["sessions_interrupted"])),
        ("VM state lost", lambda s: str(s["vm_state_lost"])),
    ]
    head = "| figure | " + " | ".join(CONFIGS) + " |\n|---|" + "---|" * len(CONFIGS)
    body = "\n".join(
        f"| {label} | " + " | ".join(fn(per[c]) if c in per else "—" for c in CONFIGS) + " |"
        for label, fn in rows
    )
    trace = (
        f"{p.agents} agents on {p.seats} seats ({p.seats_per_node} per node), seed {p.seed}; "
        f"1 s stands for 1 min; arrivals uniform in [0, {p.arrivals_within_s:g}) s, "
        f"users return until {p.duration_s:g} s; sessions lognormal(median "
        f"{p.session_median_s:g} s, σ {p.session_sigma:g}), gaps lognormal(median "
        f"{p.gap_median_s:g} s, σ {p.gap_sigma:g}), "
        f"never back after a session p={p.never_return_p:g}; offered load {load:.1f} busy agents "
        f"on average if served at once; idle-timeout {p.idle_timeout_s}s, idle-cpu-below "
        f"{p.idle_cpu_below} (active VMs at {p.active_cpu}), reclaimable-after "
        f"{p.reclaimable_after_s}s and grace {p.reclaim_grace_s}s (economy); wake given up after "
        f"{p.wake_timeout_s:g} s; hibernate {p.hibernate_s:g} s, restore warm "
        f"{p.warm_restore_s:g} s / cold {p.cold_restore_s:g} s; sweep tick {p.tick_s:g} s"
    )
    if where != "embedded API":
        trace += (
            "; activity written as `last-activity` by the driver each second (no "
            "metrics.k8s.io on this server), not read from PodMetrics"
        )
    return f"## workload ({where})\n\n{trace}.\n\n{head}\n{body}\n"


def _real_requested() -> bool:
    """The real kube-apiserver joins when its binaries are named (COCOON_CONTROL_PLANE_BIN,
    as `make test` passes them): it doubles the run, so it is asked for, not guessed."""
    if not os.environ.get("COCOON_CONTROL_PLANE_BIN"):
        return False
    from devstack.realkube import ControlPlaneUnavailable, find_binaries

    try:
        find_binaries()
    except ControlPlaneUnavailable:
        return False
    return True


def _figures(p: Params, per: Mapping[str, Mapping[str, Any]], where: str) -> dict[str, Any]:
    ret, rel, eco = per["retain"], per["release"], per["economy"]
    ratio = eco["agents_per_seat"] / ret["agents_per_seat"] if ret["agents_per_seat"] else math.nan
    lost = sum(int(s["vm_state_lost"]) for s in per.values())
    where = f"local stack, {where}, {p.agents} agents on {p.seats} seats, seed {p.seed}"
    return {
        "agents_per_seat_economy_over_retain": fig(
            ratio,
            "x",
            f"{eco['agents_ran']} vs {ret['agents_ran']} agents ran on {p.seats} seats; {where}",
        ),
        "wake_wait_p99_economy_s": fig(
            eco["wake_wait_p99_s"], "s", f"timed-out wakes counted at {p.wake_timeout_s:g} s"
        ),
        "wake_wait_p99_release_s": fig(
            rel["wake_wait_p99_s"], "s", "release without the economy, same trace"
        ),
        "wake_wait_p99_retain_s": fig(ret["wake_wait_p99_s"], "s", "retain, same trace"),
        "wakes_timed_out_economy_over_release": fig(
            eco["wakes_timed_out"] / rel["wakes_timed_out"] if rel["wakes_timed_out"] else math.nan,
            "x",
            f"{eco['wakes_timed_out']} vs {rel['wakes_timed_out']} wakes given up",
        ),
        "vm_state_lost": fig(lost, "count", "sum over the three configurations"),
    }


def run(*, quick: bool = False, params: Params | None = None) -> dict[str, Any]:
    p = params or (QUICK if quick else Params())
    trace = make_trace(p)
    load = offered_load(p, trace)
    backends = ["embedded"] + (["real"] if not quick and _real_requested() else [])
    out: dict[str, Any] = {"params": asdict(p), "offered_load_agents": round(load, 2)}
    figures: dict[str, Any] = {}
    sections: list[str] = []
    for backend in backends:
        per: dict[str, dict[str, Any]] = {}
        series: dict[str, dict[str, list[float]]] = {}
        samples: dict[str, list[float]] = {}
        for config in CONFIGS:
            print(f"   workload: {backend} {config} ...", file=sys.stderr, flush=True)
            r = run_config(config, p, trace, backend)
            per[config] = summarize(r, p)
            series[config] = _series(r)
            waits = [w.waited for w in r.wakes if w.waited is not None]
            samples[config] = [round(x, 3) for x in waits] + [
                p.wake_timeout_s for w in r.wakes if w.timed_out
            ]
            print(f"   {config}: {json.dumps(per[config])}", file=sys.stderr, flush=True)
        real = backend == "real"
        suffix = "_real" if real else ""
        where = "real kube-apiserver+etcd" if real else "embedded API"
        figures |= {f"{n}{suffix}": v for n, v in _figures(p, per, where).items()}
        out[f"configurations{suffix}"] = per
        out[f"series{suffix}"] = series
        out[f"wait_samples_s{suffix}"] = samples
        sections.append(_markdown(p, per, load, where))
    out["figures"] = figures
    out["markdown"] = "\n".join(sections)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.bench_workload")
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--agents", type=int)
    parser.add_argument("--seats", type=int)
    parser.add_argument("--duration", type=float)
    args = parser.parse_args(argv)
    p = QUICK if args.quick else Params()
    overrides: dict[str, Any] = {}
    if args.agents:
        overrides["agents"] = args.agents
    if args.seats:
        overrides["seats"] = args.seats
    if args.duration:
        overrides["duration_s"] = args.duration
        overrides["arrivals_within_s"] = args.duration * 2 / 3
    with contextlib.suppress(TypeError):
        p = Params(**{**asdict(p), **overrides})
    res = run(params=p)
    res.pop("series")
    print(json.dumps(res, indent=2, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
