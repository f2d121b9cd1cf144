"""A read-only Kubernetes client on the standard library for `status` and its watch (importing
`kubernetes` costs most of a run). For what it does not cover (auth-provider, proxy, in-cluster,
google auth) `LightKube.from_settings` answers None and the caller uses the official client."""

from __future__ import annotations

import base64
import http.client
import json
import os
import ssl
import subprocess
import tempfile
import time
import urllib.parse
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from shared import constants as k
from shared.clients import kube as full
from shared.config import KubeAuth, Settings
from shared.errors import TransientError
from shared.models import CocoonSet, Pod

_EXEC_TIMEOUT_S = 60
_WATCH_TIMEOUT_S = 290  # the server ends a watch after this; it is then resumed


class _Unsupported(Exception):
    """This kubeconfig needs the official client."""


# The entries naming a file, relative to the kubeconfig that holds them.
_FILE_KEYS = ("certificate-authority", "client-certificate", "client-key", "tokenFile")


def _load(paths: list[str]) -> dict[str, Any]:
    """The merged kubeconfig (kubectl's rules: first definition wins), file paths absolute."""
    merged: dict[str, Any] = {"clusters": {}, "users": {}, "contexts": {}}
    current = ""
    for path in paths:
        doc = full.read_kubeconfig(path) or {}  # kubectl skips a missing file of the list
        current = current or str(doc.get("current-context") or "")
        base = os.path.dirname(os.path.abspath(os.path.expanduser(path)))
        for kind, inner in (("clusters", "cluster"), ("users", "user"), ("contexts", "context")):
            for entry in doc.get(kind) or []:
                if not isinstance(entry, dict) or not isinstance(entry.get("name"), str):
                    raise _Unsupported
                body = entry.get(inner) or {}
                for key in _FILE_KEYS if isinstance(body, dict) else ():
                    if body.get(key):
                        body[key] = os.path.join(base, str(body[key]))
                merged[kind].setdefault(entry["name"], body)
    return {**merged, "current-context": current}


def _temp(data: str) -> str:
    # ssl wants files for a client certificate and key: written 0600, removed after loading.
    fd, path = tempfile.mkstemp(prefix="cocoon-kube-", suffix=".pem")
    with os.fdopen(fd, "wb") as f:
        f.write(base64.b64decode(data))
    return path


def _exec_credential(spec: Mapping[str, Any]) -> Mapping[str, Any]:
    """Run the kubeconfig's `exec` plugin once; its ExecCredential's status."""
    command = spec.get("command")
    if not isinstance(command, str) or spec.get("interactiveMode") == "Always":
        raise _Unsupported
    env = {**os.environ, **{str(i.get("name")): str(i.get("value")) for i in spec.get("env") or []}}
    api_version = spec.get("apiVersion") or "client.authentication.k8s.io/v1"
    info = {"apiVersion": api_version, "kind": "ExecCredential", "spec": {"interactive": False}}
    env["KUBERNETES_EXEC_INFO"] = json.dumps(info)
    try:
        proc = subprocess.run(
            [command, *[str(a) for a in spec.get("args") or []]],
            env=env,
            capture_output=True,
            text=True,
            timeout=_EXEC_TIMEOUT_S,
            check=False,
        )
        status = json.loads(proc.stdout).get("status") if proc.returncode == 0 else None
    except (OSError, ValueError, AttributeError, subprocess.TimeoutExpired):
        status = None  # AttributeError: JSON that is not an object
    if not isinstance(status, dict):
        raise _Unsupported  # the official client runs it again and says what failed
    return status


