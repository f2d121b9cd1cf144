"""Clients for the commands that talk to a cluster, built from the functions' variables (so
the CLI sees what they see); `--kubeconfig` and `--context` override as kubectl's do."""

from __future__ import annotations

import dataclasses
import os
import time
from collections.abc import Callable, Mapping
from datetime import timedelta
from functools import partial
from pathlib import Path
from typing import Any

import click

from cocoon_hibernation import _common as c
from shared import constants as k
from shared.clients import kube
from shared.clients.kube_light import ClusterReads, LightKube, items_of
from shared.clients.registry import RegistryClient, get_client
from shared.config import Settings
from shared.errors import CocoonError, ConfigError, NotFound, PermanentError
from shared.models import CocoonSet
from shared.names import SetRef


class KubeClient(kube.KubeClient, ClusterReads):
    """The functions' client plus the CLI's own calls, with the operator's credentials."""

    def get_json(self, what: str, path: str, params: Mapping[str, Any] | None = None) -> Any:
        """GET `path` (`params` by their wire names), retried as every read is."""
        return self._read(what, self._core.send, "GET", path, {}, None, params)

    def dry_run_set(self, obj: Mapping[str, Any], *, replace: bool) -> None:
        """A strict server-side dry run of a CocoonSet's create (or replace, when it exists)."""
        meta = obj.get("metadata") or {}
        ns, name = meta.get("namespace") or "default", meta.get("name", "")
        path = f"/apis/{k.GROUP}/{k.VERSION}/namespaces/{ns}/{k.PLURAL}"
        verb, path = ("PUT", f"{path}/{name}") if replace else ("POST", path)
        what = f"{'REPLACE' if replace else 'CREATE'} cocoonset {ns}/{name} (dry run)"
        query = {"dryRun": "All", "fieldValidation": "Strict"}
        self._call(what, self._core.send, verb, path, {}, dict(obj), query)

    def list_role_bindings(self, namespace: str | None) -> list[dict[str, Any]]:
        """RoleBindings of `namespace`, or every ClusterRoleBinding when None (all pages)."""
        rbac = "/apis/rbac.authorization.k8s.io/v1"
        if namespace is None:
            what, path = "LIST clusterrolebindings", f"{rbac}/clusterrolebindings"
        else:
            what = f"LIST rolebindings in {namespace}"
            path = f"{rbac}/namespaces/{namespace}/rolebindings"
        return [i for body in self.bodies(what, path, {"limit": 500}) for i in items_of(body)]

    def list_webhook_configurations(self) -> dict[str, list[dict[str, Any]]]:
        """Every Mutating- and ValidatingWebhookConfiguration, by kind (one page each)."""
        out: dict[str, list[dict[str, Any]]] = {}
        for kind in ("mutating", "validating"):
            path = f"/apis/admissionregistration.k8s.io/v1/{kind}webhookconfigurations"
            out[kind] = items_of(self.get_json(f"LIST {kind}webhookconfigurations", path))
        return out

    def get_deployment(self, namespace: str, name: str) -> dict[str, Any] | None:
        path = f"/apis/apps/v1/namespaces/{namespace}/deployments/{name}"
        try:
            return dict(self.get_json(f"GET deployment {namespace}/{name}", path))
        except NotFound:
            return None

    def dry_run_create_pod(
        self, namespace: str, body: dict[str, Any], *, as_user: str | None = None
    ) -> None:
        """A server-side dry run; `as_user` is impersonated (the caller needs `impersonate`)."""
        name = (body.get("metadata") or {}).get("name", "")
        who = f" as {as_user}" if as_user else ""
        path = f"/api/v1/namespaces/{namespace}/pods"
        headers = {"Impersonate-User": as_user} if as_user else None
        what = f"CREATE pod {namespace}/{name} (dry run{who})"
        self._call(
            what, self._core.send, "POST", path, {}, body, {"dryRun": "All"}, _headers=headers
        )


def cli_settings(
    kubeconfig: Path | None, context: str | None = None, namespace: str | None = None
) -> Settings:
    """The environment's settings with the command line's cluster choices on top (-n narrows
    the scopes inside COCOON_NAMESPACES); the library logs to stderr at the -v/-q level."""
    c.apply_verbosity()
    env = dict(os.environ)
    if kubeconfig is not None:
        if not kubeconfig.exists():
            # kubectl refuses a --kubeconfig that does not exist rather than fall back.
            raise ConfigError(f"--kubeconfig {kubeconfig}: no such file")
        env["KUBECONFIG"] = str(kubeconfig)
    try:
        settings = Settings.from_env(env)
    except ConfigError as err:
        # A variable with a bad value is unreadable input (exit 2), named by the message.
        c.fail(str(err), code=c.EXIT_USAGE)
    if namespace is not None and not settings.namespace_allowed(namespace):
        raise ConfigError(f"-n {namespace}: outside COCOON_NAMESPACES")
    return dataclasses.replace(
        settings,
        kube_context=settings.kube_context if context is None else context,
        namespaces=settings.namespaces if namespace is None else frozenset({namespace}),
    )


