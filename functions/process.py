"""The process's settings and clients, built once per instance and reused while warm.

Every target reads the settings before it knows whether the event matters, so no
client module is imported here until a trigger first needs that client.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING

from shared import log
from shared.config import Settings

if TYPE_CHECKING:
    from shared.clients.kube import KubeClient
    from shared.reconcile import SnapshotRegistry


class _Cache:
    lock = threading.Lock()
    settings: Settings | None = None


def settings() -> Settings:
    """`Settings.from_env()` once (a ConfigError names the variable: fix the deployment)."""
    with _Cache.lock:
        if _Cache.settings is None:
            loaded = Settings.from_env()
            log.set_format(loaded.log_format)
            _Cache.settings = loaded
        return _Cache.settings


def kube_client(s: Settings) -> KubeClient:
    """The process's Kubernetes client for `s` (built on first use)."""
    from shared.clients import kube as kube_clients  # noqa: PLC0415 - lazy: cold start

    return kube_clients.get_client(s)


def registry_client(s: Settings) -> SnapshotRegistry | None:
    """None when no registry is configured: release and wake then refuse (ConfigError)."""
    if s.registry_base is None:
        return None
    from shared.clients import registry as registry_clients  # noqa: PLC0415 - lazy: cold start

    return registry_clients.get_client(s)


def reset() -> None:
    """Forget the cached settings and clients (tests; a configuration reload)."""
    from shared.clients import kube as kube_clients  # noqa: PLC0415 - lazy: cold start
    from shared.clients import pubsub as pubsub_clients  # noqa: PLC0415
    from shared.clients import registry as registry_clients  # noqa: PLC0415

    with _Cache.lock:
        _Cache.settings = None
    kube_clients.reset_clients()
    registry_clients.reset_clients()
    pubsub_clients.reset_clients()