def _target(settings: Settings) -> LightKube:
    config = _load((settings.kubeconfig or full.default_kubeconfig()).split(os.pathsep))
    ctx = config["contexts"].get(settings.kube_context or config["current-context"])
    if not isinstance(ctx, dict):
        raise _Unsupported
    cluster = config["clusters"].get(ctx.get("cluster"))
    user = config["users"].get(ctx.get("user"), {})
    if not isinstance(cluster, dict) or not isinstance(user, dict):
        raise _Unsupported
    if cluster.get("proxy-url") or user.get("auth-provider"):
        raise _Unsupported
    server = urllib.parse.urlsplit(str(cluster.get("server") or ""))
    if server.scheme not in ("http", "https") or not server.hostname:
        raise _Unsupported
    target = LightKube(server)

    if user.get("exec"):
        cred = _exec_credential(user["exec"])
        user = {"token": cred.get("token")}
        for ours, theirs in (("certificate", "clientCertificateData"), ("key", "clientKeyData")):
            if cred.get(theirs):
                user[f"client-{ours}-data"] = base64.b64encode(str(cred[theirs]).encode()).decode()
    token = user.get("token")
    if not token and user.get("tokenFile"):
        with open(user["tokenFile"], encoding="utf-8") as f:
            token = f.read().strip()
    if token:
        target.headers["Authorization"] = f"Bearer {token}"
    elif user.get("username") is not None:
        pair = f"{user.get('username')}:{user.get('password') or ''}".encode()
        target.headers["Authorization"] = f"Basic {base64.b64encode(pair).decode()}"

    if server.scheme == "https":
        ca_data = cluster.get("certificate-authority-data")
        ca_file = cluster.get("certificate-authority")
        context = ssl.create_default_context(
            cafile=ca_file if ca_file and not ca_data else None,
            cadata=base64.b64decode(ca_data).decode() if ca_data else None,
        )
        if cluster.get("insecure-skip-tls-verify"):
            context.check_hostname = False
            context.verify_mode = ssl.CERT_NONE
        cert, key = user.get("client-certificate-data"), user.get("client-key-data")
        cert_file, key_file = user.get("client-certificate"), user.get("client-key")
        if cert or cert_file:
            cert_path = _temp(cert) if cert else str(cert_file)
            key_path = _temp(key) if key else key_file
            made = [p for p, data in ((cert_path, cert), (key_path, key)) if data and p]
            try:
                context.load_cert_chain(cert_path, key_path)
            finally:
                for p in made:
                    os.unlink(p)
        target.context = context
        target.server_hostname = cluster.get("tls-server-name") or None
    return target


def items_of(body: Mapping[str, Any]) -> list[dict[str, Any]]:
    return [i for i in body.get("items") or [] if isinstance(i, dict)]


class ClusterReads:
    """Reads only the command line makes (nodes need RBAC the functions do not have),
    over a client's `get_json`: the light reader's and the CLI's official client's."""

    def get_json(self, what: str, path: str, params: Mapping[str, Any] | None = None) -> Any:
        raise NotImplementedError

    def bodies(self, what: str, path: str, params: Mapping[str, Any]) -> Iterator[dict[str, Any]]:
        return full.follow_pages(
            lambda token: self.get_json(what, path, {**params, "continue": token})
        )

    def list_nodes(self, label_selector: str | None = None) -> list[dict[str, Any]]:
        """Raw Node items (one LIST): `status.allocatable.pods` is a pool's capacity."""
        body = self.get_json("LIST nodes", "/api/v1/nodes", {"labelSelector": label_selector})
        return items_of(body)

    def list_events(self, namespace: str | None, field_selector: str) -> list[dict[str, Any]]:
        """Raw core/v1 Event items of a namespace (or all: None) matching a field selector."""
        path = "/api/v1/events" if namespace is None else f"/api/v1/namespaces/{namespace}/events"
        what = "LIST events" + (f" in {namespace}" if namespace else "")
        return items_of(self.get_json(what, path, {"fieldSelector": field_selector}))