def kube_client(settings: Settings) -> KubeClient:
    return KubeClient.from_settings(settings)


def read_client(settings: Settings) -> KubeClient | LightKube:
    """For reads only (`status`): the standard-library reader when the kubeconfig allows."""
    return LightKube.from_settings(settings) or kube_client(settings)


def registry_client(settings: Settings) -> RegistryClient | None:
    """None when no registry is configured (status reports it unchecked, wake refuses)."""
    return get_client(settings) if settings.registry_base is not None else None


def list_sets(
    client: KubeClient | LightKube, settings: Settings, selector: str | None
) -> list[CocoonSet]:
    """Every set in scope; a selector the API server cannot parse (HTTP 400) is bad usage."""
    out: list[CocoonSet] = []
    try:
        for scope in settings.scopes:
            for page in client.list_sets(scope, label_selector=selector):
                out.extend(page)
    except PermanentError as err:
        if selector and "HTTP 400" in str(err):
            c.fail(f"-l {selector}: {err}", code=c.EXIT_USAGE)
        raise
    return sorted(out, key=lambda cs: (cs.namespace, cs.name))


# How often `--wait` re-reads a set's phase.
POLL_S = 0.25


def phase_of(client: KubeClient, ref: SetRef) -> str | None:
    """The set's phase as its status spells it; None when it has none (or is gone)."""
    cs = client.get_set(ref)
    return cs.phase.value if cs is not None and cs.phase else None


def wait_for_phase(
    client: KubeClient,
    ref: SetRef,
    want: str,
    wait: timedelta,
    *,
    phase: str | None,
    step: Callable[[str], None],
) -> str | None:
    """Re-read the phase until it is `want` or `wait` has passed; the last one read. `phase`
    (the one known) and each change are told through `step` as they happen."""
    deadline = time.monotonic() + wait.total_seconds()
    step(f"{ref}: phase {phase or '-'}")
    while phase != want and time.monotonic() < deadline:
        time.sleep(POLL_S)
        now = phase_of(client, ref)
        if now != phase:
            step(f"{ref}: phase {now or '-'}")
        phase = now
    return phase


def set_action_command(
    name: str, *, wait_for: str, doing: str, help: str, act: Callable[..., Mapping[str, Any]]
) -> Any:
    """A command acting on sets (`wake`, `suspend`): NAMEs, -l or --all, `--wait` for phase
    `wait_for`; `act(client, settings, ref, step, wait=)` makes each set's result row."""

    @click.command(name=name, epilog=c.EXIT_CODES_HELP, help=help)
    @click.argument("names", nargs=-1, metavar="[NS/NAME | NAME -n NS]...")
    @c.kube_options
    @c.set_options
    @click.option("--all", "all_sets", is_flag=True, help="Every set in -n NS (else in all).")
    @click.option(
        "--wait", type=c.Duration(), help=f"Wait up to this long (30s, 5m) for phase {wait_for}."
    )
    @c.output_option
    def command(
        *,
        names: tuple[str, ...],
        kubeconfig: Path | None,
        context: str | None,
        namespace: str | None,
        selector: str | None,
        all_sets: bool,
        wait: timedelta | None,
        output: str,
    ) -> None:
        if sum((bool(names), bool(selector), all_sets)) != 1:
            c.fail("give NAME..., -l SELECTOR or --all (one of them)", code=c.EXIT_USAGE)
        rows: list[Mapping[str, Any]] = []

        def step(spin: Callable[[str], None], start: float, text: str) -> None:
            # Each phase change as it happens: on stdout beside the table (as kubectl rollout
            # status), on stderr when stdout must stay one JSON/YAML document.
            spin(text)
            click.echo(f"{time.monotonic() - start:6.1f}s  {text}", err=output != "table")

        try:
            settings = cli_settings(kubeconfig, context, namespace)
            client = kube_client(settings)
            refs = [c.parse_ref(n, namespace) for n in names] or [
                SetRef(cs.namespace, cs.name) for cs in list_sets(client, settings, selector)
            ]
            for ref in refs:
                with c.progress(f"{doing} {ref}") as spin:
                    announce = partial(step, spin, time.monotonic())
                    rows.append(act(client, settings, ref, announce, wait=wait))
        except CocoonError as err:
            c.fail(str(err))
        if output != "table":
            c.emit_structured([dict(r) for r in rows], output)
        elif not rows:
            click.echo("no CocoonSet matched")
        else:
            for r in rows:  # on stdout when done, on stderr as an error when not
                message = str(r["message"])
                text = message if message.startswith("cocoonset ") else f"{r['set']}: {message}"
                click.echo(text if r["ok"] else f"{c.ERROR_PREFIX}{text}", err=not r["ok"])
        if any(not r["ok"] for r in rows):
            raise SystemExit(c.EXIT_FINDING)

    return command
