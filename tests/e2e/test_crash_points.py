"""Crash points: a fault at every mutating API request of a release, a wake start and a
wake completion, then the platform's redelivery; no action doubled, no record lost.

Black box: CloudEvents through functions-framework, the embedded Kubernetes API
and a real Distribution registry, with a forwarding proxy (tests/fixtures/
faultproxy.py) between the function and each server. For each request index of
a clean run and each fault kind (500 before applying, a cut before applying,
applied and then the answer lost), the test delivers the event, redelivers it
only after a non-2xx (a few times, as Eventarc/Pub/Sub would), then checks what
a user relies on (docs/how-it-works.md#failure-semantics):

- exactly one pod delete (release) or create (wake start); the stash and the
  keep-snapshot flag before the delete, `Waking` before the create, the tag
  dropped only after the VM is live;
- exactly one Kubernetes Event per occurrence (SeatReleased, WakeCompleted);
- the counters exactly once, except in the one window docs/how-it-works.md states (the
  answer to the Event's create lost);
- the lifecycle CloudEvents (`released`, `woken`) published, every copy with
  the occurrence's stable id;
- a 2xx answer only when nothing owed is left.

What is faked and why: Pub/Sub (no emulator without the gcloud SDK and Java;
the library client is replaced by a recorder, as in test_lifecycle_e2e.py).
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml
from cloudevents.http import CloudEvent

from shared import constants as k
from shared.clients import pubsub
from tests.e2e.test_lifecycle_e2e import Library, RecordingPublisherClient
from tests.e2e.test_release_e2e import hibernated_main, metric_lines, post, suspended_set
from tests.e2e.test_wake_e2e import changed_event, report_live, wake_event
from tests.fixtures.cocoon_objects import NS, SET, VM0
from tests.fixtures.faultproxy import KINDS, FaultProxy, mutating
from tests.fixtures.reconcile_world import World

# Faults are injected by a forwarding proxy that reads and rewrites HTTP; the
# real kube-apiserver is https-only, so these run against the embedded API.
pytestmark = [
    pytest.mark.e2e,
    pytest.mark.embedded_only("the fault proxy speaks plain HTTP; the real server is TLS-only"),
]

POD = f"{SET}-0"
POD_PATH = f"/api/v1/namespaces/{NS}/pods/{POD}"
PODS_PATH = f"/api/v1/namespaces/{NS}/pods"
SET_PATH = f"/apis/{k.GROUP}/{k.VERSION}/namespaces/{NS}/{k.PLURAL}/{SET}"
EVENTS_PATH = f"/api/v1/namespaces/{NS}/events"
TOPIC = "projects/acme/topics/cocoon-lifecycle"
REDELIVERIES = 4


# --- the stack: proxies in front of the API and the registry ------------------------------


@dataclass
class Stack:
    world: World
    kube: FaultProxy
    registry: FaultProxy
    library: Library
    capsys: pytest.CaptureFixture[str]
    make_app: Callable[[str], Any]
    _apps: dict[str, Any] = field(default_factory=dict)
    _apps_lock: threading.Lock = field(default_factory=threading.Lock)

    def make(self, target: str) -> Any:
        """A test client of `target`; one app per target, as one process serves them all
        (functions-framework's create_app is not safe to call from concurrent threads)."""
        with self._apps_lock:
            if target not in self._apps:
                self._apps[target] = self.make_app(target).application
            return self._apps[target].test_client()

    def fresh(self) -> None:
        """An empty cluster (CRD kept), no faults, no records: one scenario run."""
        self.world.kube.reset()
        self.kube.reset()
        self.registry.reset()
        self.library.client.messages.clear()
        self.capsys.readouterr()

    def deliver(self, target: str, event: CloudEvent) -> list[int]:
        """Deliver like the platform: redeliver only after a non-2xx, a few times."""
        client = self.make(target)
        answers = []
        for _ in range(1 + REDELIVERIES):
            status = int(post(client, event).status_code)
            answers.append(status)
            if 200 <= status < 300:
                break
        return answers

    def counted(self, metric: str) -> int:
        out = self.capsys.readouterr().out
        return sum(int(r.get("value", 1)) for r in metric_lines(out, metric))

    def published(self, kind: str) -> list[dict[str, Any]]:
        return [
            e for e in self.library.client.events() if e["type"].endswith(f".hibernation.{kind}")
        ]

    def events(self, reason: str) -> list[Any]:
        return [e for e in self.world.events(NS) if e.reason == reason]

    def applied(self, method: str, path: str) -> list[int]:
        """Indexes in the API server's own log of the requests it applied (2xx)."""
        return [
            i
            for i, r in enumerate(self.world.api_requests())
            if r["method"] == method and r["path"] == path and 200 <= r["status"] < 300
        ]


@pytest.fixture
def stack(
    world: World,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    function_app: Any,
) -> Iterator[Stack]:
    kube_proxy = FaultProxy(world.kube.url).start()
    registry_proxy = FaultProxy(world.registry.url).start()
    config = yaml.safe_load(world.kubeconfig.read_text())
    config["clusters"][0]["cluster"]["server"] = kube_proxy.url
    proxied = tmp_path / "kubeconfig"
    proxied.write_text(yaml.safe_dump(config))
    monkeypatch.setenv("KUBECONFIG", str(proxied))
    monkeypatch.setenv("COCOON_REGISTRY_BASE", f"{registry_proxy.host}/{world.prefix}")
    monkeypatch.setenv("COCOON_EVENTS_TOPIC", TOPIC)
    library = Library(RecordingPublisherClient())
    monkeypatch.setattr(pubsub, "_library_client", library)
    try:
        yield Stack(world, kube_proxy, registry_proxy, library, capsys, function_app)
    finally:
        kube_proxy.stop()
        registry_proxy.stop()


# --- the three phases ----------------------------------------------------------------------


def pushed(world: World) -> CloudEvent:
    return CloudEvent(
        {"type": k.CE_SNAPSHOT_PUSHED, "source": "//tests/registry", "id": uuid.uuid4().hex},
        {"repository": f"{world.prefix}/{VM0}", "tag": k.TAG_HIBERNATE},
    )


def setup_release(s: Stack) -> None:
    cs = suspended_set(s.world)
    hibernated_main(s.world, cs, node="node-7")
    s.world.push_snapshot(VM0)


def run_release(s: Stack) -> list[int]:
    return s.deliver("release", pushed(s.world))


def setup_wake_start(s: Stack) -> None:
    setup_release(s)
    assert run_release(s)[-1] == 200
    # The kubelet's part: the deleted pod's grace period ends (the emulator runs none).
    s.world.core.delete_namespaced_pod(POD, NS, grace_period_seconds=0)
    s.library.client.messages.clear()
    s.capsys.readouterr()


def run_wake_start(s: Stack) -> list[int]:
    return s.deliver("wake", wake_event())


def setup_wake_completion(s: Stack) -> None:
    setup_wake_start(s)
    assert run_wake_start(s)[-1] == 200
    report_live(s.world, node="node-7")
    s.library.client.messages.clear()
    s.capsys.readouterr()


def run_wake_completion(s: Stack) -> list[int]:
    return s.deliver("wake", changed_event())


# --- invariants ----------------------------------------------------------------------------


def check_release(s: Stack, answers: list[int], *, window: bool) -> None:
    """`window`: the fault hit the answer to SeatReleased's create (the count may be lost)."""
    w = s.world
    assert 200 <= answers[-1] < 300, answers
    deletes = s.applied("DELETE", POD_PATH)
    assert len(deletes) == 1, "exactly one pod delete"
    stash = [
        i
        for i, r in enumerate(w.api_requests())
        if r["method"] == "PATCH" and r["path"] == SET_PATH and 200 <= r["status"] < 300
    ]
    flags = s.applied("PATCH", POD_PATH)
    assert stash and stash[0] < deletes[0], "the stash lands before the delete"
    # The flag is best-effort (docs/design.md#release-delete: a failed flag does not block the
    # delete); when it lands, it lands before the delete.
    assert all(f < deletes[0] for f in flags), "the keep-snapshot flag lands before the delete"
    cs = w.get_set(NS, SET)
    ann = cs["metadata"]["annotations"]
    assert cs["status"]["phase"] == "Suspended"
    assert ann[k.ANN_HIBERNATED_ON_NODE] == "node-7"
    assert ann[k.ANN_DELETE_VM_NAMES] == VM0
    # Nothing owed after a 2xx.
    assert ann.get(k.ANN_RELEASE_REPORTED) == ann[k.ANN_RELEASE_ROUND]
    assert len(s.events(k.REASON_SEAT_RELEASED)) == 1
    counted = s.counted(k.METRIC_PODS_DELETED)
    assert counted == (counted if window else 1) and counted <= 1, counted
    released = s.published("released")
    assert released, "the released lifecycle event went out"
    want = f"released:{cs['metadata']['uid']}:g{cs['metadata']['generation']}"
    assert {e["id"] for e in released} == {want}
    assert w.snapshot_present(VM0), "the release path never drops a tag"


def check_wake_start(s: Stack, answers: list[int]) -> None:
    w = s.world
    assert 200 <= answers[-1] < 300, answers
    creates = s.applied("POST", PODS_PATH)
    assert len(creates) == 1, "exactly one main pod create"
    waking = [
        i
        for i, r in enumerate(w.api_requests())
        if r["method"] == "PATCH" and r["path"] == SET_PATH + "/status" and r["status"] < 300
    ]
    assert waking and waking[0] < creates[0], "Waking is persisted before the create"
    cs = w.get_set(NS, SET)
    assert cs["status"]["phase"] == "Waking"
    [pod] = w.pods(NS, SET)
    assert pod.metadata.annotations[k.ANN_RESTORE] == k.TRUE
    assert w.snapshot_present(VM0), "a restoring wake keeps the tag"
    assert s.events(k.REASON_WAKE_COMPLETED) == []


def check_wake_completion(s: Stack, answers: list[int], *, window: bool) -> None:
    w = s.world
    assert 200 <= answers[-1] < 300, answers
    cs = w.get_set(NS, SET)
    ann = cs["metadata"]["annotations"]
    assert cs["status"]["phase"] == "Running"
    assert k.ANN_HIBERNATED_ON_NODE not in ann
    assert k.ANN_WAKE_REPORT_OWED not in ann, "nothing owed after a 2xx"
    assert not w.snapshot_present(VM0), "the tag is dropped once the VM is live"
    assert len(s.events(k.REASON_WAKE_COMPLETED)) == 1
    counted = s.counted(k.METRIC_WAKE)
    assert counted <= 1 and (window or counted == 1), counted
    woken = s.published("woken")
    assert woken, "the woken lifecycle event went out"
    [pod] = w.pods(NS, SET)
    assert {e["id"] for e in woken} == {f"woken:{cs['metadata']['uid']}:{pod.metadata.uid}"}
    assert {e["data"]["placement"] for e in woken} == {k.PLACEMENT_HINT_NODE}
    assert len(s.applied("POST", PODS_PATH)) == 0, "completion creates nothing"


# --- the crash-point sweep ---------------------------------------------------------------


PHASES: dict[str, tuple[Callable[[Stack], None], Callable[[Stack], list[int]]]] = {
    "release": (setup_release, run_release),
    "wake-start": (setup_wake_start, run_wake_start),
    "wake-completion": (setup_wake_completion, run_wake_completion),
}


def clean_mutations(s: Stack, phase: str) -> list[tuple[str, str]]:
    """The mutating API requests of a clean run of `phase`, in order."""
    setup, run = PHASES[phase]
    begin(s, setup)
    assert run(s) == [200]
    return [(r.method, r.path) for r in s.kube.requests(mutating)]


def begin(s: Stack, setup: Callable[[Stack], None]) -> None:
    """A fresh world in the state before the phase; the logs then hold only the phase."""
    s.fresh()
    setup(s)
    s.kube.reset()
    s.registry.reset()
    s.world.reset_log()


def check(s: Stack, phase: str, answers: list[int], *, window: bool) -> None:
    if phase == "release":
        check_release(s, answers, window=window)
    elif phase == "wake-start":
        check_wake_start(s, answers)
    else:
        check_wake_completion(s, answers, window=window)


def _request(method: str, path: str) -> Callable[[str, str], bool]:
    return lambda m, p: (m, p) == (method, path)


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("phase", list(PHASES))
def test_every_request_index_survives_a_fault(stack: Stack, phase: str, kind: str) -> None:
    requests = clean_mutations(stack, phase)
    assert requests, "a clean run writes something"
    setup, run = PHASES[phase]
    for index, (method, path) in enumerate(requests):
        begin(stack, setup)
        # By request and occurrence, not by index: the writes sent at once (docs/reads.md)
        # reach the proxy in either order.
        earlier = requests[:index].count((method, path))
        stack.kube.arm(kind, nth=earlier, match=_request(method, path))
        answers = run(stack)
        faulted = [r for r in stack.kube.requests() if r.fault]
        assert faulted and (faulted[0].method, faulted[0].path) == (method, path), (
            index,
            faulted,
        )
        # The documented window: the answer to the Event create that decides a count.
        window = kind == "lost" and method == "POST" and path == EVENTS_PATH
        try:
            check(stack, phase, answers, window=window)
        except AssertionError as e:
            raise AssertionError(f"{phase}: {kind} at request {index} {method} {path}: {e}") from e


# --- registry faults ----------------------------------------------------------------------


def _manifest_head(method: str, path: str) -> bool:
    return method == "HEAD" and "/manifests/" in path


def _manifest_delete(method: str, path: str) -> bool:
    return method == "DELETE" and "/manifests/" in path


@pytest.mark.parametrize("kind", ["5xx", "cut", "down"])
@pytest.mark.parametrize(
    ("phase", "match"),
    [
        ("release", _manifest_head),
        ("wake-start", _manifest_head),
        ("wake-completion", _manifest_delete),
    ],
    ids=["release-probe", "wake-probe", "tag-delete"],
)
def test_registry_faults_retry_and_never_guess(
    stack: Stack, phase: str, match: Callable[[str, str], bool], kind: str
) -> None:
    setup, _run = PHASES[phase]
    begin(stack, setup)
    if kind == "down":
        stack.registry.stop()
    else:
        stack.registry.arm(kind, match=match, times=None)
    client = stack.make("release" if phase == "release" else "wake")
    event = (
        pushed(stack.world)
        if phase == "release"
        else (wake_event() if phase == "wake-start" else changed_event())
    )
    first = int(post(client, event).status_code)
    assert first >= 500, "a registry error is retried, never an answer"
    mutated = [
        (r["method"], r["path"])
        for r in stack.world.api_requests()
        if r["method"] in ("POST", "DELETE") and r["status"] < 300
    ]
    # Who asked is recorded with the unsuspend, before the registry is asked: a record
    # of the request, not an effect of the probe.
    asked = stack.events(k.REASON_WAKE_REQUESTED)
    if phase == "wake-start":
        assert len(asked) == 1
        mutated = [m for m in mutated if not m[1].endswith("/events")]
    # Fail closed: no delete over an unverified snapshot, no fresh create, and the
    # wake does not complete (no WakeCompleted) while the tag is not dropped.
    assert mutated == [], mutated
    if phase == "release":
        assert stack.events(k.REASON_SEAT_RELEASED) == []
    assert stack.events(k.REASON_WAKE_COMPLETED) == []
    if kind == "down":
        stack.registry.start()
    stack.registry.disarm()
    answers = stack.deliver("release" if phase == "release" else "wake", event)
    check(stack, phase, answers, window=False)


# --- concurrent duplicates ---------------------------------------------------------------


@pytest.mark.parametrize("phase", list(PHASES))
def test_ten_concurrent_duplicates_with_random_500s(stack: Stack, phase: str) -> None:
    setup, run = PHASES[phase]
    begin(stack, setup)
    stack.kube.flaky("5xx", 0.3)
    answers: list[list[int]] = []
    lock = threading.Lock()
    start = threading.Barrier(10)

    def one() -> None:
        start.wait()
        got = run(stack)
        with lock:
            answers.append(got)

    threads = [threading.Thread(target=one) for _ in range(10)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert len(answers) == 10
    stack.kube.disarm()
    if not any(200 <= a[-1] < 300 for a in answers):
        # Every duplicate gave up: the scheduled sweep is the safety net.
        tick = CloudEvent(
            {"type": k.CE_SWEEP_REQUESTED, "source": "//tests", "id": uuid.uuid4().hex},
            {"dryRun": False},
        )
        assert post(stack.make("sweep"), tick).status_code == 200
    last = run(stack)  # one more event after the storm: converged, nothing more emitted
    check(stack, phase, [*last], window=False)


def test_the_clean_runs_write_what_the_readme_says(stack: Stack) -> None:
    """The request sequences the crash points walk (a changed sequence is a changed contract)."""

    def short(reqs: list[tuple[str, str]]) -> list[str]:
        out = []
        for method, path in reqs:
            what = path.replace(SET_PATH, "set").replace(POD_PATH, "pod").replace(PODS_PATH, "pods")
            out.append(f"{method} {what.replace(EVENTS_PATH, 'events')}")
        return out

    def rounds(reqs: list[str], sizes: list[int]) -> list[list[str]]:
        """The requests in rounds of the given sizes, each sorted: a round's writes are
        sent at once (docs/reads.md, "Writes sent at once") and arrive in either order."""
        assert sum(sizes) == len(reqs), reqs
        out, at = [], 0
        for n in sizes:
            out.append(sorted(reqs[at : at + n]))
            at += n
        return out

    assert rounds(short(clean_mutations(stack, "release")), [2, 1, 2, 1]) == [
        ["PATCH pod", "PATCH set"],  # keep-snapshot flag | stash + release round
        ["DELETE pod"],
        ["PATCH set/status", "POST events"],  # Suspended | SeatReleased (named by the round)
        ["PATCH set"],  # release-reported
    ]
    assert rounds(short(clean_mutations(stack, "wake-start")), [1, 1, 1, 2]) == [
        ["PATCH set"],  # spec.suspend=false + who asked
        ["POST events"],  # WakeRequested (named by that write)
        ["PATCH set/status"],  # Waking
        ["PATCH set", "POST pods"],  # wake-started | the restore-intent main
    ]
    assert short(clean_mutations(stack, "wake-completion")) == [
        "PATCH set",  # hint cleared + report owed (one CAS)
        "POST events",  # WakeCompleted (named by the restored pod)
        "PATCH set",  # owed marker removed
        "PATCH set/status",  # Running
    ]


# --- the sweep finishes what redelivery did not ------------------------------------------


def _events_create(method: str, path: str) -> bool:
    return method == "POST" and path == EVENTS_PATH


def _sweep_tick() -> CloudEvent:
    return CloudEvent(
        {"type": k.CE_SWEEP_REQUESTED, "source": "//tests", "id": uuid.uuid4().hex},
        {"dryRun": False},
    )


@pytest.mark.parametrize("phase", ["release", "wake-completion"])
def test_an_owed_report_the_platform_gave_up_on_is_emitted_by_the_sweep(
    stack: Stack, phase: str
) -> None:
    setup, run = PHASES[phase]
    begin(stack, setup)
    # Every delivery's Event create fails: the platform gives up (Eventarc drops it).
    stack.kube.arm("5xx", match=_events_create, times=None)
    answers = run(stack)
    assert all(a >= 500 for a in answers), "owed work is never acknowledged"
    reason = k.REASON_SEAT_RELEASED if phase == "release" else k.REASON_WAKE_COMPLETED
    assert stack.events(reason) == []
    ann = stack.world.get_set(NS, SET)["metadata"]["annotations"]
    if phase == "release":
        assert ann[k.ANN_RELEASE_ROUND] != ann.get(k.ANN_RELEASE_REPORTED)  # durable: owed
    else:
        assert k.ANN_WAKE_REPORT_OWED in ann
    stack.kube.disarm()

    assert post(stack.make("sweep"), _sweep_tick()).status_code == 200

    check(stack, phase, [200], window=False)
