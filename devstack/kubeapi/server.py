"""HTTP front of the embedded API: routing, content negotiation, the request log,
fault injection and audit emission around `Api`.

Plain HTTP/1.1 on 127.0.0.1 with keep-alive (the official client pools
connections); each response is written in one `write` so Nagle never stalls a
keep-alive exchange. Watches stream chunked newline-delimited JSON events.
"""

from __future__ import annotations

import contextlib
import json
import socket
import threading
import time
import traceback
import uuid
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qsl, urlsplit

import yaml

from devstack.kubeapi import errors, protobuf, tables
from devstack.kubeapi.api import Api
from devstack.kubeapi.audit import AuditBackend, micro_time
from devstack.kubeapi.errors import ApiError
from devstack.kubeapi.faults import Faults
from devstack.kubeapi.resources import ResourceType
from devstack.kubeapi.store import dumps

VERSION_INFO = {
    "major": "1",
    "minor": "32",
    "gitVersion": "v1.32.0-embedded",
    "gitCommit": "0000000000000000000000000000000000000000",
    "gitTreeState": "clean",
    "buildDate": "2026-01-01T00:00:00Z",
    "goVersion": "go1.23.0",
    "compiler": "gc",
    "platform": "linux/amd64",
}
DEFAULT_USER = "kubernetes-admin"
WRITE_VERBS = frozenset({"create", "update", "patch", "delete", "deletecollection"})


@dataclass(slots=True)
class Target:
    """A parsed resource URL."""

    rt: ResourceType
    version: str
    namespace: str | None
    name: str
    subresource: str


@dataclass(slots=True)
class Reply:
    code: int
    body: bytes
    content_type: str = "application/json"
    headers: dict[str, str] | None = None
    stream: Iterator[bytes] | None = None


