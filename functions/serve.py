"""All four targets in one process, path-routed: for a plain Deployment or Knative.

Routes (docs/design.md#targets): ``POST /release``, ``/wake``, ``/sweep`` take CloudEvents
(binary or structured), ``POST /registry`` and ``/kubernetes/audit`` are the
``ingest`` webhooks, ``GET /healthz`` answers ``ok`` (liveness: the process serves),
``GET /readyz`` answers ``ok`` only while the configuration can work (readiness: a
registry base, the ingest token, Kubernetes credentials) and else 503 with the reasons,
one per line, ``GET /metrics`` serves the
operator's slot-release counters in Prometheus text format. Anything else is 404.

Each route is the very app functions-framework builds for that target from
the installed ``functions/entrypoints.py`` (``create_app``), mounted under its
path, so the CloudEvent parsing, the 2xx-vs-500 contract and the crash handling
are the ones the per-target deployments get. Only the routing is ours.
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

# Only `serve` (a long-running process) imports these: the per-target Cloud Run
# functions count in log lines, and never pay prometheus-client's import.
from functions.metrics import install

CLOUDEVENT_TARGETS = ("release", "wake", "sweep")
INGEST_PATHS = ("/registry", "/kubernetes/audit")
HEALTH_PATH = "/healthz"
READY_PATH = "/readyz"
METRICS_PATH = "/metrics"

WSGIApp = Callable[[dict[str, Any], Callable[..., Any]], Iterable[bytes]]


def default_source() -> Path:
    """The installed targets' file, `functions/entrypoints.py`, wherever the package lives.

    Found through the import system, never relative to a checkout or the working
    directory: an installed wheel has no `main.py`, and a stray `./main.py` must
    not be served by accident. functions-framework only loads targets from a
    file, hence a path rather than the module.
    """
    spec = importlib.util.find_spec("functions.entrypoints")
    if spec is None or spec.origin is None:  # pragma: no cover - the package ships it
        raise RuntimeError("functions.entrypoints is not installed")
    return Path(spec.origin)


def _plain(status: str, body: bytes, start_response: Callable[..., Any]) -> list[bytes]:
    start_response(status, [("Content-Type", "text/plain"), ("Content-Length", str(len(body)))])
    return [body]


def readiness_problems(env: Mapping[str, str] | None = None) -> list[str]:
    """Why the configuration cannot work, one sentence each; empty when it can.

    What every event would otherwise fail on, one request at a time: a variable with
    a bad value, no registry base (nothing can be verified: no release, no wake),
    no ingest token (ingest refuses every webhook), no Kubernetes credentials (no
    kubeconfig and not in a cluster). Nothing here sends a request: a cluster or
    registry that is briefly down is the retry path's business, not a reason to take
    the process out of its Service.
    """
    from shared.clients.kube import KubeClient  # noqa: PLC0415 - builds no connection
    from shared.config import Settings  # noqa: PLC0415
    from shared.errors import ConfigError  # noqa: PLC0415

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
            "COCOON_INGEST_TOKEN is not set: ingest refuses every webhook "
            "(registry, audit, Pub/Sub)"
        )
    try:
        KubeClient.from_settings(settings)
    except ConfigError as err:
        problems.append(f"no Kubernetes credentials: {err}")
    return problems


def create_app(source: Path | None = None) -> Any:
    """A Flask app (so functions-framework's server runs it) routing to the four targets."""
    src = str(source or default_source())
    mounts: dict[str, WSGIApp] = {
        target: functions_framework.create_app(target=target, source=src)  # type: ignore[no-untyped-call]  # functions-framework is unannotated
        for target in CLOUDEVENT_TARGETS
    }
    ingest_app: WSGIApp = functions_framework.create_app(target="ingest", source=src)  # type: ignore[no-untyped-call]  # unannotated
    metrics_app: WSGIApp = prometheus_client.make_wsgi_app(install())

    def route(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        path = environ.get("PATH_INFO", "") or "/"
        if path == HEALTH_PATH:
            return _plain("200 OK", b"ok", start_response)
        if path == READY_PATH:
            problems = readiness_problems()
            if problems:
                return _plain(
                    "503 Service Unavailable", "\n".join(problems).encode(), start_response
                )
            return _plain("200 OK", b"ok", start_response)
        if path == METRICS_PATH:
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
    """gunicorn settings beyond functions-framework's own.

    gunicorn >= 25.1 opens a control socket for its `gunicornc` tool under
    $XDG_RUNTIME_DIR or $HOME: nothing here uses it, and on a read-only root
    filesystem (the image, infra/k8s) it logs an error at every start.
    """
    from gunicorn.config import Config  # noqa: PLC0415 - the server's own dependency, at start

    return {"control_socket_disable": True} if "control_socket_disable" in Config().settings else {}


def serve(host: str, port: int, source: Path | None = None) -> None:
    """Run the router on functions-framework's production server (gunicorn, threads)."""
    server = create_server(create_app(source), debug=False, **_server_options())  # type: ignore[no-untyped-call]  # unannotated
    server.run(host, port)
