"""What the executor needs from the outside world, as Protocols.

`shared.clients.kube.KubeClient` and the registry client satisfy these; the
executor depends only on the shapes, so the pure tiers never load a client.
"""

from __future__ import annotations

from typing import Any, Protocol

from shared.models import CocoonSet, Pod
from shared.names import SetRef


class SnapshotRegistry(Protocol):
    def snapshot_present(self, vm_name: str) -> bool:
        """HEAD `<base>/<vm>:hibernate`; raises RegistryError/RegistryAuthError, never guesses."""
        ...

    def drop_snapshot(self, vm_name: str) -> object:
        """Delete the `:hibernate` manifest; NotFound is success."""
        ...


class KubeApi(Protocol):
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

    def patch_pod(self, namespace: str, name: str, patch: dict[str, Any]) -> Pod: ...

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
