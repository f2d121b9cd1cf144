"""What the engines need from the outside world, as shapes (importing it loads no engine and
no client). `KubeApi` is every Kubernetes call any engine makes; the narrow protocols it is
made of name what a single piece of code reads."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any, Literal, Protocol

if TYPE_CHECKING:  # the cold path's trigger carries a `Report`: no pydantic for it
    from shared.models import CocoonSet, Pod
    from shared.names import SetRef

# The page size of every paged LIST (the sweep's, the reclaimer's search).
PAGE_SIZE = 500


class SnapshotRegistry(Protocol):
    def snapshot_present(self, vm_name: str) -> bool:
        """HEAD `<base>/<vm>:hibernate`; raises RegistryError/RegistryAuthError, never guesses."""

    def drop_snapshot(self, vm_name: str) -> object:
        """Delete the `:hibernate` manifest; NotFound is success."""


class SetLister(Protocol):
    """Pages of sets: the sweep's stream, the reclaimer's search for idle seats."""

    def list_sets(
        self, namespace: str | None, *, limit: int = PAGE_SIZE
    ) -> Iterator[list[CocoonSet]]: ...


class LineReader(Protocol):
    """The line of waiting wakes: read it, ungate a pod."""

    def list_pods_matching(
        self,
        namespace: str | None,
        label_selector: str,
        *,
        limit: int = PAGE_SIZE,
        field_selector: str | None = None,
        from_cache: bool = False,
    ) -> Iterator[list[Pod]]: ...

    def patch_pod(self, namespace: str, name: str, patch: dict[str, Any]) -> Pod: ...


class KubeApi(SetLister, LineReader, Protocol):
    def list_pod_metrics(self, namespace: str, label_selector: str) -> list[dict[str, Any]]:
        """metrics.k8s.io PodMetrics (CPU activity); raises CocoonError when unavailable."""

    def watch_pod(self, namespace: str, name: str, *, timeout: float) -> Iterator[Pod | None]:
        """The pod now, then after each change (the push's wait for vk-cocoon's report)."""

    def get_set(self, ref: SetRef) -> CocoonSet | None: ...

    def patch_set(
        self, ref: SetRef, patch: dict[str, Any], *, resource_version: str | None = None
    ) -> CocoonSet: ...

    def patch_set_status(
        self, ref: SetRef, patch: dict[str, Any], *, resource_version: str | None = None
    ) -> CocoonSet: ...

    def list_pods(self, ref: SetRef, *, not_older_than: str | None = None) -> list[Pod]: ...

    def get_pod(self, namespace: str, name: str) -> Pod | None: ...

    def create_pod(self, namespace: str, body: dict[str, Any]) -> Pod: ...

    def delete_pod(
        self, namespace: str, name: str, *, uid: str, resource_version: str | None = None
    ) -> bool: ...

    def emit_event(
        self,
        cs: CocoonSet,
        *,
        reason: str,
        message: str,
        type: str = "Normal",
        key: str | None = None,
    ) -> bool: ...


@dataclass(frozen=True, slots=True)
class Report:
    """vk-cocoon's `hibernated` report on pod `namespace/pod`, seen landing at `at` (UTC):
    by the push's watch, or in the audit event of the report's own patch."""

    namespace: str
    pod: str
    at: datetime
    source: Literal["push", "audit"]
