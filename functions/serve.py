"""All four targets in one process, path-routed, for a plain Deployment or Knative.

Each CloudEvent route is functions-framework's app for that target behind `doors.guarded`,
since `serve` has no Eventarc or invoker IAM in front; the `ingest` routes guard themselves.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

import flask
import functions_framework
import prometheus_client

# The server `functions-framework` itself runs (gunicorn, threaded): the same in-process
# behaviour as the per-target deployments. Private module, pinned with functions-framework 3.10.
from functions_framework._http import create_server

# Only `serve` (long-running) pays prometheus-client's import; Cloud Run functions log counts.
from functions import doors
from functions.metrics import install
from shared.errors import ConfigError

INGEST_PATHS = ("/registry", "/kubernetes/audit")


def default_source() -> Path:
    """The installed `functions/entrypoints.py`, found by import, never from the working
    directory: a wheel has no `main.py`, and a stray `./main.py` must not be served."""
    spec = importlib.util.find_spec("functions.entrypoints")
    if spec is None or spec.origin is None:  # pragma: no cover - the package ships it
        raise RuntimeError("functions.entrypoints is not installed")
    return Path(spec.origin)


def _plain(status: str, body: bytes, start_response: Callable[..., Any]) -> list[bytes]:
    start_response(status, [("Content-Type", "text/plain"), ("Content-Length", str(len(body)))])
    return [body]


def readiness_problems(env: Mapping[str, str] | None = None) -> list[str]:
    """Why the configuration cannot work, one sentence each; empty when it can. No request is
    sent: a briefly unreachable cluster or registry is the retry path's business."""
    from shared.clients.kube import KubeClient  # noqa: PLC0415 - builds no connection
    from shared.config import Settings  # noqa: PLC0415

    try:
        settings = Settings.from_env(env)
    except ConfigError as err:
        return [str(err)]
    problems: list[str] = []
    if settings.registry_base is None:
        problems.append(
            "COCOON_REGISTRY_BASE is not set: no snapshot can be verified, so no seat is "
            "released and no wake restores"
        )
    if not settings.ingest_token:
        problems.append(
            "COCOON_INGEST_TOKEN is not set: ingest refuses the registry's notifications"
        )
    for target, accepted in doors.CLOUDEVENT_DOORS.items():
        if not doors.configured(accepted, settings):
            needed = " or ".join(doors.VARIABLES[d] for d in accepted)
            problems.append(f"{needed} is not set: /{target} refuses every request")
    try:
        KubeClient.from_settings(settings)
    except ConfigError as err:
        problems.append(f"no Kubernetes credentials: {err}")
    return problems


def create_app(source: Path | None = None) -> Any:
    """A Flask app (so functions-framework's server runs it) routing to the four targets."""
    src = str(source or default_source())
    mounts: dict[str, doors.WSGIApp] = {
        target: doors.guarded(
            functions_framework.create_app(target=target, source=src),  # type: ignore[no-untyped-call]  # functions-framework is unannotated
            "/" + target,
        )
        for target in doors.CLOUDEVENT_DOORS
    }
    ingest_app: doors.WSGIApp = functions_framework.create_app(target="ingest", source=src)  # type: ignore[no-untyped-call]  # unannotated
    metrics_app: doors.WSGIApp = prometheus_client.make_wsgi_app(install())

    def route(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        path = environ.get("PATH_INFO", "") or "/"
        if path in ("/healthz", "/readyz"):
            if path == "/readyz" and (problems := readiness_problems()):
                body = "\n".join(problems).encode()
                return _plain("503 Service Unavailable", body, start_response)
            return _plain("200 OK", b"ok", start_response)
        if path == "/metrics":
            return metrics_app(environ, start_response)
        if path in INGEST_PATHS:
            return ingest_app(environ, start_response)
        head, _, rest = path.lstrip("/").partition("/")
        app = mounts.get(head)
        if app is None:
            return _plain("404 Not Found", b"not found", start_response)
        # Mount the target's app at /<target>: it sees "/" (its own root), never a redirect.
        environ["SCRIPT_NAME"] = environ.get("SCRIPT_NAME", "") + "/" + head
        environ["PATH_INFO"] = "/" + rest
        return app(environ, start_response)

    router = flask.Flask("cocoon-hibernation")
    router.wsgi_app = route  # type: ignore[method-assign]  # our routing replaces Flask's by design
    return router


def _server_options() -> dict[str, Any]:
    """gunicorn >= 25.1's control socket off: unused, it logs an error on a read-only root."""
    from gunicorn.config import Config  # noqa: PLC0415 - the server's own dependency, at start

    return {"control_socket_disable": True} if "control_socket_disable" in Config().settings else {}


def serve(host: str, port: int, source: Path | None = None) -> None:
    """Run the router on functions-framework's production server (gunicorn, threads)."""
    server = create_server(create_app(source), debug=False, **_server_options())  # type: ignore[no-untyped-call]  # unannotated
    server.run(host, port)