class KubeHTTPServer(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 256

    def __init__(self, addr: tuple[str, int], app: Any) -> None:
        self.app = app
        self.connections: set[socket.socket] = set()
        self.conn_lock = threading.Lock()
        super().__init__(addr, Handler)

    def process_request_thread(self, request: Any, client_address: Any) -> None:
        with self.conn_lock:
            self.connections.add(request)
        try:
            super().process_request_thread(request, client_address)
        finally:
            with self.conn_lock:
                self.connections.discard(request)

    def cut_all(self) -> None:
        with self.conn_lock:
            for conn in list(self.connections):
                with contextlib.suppress(OSError):
                    conn.shutdown(socket.SHUT_RDWR)


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True
    server: KubeHTTPServer

    def log_message(self, format: str, *args: Any) -> None:
        return  # the request log (`requests()`) replaces stderr access logs

    def do_GET(self) -> None:
        self._handle()

    def do_POST(self) -> None:
        self._handle()

    def do_PUT(self) -> None:
        self._handle()

    def do_PATCH(self) -> None:
        self._handle()

    def do_DELETE(self) -> None:
        self._handle()

    # -- plumbing ---------------------------------------------------------------

    def _send(self, reply: Reply, audit_id: str) -> None:
        phrase = (
            HTTPStatus(reply.code).phrase
            if reply.code in HTTPStatus._value2member_map_
            else "Unknown"
        )
        lines = [
            f"HTTP/1.1 {reply.code} {phrase}",
            f"Content-Type: {reply.content_type}",
            "Cache-Control: no-cache, private",
            f"Audit-Id: {audit_id}",
            f"Date: {self.date_time_string()}",
        ]
        for k, v in (reply.headers or {}).items():
            lines.append(f"{k}: {v}")
        if reply.stream is not None:
            lines.append("Transfer-Encoding: chunked")
            self.wfile.write(("\r\n".join(lines) + "\r\n\r\n").encode())
            self.wfile.flush()
            for chunk in reply.stream:
                self.wfile.write(f"{len(chunk):x}\r\n".encode() + chunk + b"\r\n")
                self.wfile.flush()
            self.wfile.write(b"0\r\n\r\n")
            self.wfile.flush()
            return
        lines.append(f"Content-Length: {len(reply.body)}")
        if self.close_connection:
            lines.append("Connection: close")
        self.wfile.write(("\r\n".join(lines) + "\r\n\r\n").encode() + reply.body)

    def _cut(self) -> None:
        self.close_connection = True
        with contextlib.suppress(OSError):
            self.connection.shutdown(socket.SHUT_RDWR)

    def _handle(self) -> None:
        app: EmbeddedApp = self.server.app
        started = time.perf_counter()
        received = time.time()
        audit_id = str(uuid.uuid4())
        split = urlsplit(self.path)
        path = split.path.rstrip("/") or "/"
        query = dict(parse_qsl(split.query, keep_blank_values=True))
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        method = self.command
        if path.startswith("/_emulator"):
            try:
                reply = app.emulator_endpoint(method, path, raw)
            except ApiError as exc:
                reply = Reply(exc.code, dumps(exc.status()))
            self._send(reply, audit_id)
            return
        decision = app.faults.decide(method, path)
        status = 0
        ctx: dict[str, Any] = {}
        try:
            if decision is not None:
                if decision.latency_ms:
                    time.sleep(decision.latency_ms / 1000.0)
                if decision.cut:
                    # Logged before the cut, as an answer is logged before it is sent:
                    # a client that saw the connection drop finds the request in the log.
                    app.log_request(method, path, split.query, 0, started)
                    self._cut()
                    return
                if decision.error is not None:
                    raise decision.error
            try:
                reply = app.dispatch(method, path, query, raw, self.headers, ctx)
            except ApiError:
                raise
            except Exception as exc:
                traceback.print_exc()
                raise errors.internal(str(exc)) from exc
        except ApiError as exc:
            reply = Reply(exc.code, dumps(exc.status()), headers=exc.headers or None)
            ctx["error"] = exc
        status = reply.code
        if (
            app.audit is not None
            and app.audit.level == "RequestResponse"
            and ctx.get("verb") in WRITE_VERBS
            and reply.stream is None
        ):
            ctx["response"] = json.loads(reply.body)
        # Logged before the answer leaves: a client that got it sees it in the log
        # (a watch is logged as it starts streaming, so tests can see it is open).
        app.log_request(method, path, split.query, status, started)
        try:
            self._send(reply, audit_id)
        except OSError:
            self.close_connection = True
        if app.audit is not None and "verb" in ctx:
            app.audit.emit(
                app.audit_event(ctx, audit_id, self.path, status, received, self.headers, raw)
            )


class EmbeddedApp:
    """Everything behind the socket: parsing URLs into verbs on resources."""

    def __init__(self, api: Api, faults: Faults, audit: AuditBackend | None, kube: Any) -> None:
        self.api = api
        self.registry = api.registry
        self.faults = faults
        self.audit = audit
        self.kube = kube
        self.stopping = threading.Event()
        self._log: deque[dict[str, Any]] = deque(maxlen=200_000)
        self._log_lock = threading.Lock()

    # -- request log --------------------------------------------------------------

    def log_request(self, method: str, path: str, query: str, status: int, started: float) -> None:
        entry = {
            "method": method,
            "path": path,
            "query": query,
            "status": status,
            "duration_ms": round((time.perf_counter() - started) * 1000.0, 3),
        }
        with self._log_lock:
            self._log.append(entry)

    def requests(self) -> list[dict[str, Any]]:
        with self._log_lock:
            return list(self._log)

    def reset_requests(self) -> None:
        with self._log_lock:
            self._log.clear()

    # -- test hooks ------------------------------------------------------------------

    def emulator_endpoint(self, method: str, path: str, raw: bytes) -> Reply:
        if path == "/_emulator/requests" and method == "GET":
            return Reply(200, dumps(self.requests()))
        if path == "/_emulator/requests" and method == "DELETE":
            self.reset_requests()
            return Reply(200, b"{}")
        if path == "/_emulator/reset" and method == "POST":
            self.kube.reset()
            return Reply(200, b"{}")
        if path == "/_emulator/faults":
            if method == "GET":
                return Reply(200, dumps(self.faults.list()))
            if method == "DELETE":
                self.faults.clear()
                return Reply(200, b"{}")
            if method == "POST":
                try:
                    spec = json.loads(raw or b"{}")
                    allowed = {
                        "method",
                        "path",
                        "status",
                        "times",
                        "probability",
                        "retry_after",
                        "latency_ms",
                        "cut",
                    }
                    rule = self.faults.add(**{k: v for k, v in spec.items() if k in allowed})
                except (ValueError, TypeError) as exc:
                    raise errors.bad_request(f"invalid fault: {exc}") from None
                return Reply(201, dumps(rule.describe()))
        raise errors.not_found("", "", path)

    # -- routing -----------------------------------------------------------------------

    def dispatch(
        self,
        method: str,
        path: str,
        query: dict[str, str],
        raw: bytes,
        headers: Any,
        ctx: dict[str, Any],
    ) -> Reply:
        segs = [s for s in path.split("/") if s]
        if method == "GET":
            doc = self._discovery(segs)
            if doc is not None:
                return doc
        target = self._parse(segs)
        if target is None:
            raise ApiError(404, "NotFound", "the server could not find the requested resource")
        return self._resource(method, target, query, raw, headers, ctx)

    def _discovery(self, segs: list[str]) -> Reply | None:
        if not segs:
            paths = ["/api", "/api/v1", "/apis", "/healthz", "/livez", "/readyz", "/version"]
            paths += [f"/apis/{g}" for g, _ in self.registry.groups()]
            paths += [f"/apis/{g}/{v}" for g, vs in self.registry.groups() for v in vs]
            return Reply(200, dumps({"paths": sorted(paths)}))
        if segs == ["version"]:
            return Reply(200, dumps(VERSION_INFO))
        if segs[0] in ("healthz", "livez", "readyz"):
            return Reply(200, b"ok", "text/plain; charset=utf-8")
        if segs == ["api"]:
            host = self.kube.url.split("://", 1)[1]
            return Reply(
                200,
                dumps(
                    {
                        "kind": "APIVersions",
                        "versions": ["v1"],
                        "serverAddressByClientCIDRs": [
                            {"clientCIDR": "0.0.0.0/0", "serverAddress": host}
                        ],
                    }
                ),
            )
        if segs == ["api", "v1"]:
            return Reply(200, dumps(self.registry.resource_list("", "v1")))
        if segs == ["apis"]:
            return Reply(200, dumps(self.registry.group_list()))
        if segs[0] == "apis" and len(segs) == 2:
            g = self.registry.group_doc(segs[1])
            if g is None:
                raise ApiError(404, "NotFound", "the server could not find the requested resource")
            return Reply(200, dumps(g))
        if segs[0] == "apis" and len(segs) == 3:
            rl = self.registry.resource_list(segs[1], segs[2])
            if rl is None:
                raise ApiError(404, "NotFound", "the server could not find the requested resource")
            return Reply(200, dumps(rl))
        if segs[0] == "openapi":
            return self._openapi(segs[1:])
        return None

    def _openapi(self, segs: list[str]) -> Reply:
        """Just enough OpenAPI for kubectl: it learns that the server validates fields
        itself (`fieldValidation` on every PATCH) and finds no client-side schemas, so
        it skips client-side validation and patches built-ins with its compiled-in
        strategic-merge metadata, as it does against a real server without schemas."""
        if segs == ["v2"]:
            # An empty protobuf message is a valid (empty) OpenAPI v2 document.
            # The content type without "@" (kube-openapi's current name): kubectl parses it
            # with Go's mime package, which refuses the "@" of the deprecated one, and then
            # fails client-side validation of a `kind: List` manifest.
            return Reply(200, b"", "application/com.github.proto-openapi.spec.v2.v1.0+protobuf")
        if segs == ["v3"]:
            paths = {"api/v1": {"serverRelativeURL": "/openapi/v3/api/v1?hash=0"}}
            for g, vs in self.registry.groups():
                for v in vs:
                    url = f"/openapi/v3/apis/{g}/{v}?hash=0"
                    paths[f"apis/{g}/{v}"] = {"serverRelativeURL": url}
            return Reply(200, dumps({"paths": paths}))
        if len(segs) >= 3 and segs[0] == "v3":
            if segs[1] == "api" and len(segs) == 3:
                group, version = "", segs[2]
            elif segs[1] == "apis" and len(segs) == 4:
                group, version = segs[2], segs[3]
            else:
                raise ApiError(404, "NotFound", "the server could not find the requested resource")
            return Reply(200, dumps(self._openapi_gv(group, version)))
        raise ApiError(404, "NotFound", "the server could not find the requested resource")

    def _openapi_gv(self, group: str, version: str) -> dict[str, Any]:
        prefix = f"/apis/{group}/{version}" if group else f"/api/{version}"
        paths: dict[str, Any] = {}
        param = [{"name": "fieldValidation", "in": "query", "schema": {"type": "string"}}]
        for rt in self.registry.all():
            if rt.group != group or version not in rt.versions:
                continue
            gvk = {"group": group, "version": version, "kind": rt.kind}
            ns = "/namespaces/{namespace}" if rt.namespaced else ""
            op = {"x-kubernetes-group-version-kind": gvk, "parameters": param, "responses": {}}
            paths[f"{prefix}{ns}/{rt.plural}/{{name}}"] = {"patch": op, "put": op}
            paths[f"{prefix}{ns}/{rt.plural}"] = {"post": op}
        return {
            "openapi": "3.0.0",
            "info": {"title": "Kubernetes", "version": VERSION_INFO["gitVersion"]},
            "paths": paths,
            "components": {"schemas": {}},
        }

    def _parse(self, segs: list[str]) -> Target | None:
        if len(segs) >= 2 and segs[0] == "api":
            group, version, rest = "", segs[1], segs[2:]
        elif len(segs) >= 3 and segs[0] == "apis":
            group, version, rest = segs[1], segs[2], segs[3:]
        else:
            return None
        namespace: str | None = None
        if len(rest) >= 3 and rest[0] == "namespaces" and rest[2] not in ("status", "finalize"):
            namespace, rest = rest[1], rest[2:]
        if not rest or len(rest) > 3:
            return None
        rt = self.registry.lookup(group, version, rest[0])
        if rt is None:
            return None
        if namespace is not None and not rt.namespaced:
            return None
        name = rest[1] if len(rest) > 1 else ""
        sub = rest[2] if len(rest) > 2 else ""
        if sub and sub not in rt.subresources:
            return None
        return Target(rt, version, namespace, name, sub)

    def _resource(
        self,
        method: str,
        t: Target,
        query: dict[str, str],
        raw: bytes,
        headers: Any,
        ctx: dict[str, Any],
    ) -> Reply:
        api = self.api
        rt = t.rt
        dry_run = query.get("dryRun") == "All"
        strict = query.get("fieldValidation") == "Strict"
        ctx.update(target=t)
        if method == "GET":
            if t.name:
                ctx["verb"] = "get"
                if self._wants_table(headers):
                    obj = api.get_obj(rt, t.version, t.namespace, t.name)
                    return Reply(
                        200,
                        dumps(
                            tables.table(
                                rt,
                                t.version,
                                [obj],
                                {"resourceVersion": obj["metadata"].get("resourceVersion", "")},
                                query.get("includeObject", ""),
                            )
                        ),
                    )
                return Reply(200, api.get(rt, t.version, t.namespace, t.name))
            q = api.parse_query(rt, query)
            if query.get("watch") in ("true", "1"):
                ctx["verb"] = "watch"
                timeout = float(query.get("timeoutSeconds") or 1800)
                render = None
                if self._wants_table(headers):
                    include = query.get("includeObject", "")

                    def render(obj: dict[str, Any]) -> bytes:
                        # kubectl get -w: every event object is a one-row Table
                        meta = {"resourceVersion": obj["metadata"].get("resourceVersion", "")}
                        return dumps(tables.table(rt, t.version, [obj], meta, include))

                stream = api.watch(
                    rt,
                    t.version,
                    t.namespace,
                    q,
                    timeout,
                    self.stopping.is_set,
                    query.get("allowWatchBookmarks") == "true",
                    render,
                )
                return Reply(200, b"", stream=stream)
            ctx["verb"] = "list"  # a missing namespace lists empty, as upstream
            items, body = api.list_objects(rt, t.version, t.namespace, q)
            if self._wants_table(headers):
                meta = json.loads(body[: body.index(b',"items"')] + b"}")["metadata"]
                return Reply(
                    200,
                    dumps(tables.table(rt, t.version, items, meta, query.get("includeObject", ""))),
                )
            return Reply(200, body)
        if method == "POST":
            body = self._json(raw, headers.get("Content-Type", ""))
            ctx["request_object"] = body
            if t.subresource == "binding" and t.name:
                ctx["verb"] = "create"
                return Reply(201, dumps(api.bind(t.namespace or "", t.name, body)))
            if t.subresource == "eviction" and t.name:
                ctx["verb"] = "create"
                return Reply(201, dumps(api.evict(t.namespace or "", t.name, body)))
            if t.name:
                raise errors.method_not_allowed()
            ctx["verb"] = "create"
            res = api.create(rt, t.version, t.namespace, body, dry_run=dry_run, strict=strict)
            self._crd_hook(rt)
            return Reply(res.code, dumps(res.obj), headers=_warn(res.warnings))
        if method == "PUT":
            if not t.name:
                raise errors.method_not_allowed()
            body = self._json(raw, headers.get("Content-Type", ""))
            ctx["verb"] = "update"
            ctx["request_object"] = body
            res = api.update(
                rt,
                t.version,
                t.namespace,
                t.name,
                body,
                subresource=t.subresource,
                dry_run=dry_run,
                strict=strict,
            )
            return Reply(res.code, dumps(res.obj), headers=_warn(res.warnings))
        if method == "PATCH":
            if not t.name:
                raise errors.method_not_allowed()
            ctx["verb"] = "patch"
            try:
                ctx["request_object"] = json.loads(raw) if raw else None
            except ValueError:
                ctx["request_object"] = None
            res = api.patch(
                rt,
                t.version,
                t.namespace,
                t.name,
                raw,
                headers.get("Content-Type", ""),
                subresource=t.subresource,
                dry_run=dry_run,
                strict=strict,
            )
            return Reply(res.code, dumps(res.obj), headers=_warn(res.warnings))
        if method == "DELETE":
            options = self._json(raw) if raw.strip() else {}
            if not isinstance(options, dict):
                raise errors.bad_request("DeleteOptions must be an object")
            for k in ("gracePeriodSeconds", "propagationPolicy", "orphanDependents"):
                if k in query:
                    v: Any = query[k]
                    if k == "gracePeriodSeconds":
                        v = int(v)
                    elif k == "orphanDependents":
                        v = v == "true"
                    options[k] = v
            if raw.strip():
                ctx["request_object"] = options
            if not t.name:
                ctx["verb"] = "deletecollection"
                q = api.parse_query(rt, query)
                return Reply(200, api.delete_collection(rt, t.version, t.namespace, q, options))
            ctx["verb"] = "delete"
            res = api.delete(rt, t.version, t.namespace, t.name, options, dry_run=dry_run)
            return Reply(res.code, dumps(res.obj))
        raise errors.method_not_allowed()

    def _crd_hook(self, rt: ResourceType) -> None:
        return

    @staticmethod
    def _wants_table(headers: Any) -> bool:
        accept = headers.get("Accept", "") or ""
        return "as=Table" in accept

    @staticmethod
    def _json(raw: bytes, content_type: str = "") -> Any:
        if not raw:
            raise errors.bad_request("the body of the request is empty")
        if content_type.split(";", maxsplit=1)[0].strip() == protobuf.CONTENT_TYPE:
            return protobuf.decode(raw)
        try:
            return json.loads(raw)
        except ValueError:
            try:
                return yaml.safe_load(raw)
            except Exception as exc:  # noqa: BLE001 - any decode failure is a 400 upstream
                raise errors.bad_request(
                    f"couldn't get version/kind; json parse error: {exc}"
                ) from None

    # -- audit ---------------------------------------------------------------------------

    def audit_event(
        self,
        ctx: dict[str, Any],
        audit_id: str,
        uri: str,
        status: int,
        received: float,
        headers: Any,
        raw: bytes,
    ) -> dict[str, Any]:
        t: Target = ctx["target"]
        ref: dict[str, Any] = {"resource": t.rt.plural, "apiVersion": t.version}
        if t.rt.group:
            ref["apiGroup"] = t.rt.group
        if t.namespace:
            ref["namespace"] = t.namespace
        if t.name:
            ref["name"] = t.name
        if t.subresource:
            ref["subresource"] = t.subresource
        body = ctx.get("request_object")
        if (
            isinstance(body, dict)
            and ctx["verb"] in ("create", "update")
            and isinstance(body.get("metadata"), dict)
        ):
            md = body["metadata"]
            if not ref.get("name") and md.get("name"):
                ref["name"] = md["name"]
            if not ref.get("namespace") and md.get("namespace") and t.rt.namespaced:
                ref["namespace"] = md["namespace"]
        response: dict[str, Any] = {"metadata": {}, "code": status}
        err: ApiError | None = ctx.get("error")
        if err is not None:
            response.update(status="Failure", reason=err.reason, message=err.message)
        user = headers.get("Impersonate-User") or DEFAULT_USER
        event: dict[str, Any] = {
            "level": "Request",
            "auditID": audit_id,
            "stage": "ResponseComplete",
            "requestURI": uri,
            "verb": ctx["verb"],
            "user": {"username": user, "groups": ["system:masters", "system:authenticated"]},
            "sourceIPs": ["127.0.0.1"],
            "userAgent": headers.get("User-Agent", ""),
            "objectRef": ref,
            "responseStatus": response,
            "requestReceivedTimestamp": micro_time(received),
            "stageTimestamp": micro_time(time.time()),
            "annotations": {
                "authorization.k8s.io/decision": "allow",
                "authorization.k8s.io/reason": "",
            },
        }
        level = self.audit.level if self.audit is not None else "Request"
        event["level"] = level
        if (
            level in ("Request", "RequestResponse")
            and ctx["verb"] in WRITE_VERBS
            and body is not None
        ):
            event["requestObject"] = body
        if level == "RequestResponse" and ctx.get("response") is not None:
            event["responseObject"] = ctx["response"]
        return event


def _warn(warnings: list[str]) -> dict[str, str] | None:
    if not warnings:
        return None
    return {"Warning": ", ".join('299 - "' + w.replace('"', '\\"') + '"' for w in warnings)}
