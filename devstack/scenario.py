"""The demo scenario: seats freeing, another workload taking the seat, a wake queuing.

Two nodes with one seat each. Set A (release) runs on node-1, set C (retain)
fills node-2, set B (release) waits Pending for a seat. A is suspended as a
user would (``spec.suspend=true``): vk-cocoon pushes the snapshot, the
registry notifies ``ingest``, release deletes the pod, the seat frees and B
lands on node-1. A is woken with a wake-request CloudEvent to ``wake`` while
the pool is full: it sits ``Waking`` with ``WakeNoCapacity``. B is suspended,
its seat frees, A restores (warm on node-1 when the node still has the
snapshot, else cold) and the ``:hibernate`` tag is dropped. Last, the seat
economy: A is marked ``reclaimable-after`` and B is woken into the full pool;
after the grace period B's wake reclaims idle A's seat (``SeatReclaimed`` on
both), A releases and B restores.

Each step acts, then waits for an observable condition with a timeout; the
result records every step's time, every transition line, the request
counts and where the wake landed. The scenario only *observes* the system
through the API and the registry, as a user could.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

import requests

from devstack.functionlog import FunctionLogs
from devstack.kubehttp import KubeHTTP, set_path
from devstack.observe import Observer, PhaseWatch, View
from devstack.simulator import SimEvent
from devstack.stack import TARGETS, Stack
from shared import constants as k
from shared.constants import ANN_RECLAIMABLE_AFTER, REASON_SEAT_RECLAIMED
from shared.names import vm_name

NAMESPACE = "demo"
RECLAIMABLE_AFTER = "1s"


@dataclass
class StepResult:
    title: str
    ok: bool
    seconds: float
    detail: str = ""


@dataclass
class DemoResult:
    ok: bool
    steps: list[StepResult] = field(default_factory=list)
    transitions: list[tuple[float, str]] = field(default_factory=list)
    failed_step: str | None = None
    last_state: dict[str, Any] = field(default_factory=dict)
    wake_node: str = ""
    wake_restore: str = ""
    api_requests: dict[str, int] = field(default_factory=dict)
    registry_requests: dict[str, int] = field(default_factory=dict)
    tag_present_at_end: bool | None = None
    reclaim_node: str = ""
    total_seconds: float = 0.0

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def set_manifest(name: str, policy: str) -> dict[str, Any]:
    return {
        "apiVersion": k.API_VERSION,
        "kind": k.KIND,
        "metadata": {"name": name, "namespace": NAMESPACE},
        "spec": {
            "hibernatePolicy": policy,
            "agent": {"image": f"ghcr.io/cocoonstack/demo-agent:{name}"},
        },
    }


class StepFailed(Exception):
    pass


class Narration:
    """Where the scenario reports; the CLI renders it (rich on a TTY, plain lines otherwise)."""

    def step(self, index: int, total: int, title: str) -> None: ...
    def line(self, elapsed: float, text: str) -> None: ...
    def view(self, view: View) -> None: ...
    def step_done(self, result: StepResult) -> None: ...


class Scenario:
    def __init__(
        self,
        stack: Stack,
        narration: Narration,
        *,
        step_timeout: float = 30.0,
        poll: float = 0.1,
        pace: float = 0.0,
    ) -> None:
        self.stack = stack
        self.narration = narration
        self.step_timeout = step_timeout
        self.poll = poll
        self.pace = pace  # a pause after each step, so a person can follow on a terminal
        self.api = KubeHTTP(stack.kube_url)
        nodes = {n.name: n.seats for n in stack.config.nodes}
        self.phase_watch = PhaseWatch(stack.kube_url, NAMESPACE)
        self.observer = Observer(self.api, NAMESPACE, nodes, watch=self.phase_watch)
        self.function_logs = FunctionLogs(
            {t: stack.workdir / "logs" / f"{t}.log" for t in TARGETS}, NAMESPACE
        )
        self.t0 = time.monotonic()
        self.result = DemoResult(ok=False)
        self.registry_checks = 0
        self._pending_sim: list[SimEvent] = []

    # -- plumbing --
    def elapsed(self) -> float:
        return time.monotonic() - self.t0

    def on_sim_event(self, event: SimEvent) -> None:
        self._pending_sim.append(event)

    def _say(self, text: str) -> None:
        at = self.elapsed()
        self.result.transitions.append((round(at, 2), text))
        self.narration.line(at, text)

    def refresh(self) -> View:
        # What vk-cocoon did first: it happened before the API showed its result.
        while self._pending_sim:
            ev = self._pending_sim.pop(0)
            if ev.kind == "hibernated":
                set_name = ev.name.rsplit("-", 1)[0]
                self._say(
                    f"{set_name}: vk-cocoon pushed {ev.name}'s snapshot to the registry "
                    f"as :hibernate ({ev.detail[:19]}...)"
                )
        # Then what the functions did (their own log lines), then what the API now shows.
        for line in self.function_logs.poll():
            self._say(line)
        view, lines = self.observer.poll()
        for line in lines:
            self._say(line)
        self.narration.view(view)
        return view

    def tag_present(self, set_name: str) -> bool:
        prefix = self.stack.config.registry_prefix.strip("/")
        vm = vm_name(NAMESPACE, set_name, 0)
        repo = f"{prefix}/{vm}" if prefix else vm
        self.registry_checks += 1
        resp = requests.head(
            f"{self.stack.registry_url}/v2/{repo}/manifests/{k.TAG_HIBERNATE}",
            headers={
                "Accept": "application/vnd.oci.image.manifest.v1+json, "
                "application/vnd.docker.distribution.manifest.v2+json"
            },
            timeout=5,
        )
        if resp.status_code not in (200, 404):
            raise StepFailed(f"registry answered {resp.status_code} for {repo}:hibernate")
        return resp.status_code == 200

    def wait(self, what: str, check: Callable[[View], bool]) -> View:
        deadline = time.monotonic() + self.step_timeout
        while True:
            self.stack.check_alive()
            view = self.refresh()
            if check(view):
                return view
            if time.monotonic() >= deadline:
                raise StepFailed(f"timed out after {self.step_timeout:.0f}s waiting for {what}")
            time.sleep(self.poll)

    def create(self, name: str, policy: str) -> None:
        self.api.post(set_path(NAMESPACE), set_manifest(name, policy))

    def patch_suspend(self, name: str, value: bool) -> None:
        self.api.merge_patch(set_path(NAMESPACE, name), {"spec": {"suspend": value}})

    def events_for(self, view: View, name: str, reason: str) -> bool:
        return any(e.object_name == name and e.reason == reason for e in view.events)

    # -- the story --
    def steps(self) -> list[tuple[str, Callable[[], None]]]:
        def a_runs() -> None:
            self.create("a", "release")
            self.wait(
                "a Running on node-1",
                lambda v: (
                    "a" in v.sets
                    and v.sets["a"].phase == "Running"
                    and v.sets["a"].node == "node-1"
                ),
            )

        def c_fills() -> None:
            self.create("c", "retain")
            self.wait(
                "c Running on node-2",
                lambda v: (
                    "c" in v.sets
                    and v.sets["c"].phase == "Running"
                    and v.sets["c"].node == "node-2"
                ),
            )

        def b_waits() -> None:
            self.create("b", "release")
            self.wait(
                "b Pending with an unschedulable pod",
                lambda v: (
                    "b" in v.sets
                    and v.sets["b"].phase == "Pending"
                    and v.sets["b"].pod == "unschedulable"
                ),
            )

        def a_releases() -> None:
            self.patch_suspend("a", True)
            self.wait(
                "a Suspended with its pod gone and hibernated-on-node=node-1",
                lambda v: (
                    v.sets["a"].phase == "Suspended"
                    and v.sets["a"].pod == "-"
                    and v.sets["a"].hint == "node-1"
                ),
            )
            if not self.tag_present("a"):
                raise StepFailed(
                    "a is Suspended but its :hibernate snapshot is not in the registry"
                )
            self._say("a: :hibernate snapshot verified in the registry")

        def b_takes_seat() -> None:
            self.wait(
                "b Running on node-1",
                lambda v: v.sets["b"].phase == "Running" and v.sets["b"].node == "node-1",
            )

        def a_queues() -> None:
            # Delivered as Eventarc/Knative would: a non-2xx is redelivered with backoff.
            for attempt in range(1, 6):
                status = self.stack.request_wake(NAMESPACE, "a")
                self._say(f"a: wake request CloudEvent delivered to wake (HTTP {status})")
                if status < 300:
                    break
                time.sleep(0.2 * attempt)
            else:
                raise StepFailed(f"the wake target kept answering HTTP {status}")
            self.wait(
                "a Waking with an unschedulable pod and a WakeNoCapacity event",
                lambda v: (
                    v.sets["a"].phase == "Waking"
                    and v.sets["a"].pod == "unschedulable"
                    and self.events_for(v, "a", k.REASON_WAKE_NO_CAPACITY)
                ),
            )

        def a_restores() -> None:
            self.patch_suspend("b", True)
            view = self.wait(
                "b Suspended and a Running again, hint cleared",
                lambda v: (
                    v.sets["b"].phase == "Suspended"
                    and v.sets["a"].phase == "Running"
                    and v.sets["a"].pod == "running"
                    and v.sets["a"].hint == ""
                ),
            )
            self.result.wake_node = view.sets["a"].node
            self.result.wake_restore = view.sets["a"].restore

        def tag_dropped() -> None:
            deadline = time.monotonic() + self.step_timeout
            while self.tag_present("a"):
                if time.monotonic() >= deadline:
                    raise StepFailed("a's :hibernate tag is still in the registry")
                self.refresh()
                time.sleep(self.poll)
            self.result.tag_present_at_end = False
            self._say("a: :hibernate tag dropped from the registry")

        def b_reclaims() -> None:
            # A has been idle since its wake completed; it opts in to giving its seat.
            self.api.merge_patch(
                set_path(NAMESPACE, "a"),
                {"metadata": {"annotations": {ANN_RECLAIMABLE_AFTER: RECLAIMABLE_AFTER}}},
            )
            self._say(f"a: marked reclaimable-after {RECLAIMABLE_AFTER}")
            time.sleep(1.0)  # a's idle time passes reclaimable-after
            for attempt in range(1, 6):
                status = self.stack.request_wake(NAMESPACE, "b")
                self._say(f"b: wake request CloudEvent delivered to wake (HTTP {status})")
                if status < 300:
                    break
                time.sleep(0.2 * attempt)
            else:
                raise StepFailed(f"the wake target kept answering HTTP {status}")
            view = self.wait(
                "a's seat reclaimed (SeatReclaimed on both), a Suspended, b Running",
                lambda v: (
                    self.events_for(v, "a", REASON_SEAT_RECLAIMED)
                    and self.events_for(v, "b", REASON_SEAT_RECLAIMED)
                    and v.sets["a"].phase == "Suspended"
                    and v.sets["b"].phase == "Running"
                    and v.sets["b"].pod == "running"
                    and v.sets["b"].hint == ""
                ),
            )
            self.result.reclaim_node = view.sets["b"].node

        return [
            ("A (release) runs on node-1", a_runs),
            ("C (retain) fills node-2", c_fills),
            ("B (release) waits Pending for a seat", b_waits),
            ("A suspends: snapshot pushed, pod deleted, seat released", a_releases),
            ("B takes the freed seat on node-1", b_takes_seat),
            ("A is woken into a full pool: Waking, WakeNoCapacity", a_queues),
            ("B suspends and A restores into the freed seat", a_restores),
            ("the wake completes: A's :hibernate tag is dropped", tag_dropped),
            ("B is woken into the full pool: idle A's seat is reclaimed, B restores", b_reclaims),
        ]

    def run(self) -> DemoResult:
        self.t0 = time.monotonic()
        self.phase_watch.start()
        try:
            return self._run()
        finally:
            self.phase_watch.stop()

    def _run(self) -> DemoResult:
        self.api.post(
            "/api/v1/namespaces",
            {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}},
        )
        steps = self.steps()
        for index, (title, body) in enumerate(steps, start=1):
            self.narration.step(index, len(steps), title)
            start = time.monotonic()
            try:
                body()
            except StepFailed as err:
                res = StepResult(title, False, time.monotonic() - start, str(err))
                self.result.steps.append(res)
                self.narration.step_done(res)
                self.result.failed_step = title
                self.result.last_state = self._last_state()
                break
            res = StepResult(title, True, time.monotonic() - start)
            self.result.steps.append(res)
            self.narration.step_done(res)
            if self.pace and index < len(steps):
                self._linger(self.pace)
        else:
            self.result.ok = True
        self.result.total_seconds = self.elapsed()
        self._settle()
        self._count_requests()
        return self.result

    def _settle(self, quiet: float = 0.5, limit: float = 3.0) -> None:
        """Narrate what is still arriving (a function logs its outcome after acting)."""
        until = time.monotonic() + limit
        last = len(self.result.transitions)
        calm_since = time.monotonic()
        while time.monotonic() < until and time.monotonic() - calm_since < quiet:
            self.refresh()
            if len(self.result.transitions) != last:
                last, calm_since = len(self.result.transitions), time.monotonic()
            time.sleep(self.poll)

    def _linger(self, seconds: float) -> None:
        """Keep narrating (the table stays live) while the reader catches up."""
        until = time.monotonic() + seconds
        while time.monotonic() < until:
            self.refresh()
            time.sleep(self.poll)

    def _last_state(self) -> dict[str, Any]:
        view = self.observer.view
        out: dict[str, Any] = {}
        if view is not None:
            out["sets"] = {n: asdict(s) for n, s in view.sets.items()}
            out["seats"] = {n: f"{u}/{t}" for n, (u, t) in view.seats.items()}
            out["events"] = [f"{e.object_name} {e.reason}: {e.message}" for e in view.events]
        if self.stack.simulator is not None and self.stack.simulator.errors:
            out["simulator_errors"] = self.stack.simulator.errors[-5:]
        return out

    def _count_requests(self) -> None:
        sim = self.stack.simulator
        sim_n = sim.api.requests_made if sim is not None else 0
        # + the request-log read itself, + the watch connections.
        demo_n = self.api.requests_made + 1 + self.phase_watch.requests_made
        try:
            total = len(self.stack.api_request_log())
        except (requests.RequestException, ValueError):
            total = -1
        self.result.api_requests = {
            "total": total,
            "simulator": sim_n,
            "demo observer": demo_n,
            "functions": max(total - sim_n - demo_n, 0) if total >= 0 else -1,
        }
        # Access-log counts (the demo's own HEAD checks are among simulator+demo).
        self.result.registry_requests = self.stack.registry_request_counts()
