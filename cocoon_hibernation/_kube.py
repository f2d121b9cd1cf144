"""Clients for the commands that talk to a cluster: built from the environment (SPEC §11).

`--kubeconfig` overrides `KUBECONFIG`; everything else (registry base, auth,
insecure) comes from the same variables the functions read, so the CLI sees
the cluster and the registry exactly as they do.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from pathlib import Path

from shared import log
from shared.clients.kube import KubeClient
from shared.clients.registry import RegistryClient, get_client
from shared.config import LogFormat, Settings
from shared.errors import CocoonError


def cli_settings(kubeconfig: Path | None) -> Settings:
    """The environment's settings; the library's log lines go to stderr as text."""
    # stdout carries the command's answer (a table, JSON); logs must not mix into it.
    log.configure(LogFormat.TEXT, stream=sys.stderr)
    env = dict(os.environ)
    if kubeconfig is not None:
        env["KUBECONFIG"] = str(kubeconfig)
    return Settings.from_env(env)


def kube_client(settings: Settings) -> KubeClient:
    return KubeClient.from_settings(settings)


def registry_client(settings: Settings) -> RegistryClient | None:
    """None when no registry is configured (status shows `?`, wake refuses)."""
    return get_client(settings) if settings.registry_base is not None else None


def registry_probe(settings: Settings) -> Callable[[str], str]:
    """vm -> "yes" / "no" / "?" (no registry configured) / "error: ..." (never guessed)."""
    client = registry_client(settings)

    def probe(vm: str) -> str:
        if client is None:
            return "?"
        try:
            return "yes" if client.snapshot_present(vm) else "no"
        except CocoonError as err:
            return f"error: {err}"

    return probe
