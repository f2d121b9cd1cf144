"""Clients for the commands that talk to a cluster: built from the environment (docs/cli.md).

`--kubeconfig` overrides `KUBECONFIG` and `--context` the current context; the
kubeconfig is then found as kubectl finds it (shared/clients/kube.py). Everything
else (registry base, auth, insecure) comes from the same variables the functions
read, so the CLI sees the cluster and the registry exactly as they do.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

from shared.clients.kube import KubeClient
from shared.clients.registry import RegistryClient, get_client
from shared.config import Settings
from shared.errors import CocoonError, RegistryAuthError
from shared.models import CocoonSet
from shared.names import SetRef


def cli_settings(
    kubeconfig: Path | None, context: str | None = None, namespace: str | None = None
) -> Settings:
    """The environment's settings, with the command line's cluster choices on top.

    `namespace` (-n) narrows what a cluster-wide command reads (Settings.scopes),
    inside whatever COCOON_NAMESPACES already allows.
    """
    env = dict(os.environ)
    if kubeconfig is not None:
        if not kubeconfig.exists():
            # kubectl refuses a --kubeconfig that does not exist rather than fall back.
            from shared.errors import ConfigError  # noqa: PLC0415

            raise ConfigError(f"--kubeconfig {kubeconfig}: no such file")
        env["KUBECONFIG"] = str(kubeconfig)
    settings = Settings.from_env(env)
    changes: dict[str, object] = {}
    if context is not None:
        changes["kube_context"] = context
    if namespace is not None:
        if settings.namespaces is not None and namespace not in settings.namespaces:
            from shared.errors import ConfigError  # noqa: PLC0415

            raise ConfigError(f"-n {namespace}: outside COCOON_NAMESPACES")
        changes["namespaces"] = frozenset({namespace})
    return dataclasses.replace(settings, **changes) if changes else settings  # type: ignore[arg-type]


def kube_client(settings: Settings) -> KubeClient:
    return KubeClient.from_settings(settings)


def registry_client(settings: Settings) -> RegistryClient | None:
    """None when no registry is configured (status reports it unchecked, wake refuses)."""
    return get_client(settings) if settings.registry_base is not None else None


@dataclass(frozen=True, slots=True)
class Snapshot:
    """Whether `<vm>:hibernate` is in the registry: present True/False, or None and why."""

    present: bool | None
    reason: str = ""  # why unknown: short, for a table cell


def short_reason(err: CocoonError) -> str:
    """A registry error as a few words for a table cell (the full text goes to -v logs)."""
    text = str(err)
    if isinstance(err, RegistryAuthError):
        return "registry refused the credentials"
    if "timed out" in text:
        return "registry timed out"
    if "cannot reach" in text:
        return "registry unreachable"
    if "answered" in text or "unexpected status" in text:
        return text.rsplit(": ", 1)[-1][:60]
    return text[:60]


def registry_probe(settings: Settings) -> Callable[[str], Snapshot]:
    """vm -> Snapshot; an error is never read as absent."""
    client = registry_client(settings)

    def probe(vm: str) -> Snapshot:
        if client is None:
            return Snapshot(None, "COCOON_REGISTRY_BASE not set")
        try:
            return Snapshot(client.snapshot_present(vm))
        except CocoonError as err:
            from shared import log  # noqa: PLC0415

            log.info("snapshot probe failed", vm=vm, error=str(err))
            return Snapshot(None, short_reason(err))

    return probe


def list_sets(client: KubeClient, settings: Settings, selector: str | None) -> list[CocoonSet]:
    """Every set in scope (Settings.scopes), filtered by a label selector."""
    out: list[CocoonSet] = []
    for scope in settings.scopes:
        for page in client.list_sets(scope):
            out.extend(page)
    if selector:
        match = label_matcher(selector)
        out = [cs for cs in out if match(cs.metadata.labels)]
    return sorted(out, key=lambda cs: (cs.namespace, cs.name))


def label_matcher(selector: str) -> Callable[[dict[str, str]], bool]:
    """A label selector's equality and existence terms (`a=b`, `a==b`, `a!=b`, `a`, `!a`).

    Set-based terms (`in`, `notin`) are refused (ValueError) rather than half-read.
    """
    terms: list[tuple[str, str, str]] = []  # (op, key, value)
    for raw in (t.strip() for t in selector.split(",")):
        if not raw:
            continue
        if " in " in raw or " notin " in raw or "(" in raw:
            raise ValueError(f"selector term {raw!r}: only =, ==, != and existence are supported")
        if "!=" in raw:
            key, value = raw.split("!=", 1)
            terms.append(("!=", key.strip(), value.strip()))
        elif "=" in raw:
            key, value = raw.replace("==", "=").split("=", 1)
            terms.append(("=", key.strip(), value.strip()))
        elif raw.startswith("!"):
            terms.append(("!", raw[1:].strip(), ""))
        else:
            terms.append(("exists", raw, ""))

    def match(labels: dict[str, str]) -> bool:
        for op, key, value in terms:
            ok = {
                "!=": labels.get(key) != value,
                "=": labels.get(key) == value,
                "!": key not in labels,
                "exists": key in labels,
            }[op]
            if not ok:
                return False
        return True

    return match


def chosen_sets(
    client: KubeClient,
    settings: Settings,
    names: Iterable[str],
    *,
    namespace: str | None,
    selector: str | None,
    all_sets: bool,
) -> list[SetRef]:
    """The sets a command acts on: NAMEs (`NS/NAME`, or `NAME` with -n), -l, or --all."""
    from cocoon_hibernation._common import EXIT_USAGE, fail, parse_ref  # noqa: PLC0415

    names = list(names)
    if sum((bool(names), bool(selector), all_sets)) != 1:
        fail("give NAME..., -l SELECTOR or --all (one of them)", code=EXIT_USAGE)
    if names:
        return [parse_ref(n, namespace) for n in names]
    try:
        found = list_sets(client, settings, selector)
    except ValueError as err:
        fail(str(err), code=EXIT_USAGE)
    return [SetRef(cs.namespace, cs.name) for cs in found]