@dataclass
class LightKube(ClusterReads):
    """The reads `status` makes (the names and types of KubeClient's), and nothing else."""

    server: urllib.parse.SplitResult
    headers: dict[str, str] = field(default_factory=lambda: {"Accept": "application/json"})
    context: ssl.SSLContext | None = None
    server_hostname: str | None = None
    timeout: tuple[float, float] = full.DEFAULT_TIMEOUT

    @classmethod
    def from_settings(cls, settings: Settings) -> LightKube | None:
        """A reader for this configuration, or None when the official client is needed."""
        if settings.kube_auth is KubeAuth.GOOGLE:
            return None
        if not settings.kubeconfig and not os.path.exists(full.default_kubeconfig()):
            return None  # in-cluster (or nothing): the official client says which
        try:
            return _target(settings)
        except (_Unsupported, OSError, ValueError, ssl.SSLError, KeyError, TypeError):
            return None

    @contextmanager
    def _get(
        self, what: str, path: str, params: Mapping[str, Any], read_timeout: float
    ) -> Iterator[http.client.HTTPResponse]:
        """One GET, reported to -v's observer; its response when the status is below 400."""
        query = urllib.parse.urlencode({key: v for key, v in params.items() if v is not None})
        url_path = (self.server.path.rstrip("/") + path) + (f"?{query}" if query else "")
        host, port, connect = self.server.hostname or "", self.server.port, self.timeout[0]
        base = f"{self.server.scheme}://{self.server.netloc}"
        conn: http.client.HTTPConnection
        if self.server.scheme == "https":
            conn = http.client.HTTPSConnection(host, port, timeout=connect, context=self.context)
            if self.server_hostname:
                # SNI and the certificate check against tls-server-name, not the address.
                conn._server_hostname = self.server_hostname  # type: ignore[attr-defined]
        else:
            conn = http.client.HTTPConnection(host, port, timeout=connect)
        start, status = time.monotonic(), None
        try:
            try:
                conn.request("GET", url_path, headers=self.headers)
                if conn.sock is not None:
                    conn.sock.settimeout(read_timeout)
                resp = conn.getresponse()
                status = resp.status
            finally:
                if full._request_observer is not None:
                    full._request_observer("GET", base + url_path, status, time.monotonic() - start)
            if resp.status >= 400:
                body = resp.read().decode("utf-8", "replace")
                raise full.translate_status(resp.status, resp.reason, body, what)
            yield resp
        except (OSError, http.client.HTTPException) as e:
            reason = getattr(e, "strerror", None) or str(e) or type(e).__name__
            raise TransientError(f"{what}: cannot reach the API server at {base}: {reason}") from e
        finally:
            conn.close()

    def get_json(self, what: str, path: str, params: Mapping[str, Any] | None = None) -> Any:
        return full.read_retried(what, lambda: self._get_once(what, path, params or {}))

    def _get_once(self, what: str, path: str, params: Mapping[str, Any]) -> dict[str, Any]:
        with self._get(what, path, params, self.timeout[1]) as resp:
            body = resp.read()
        try:
            data = json.loads(body) if body else {}
        except ValueError as e:
            raise TransientError(f"{what}: the API server answered non-JSON") from e
        return data if isinstance(data, dict) else {}

    def list_sets(
        self, namespace: str | None, *, label_selector: str | None = None
    ) -> Iterator[list[CocoonSet]]:
        yield full.readable_sets(self.list_raw(k.PLURAL, namespace, label_selector)[0])

    def list_pods_matching(self, namespace: str | None, label_selector: str) -> Iterator[list[Pod]]:
        yield [full.parse(Pod, i) for i in self.list_raw("pods", namespace, label_selector)[0]]

    # --- watching (status -w) ------------------------------------------------------

    @staticmethod
    def resource_path(resource: str, namespace: str | None) -> str:
        """`cocoonsets` or `pods`, in one namespace or all."""
        base = "/api/v1" if resource == "pods" else f"/apis/{k.GROUP}/{k.VERSION}"
        scope = "" if namespace is None else f"/namespaces/{namespace}"
        return f"{base}{scope}/{resource}"

    def list_raw(
        self, resource: str, namespace: str | None, label_selector: str | None
    ) -> tuple[list[dict[str, Any]], str]:
        """Every item (raw) and the list's resourceVersion, to start a watch from."""
        what = f"LIST {resource}" + (f" in {namespace}" if namespace else "")
        params = {"limit": 500, "labelSelector": label_selector}
        pages = list(self.bodies(what, self.resource_path(resource, namespace), params))
        version = (pages[-1].get("metadata") or {}).get("resourceVersion")
        return [item for body in pages for item in items_of(body)], str(version or "")

    def watch(
        self, resource: str, namespace: str | None, label_selector: str | None, version: str
    ) -> Iterator[dict[str, Any]]:
        """The watch events after `version` until the server ends the stream (a 410: ERROR)."""
        params = {
            "watch": "1",
            "resourceVersion": version,
            "allowWatchBookmarks": "true",
            "timeoutSeconds": _WATCH_TIMEOUT_S,
            "labelSelector": label_selector,
        }
        what, path = f"WATCH {resource}", self.resource_path(resource, namespace)
        with self._get(what, path, params, _WATCH_TIMEOUT_S + 30) as resp:
            for line in resp:
                if not line.strip():
                    continue
                try:
                    event = json.loads(line)
                except ValueError as e:
                    raise TransientError(f"{what}: the API server sent non-JSON") from e
                if isinstance(event, dict):
                    yield event
