"""vk-cocoon's hibernate, in its real order and off the simulator's tick.

vk-cocoon (`provider/cocoon/update.go` `hibernate`) does, for a pod asked to
hibernate: Save the snapshot -> Push `<vm>:hibernate` to the registry ->
remove the VM (`cocoon vm rm --force`; a failed remove rolls the pushed tag
back) -> report. The report is the lifecycle annotation `hibernated` with the
observed generation (cocoon-common v0.3.0 `meta/lifecycle.go`; `hibernating`
is the state in between). So the registry's push event reaches the functions
*before* the report: between the two lies the VM's removal, `gap` seconds here.

Each hibernation runs in its own thread so one pod's gap never delays another
pod, or the scheduler and operator of the same simulator.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from devstack.kubehttp import ApiError, KubeHTTP, pod_path
from devstack.registry import push_image
from shared import constants as k
from shared.enums import LifecycleState

# Between the push and the report: a forced `cocoon vm rm` (the VMM is killed, its
# overlay files removed from local disk) and vk-cocoon's annotation patch. Half a
# second is the middle of what that takes on a node; the tests and benchmarks vary it.
DEFAULT_REPORT_GAP_S = 0.5


@dataclass(frozen=True, slots=True)
class Hibernation:
    namespace: str
    name: str
    vm: str
    node: str
    generation: int
    repository: str


@dataclass
class HibernateTimes:
    """perf_counter stamps of one hibernation (benchmarks read them)."""

    pushed: float = 0.0
    reported: float = 0.0
    digest: str = ""


@dataclass
class VkHibernator:
    """Runs each hibernation once, in the real order; `in_flight` says which are running."""

    api: KubeHTTP
    registry_url: str
    gap: float = DEFAULT_REPORT_GAP_S
    on_pushed: Callable[[Hibernation, str], None] | None = None
    on_reported: Callable[[Hibernation, str], None] | None = None
    on_error: Callable[[str], None] | None = None
    times: dict[tuple[str, str], HibernateTimes] = field(default_factory=dict)
    _in_flight: set[tuple[str, str]] = field(default_factory=set)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _threads: list[threading.Thread] = field(default_factory=list)

    def in_flight(self, namespace: str, name: str) -> bool:
        with self._lock:
            return (namespace, name) in self._in_flight

    def start(self, h: Hibernation) -> bool:
        """Begin `h` unless it is already running; False when it was."""
        key = (h.namespace, h.name)
        with self._lock:
            if key in self._in_flight:
                return False
            self._in_flight.add(key)
            self._threads = [t for t in self._threads if t.is_alive()]
            t = threading.Thread(target=self._run, args=(h,), name=f"vk-hibernate-{h.name}")
            t.daemon = True
            self._threads.append(t)
        t.start()
        return True

    def run_now(self, h: Hibernation) -> None:
        """`h` in the calling thread (a simulator stepped by hand, as unit tests do)."""
        key = (h.namespace, h.name)
        with self._lock:
            if key in self._in_flight:
                return
            self._in_flight.add(key)
        self._run(h)

    def join(self, timeout: float = 10.0) -> None:
        deadline = time.monotonic() + timeout
        for t in list(self._threads):
            t.join(max(0.0, deadline - time.monotonic()))

    def _run(self, h: Hibernation) -> None:
        path = pod_path(h.namespace, h.name)
        key = (h.namespace, h.name)
        try:
            # Save: vk-cocoon says it is at work (the state between request and report).
            self.api.merge_patch(
                path,
                {
                    "metadata": {
                        "annotations": {k.ANN_LIFECYCLE_STATE: LifecycleState.HIBERNATING.value}
                    }
                },
            )
            digest = push_image(self.registry_url, h.repository, k.TAG_HIBERNATE)
            stamp = self.times.setdefault(key, HibernateTimes())
            stamp.pushed, stamp.digest = time.perf_counter(), digest
            if self.on_pushed is not None:
                self.on_pushed(h, digest)
            # Remove the VM: the push's notification is already on its way meanwhile.
            if self.gap > 0:
                time.sleep(self.gap)
            self.api.merge_patch(
                path,
                {
                    "metadata": {
                        "annotations": {
                            k.ANN_LIFECYCLE_STATE: LifecycleState.HIBERNATED.value,
                            k.ANN_LIFECYCLE_GENERATION: str(h.generation),
                        }
                    }
                },
            )
            stamp.reported = time.perf_counter()
            if self.on_reported is not None:
                self.on_reported(h, digest)
        except (ApiError, OSError, RuntimeError) as err:
            # The pod vanished or the registry refused: the next tick decides again.
            if self.on_error is not None:
                self.on_error(f"hibernate {h.namespace}/{h.name}: {err}")
        finally:
            with self._lock:
                self._in_flight.discard(key)
