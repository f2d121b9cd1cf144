"""The Kubernetes API, wrapped: the only module that imports `kubernetes`, lazily. Every call
is bounded, returns the project's models, raises only `shared.errors` types and is sent once
by the library: the only retries are ours, of idempotent reads."""

from __future__ import annotations

import base64
import hashlib
import json
import os
import re
import socket
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Mapping
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Self, TypeVar

from pydantic import BaseModel, ValidationError

from shared import constants as k
from shared import log
from shared.admission import parse_denial
from shared.clients.cache import ProcessCache
from shared.config import KubeAuth, Settings
from shared.constants import METRIC_EVENTS
from shared.errors import (
    AccessDenied,
    AdmissionDenied,
    AlreadyExists,
    CocoonError,
    ConfigError,
    Conflict,
    CrdNotInstalled,
    Invalid,
    NotFound,
    PermanentError,
    TransientError,
    UnreadableObject,
    WebhookDenied,
)
from shared.models import CocoonSet, Pod

if TYPE_CHECKING:
    from kubernetes.client import ApiClient

    from shared.names import SetRef

# JSON merge patch (RFC 7386): None removes a key; a metadata.resourceVersion makes it a CAS.
MERGE_PATCH = "application/merge-patch+json"
# (connect, read) seconds: a hung API server must turn into a retry, not a stuck instance.
DEFAULT_TIMEOUT: tuple[float, float] = (5.0, 20.0)
GOOGLE_SCOPES = ("https://www.googleapis.com/auth/cloud-platform",)
_EVENT_MESSAGE_MAX = 1024
# Our retry of idempotent reads saves a redelivery; attempts x timeout fit a platform deadline.
READ_ATTEMPTS = 3
READ_BACKOFF_S: tuple[float, ...] = (0.05, 0.2)


class ResourceVersionTooLarge(TransientError):
    """A bounded read the server could not serve after its own wait: not repeated as is."""


# The `what` of a request on the CocoonSet resource itself, not one naming it in passing.
_ON_COCOONSETS = re.compile(r"^[A-Z]+ cocoonsets?\b")


def translate(err: BaseException, what: str) -> CocoonError:
    """A library exception as a typed error (the caller raises it `from`)."""
    from kubernetes.client.exceptions import ApiException  # noqa: PLC0415 - lazy: cold start

    if isinstance(err, ApiException):
        body = err.body if isinstance(err.body, str) else None
        return translate_status(int(err.status or 0), str(err.reason or ""), body, what)
    return TransientError(f"{what}: {type(err).__name__}: {err}")


def translate_status(code: int, phrase: str, body: str | None, what: str) -> CocoonError:
    """An API server's error answer as a typed error (the light reader's too)."""
    try:  # a `Status` object; anything else JSON reads as empty, non-JSON is quoted
        parsed = json.loads(body) if body else {}
        status: dict[str, Any] | None = parsed if isinstance(parsed, dict) else {}
    except ValueError:
        status = None
    if status is None:
        reason, message = "", (body or "")[:200]
    else:
        reason, message = str(status.get("reason") or ""), str(status.get("message") or "")
    text = f"{what}: HTTP {code} {reason or phrase or ''} {message}".strip()
    denial = parse_denial(message) if 400 <= code < 500 and code not in (404, 409, 429) else None
    if denial is not None:  # an admission webhook's refusal (any 4xx it chose; 400 by default)
        return WebhookDenied(
            f"{text} (refused by the admission webhook {denial.webhook}: {denial.fix()})",
            server_message=message,
            webhook=denial.webhook,
            user=denial.user,
            fix=denial.fix(),
        )
    if code == 404:
        # An object that does not exist is named in the Status' details; a 404 naming
        # nothing means the path's resource type is not served.
        details = (status or {}).get("details")
        named = isinstance(details, dict) and details.get("name")
        if _ON_COCOONSETS.match(what) and status is not None and not named:
            return CrdNotInstalled(
                f"CocoonSet CRD not installed: the cluster does not serve "
                f"{k.PLURAL}.{k.GROUP}/{k.VERSION} ({what}: HTTP 404); install it with "
                "`cocoon-hibernation crd | kubectl apply -f -` or cocoon-operator's chart"
            )
        return NotFound(text)
    if code == 409:
        return AlreadyExists(text) if reason == "AlreadyExists" else Conflict(text)
    if code == 422:
        return Invalid(text)
    if code == 403:
        return _forbidden(text, message)
    if code == 401:
        return ConfigError(f"{text} (check the function's Kubernetes credentials)")
    if code == 504 and "Too large resource version" in message:
        return ResourceVersionTooLarge(text)
    if code in (0, 410, 429) or code >= 500:
        return TransientError(text)
    return PermanentError(text)


# The authorizer's wording:
# `User "u" cannot patch resource "cocoonsets/status" in API group "g" in the namespace "ns"`.
_RBAC_DENIAL = re.compile(
    r'User "(?P<user>[^"]*)" cannot (?P<verb>\S+) resource "(?P<resource>[^"]+)"'
    r'(?: in API group "(?P<group>[^"]*)")?(?: in the namespace "(?P<ns>[^"]+)")?'
)


def _forbidden(text: str, message: str) -> CocoonError:
    """403 is two things: the authorizer refusing the identity (configuration), or an
    admission plugin refusing the object (quota, PodSecurity, ServiceAccount...)."""
    if "cannot set blockOwnerDeletion" in message:
        # An admission plugin, but what it checks is RBAC (`update` on the owner's finalizers).
        return AccessDenied(
            f"RBAC configuration error: may not update cocoonsets/finalizers, which a pod "
            f"owned with blockOwnerDeletion needs (infra/k8s/rbac.yaml grants it) — {text}",
            verb="update",
            resource="cocoonsets/finalizers",
            namespace="",
        )
    m = _RBAC_DENIAL.search(message)
    if m is None:
        return AdmissionDenied(f"{text} (refused by admission)", server_message=message)
    ns = m["ns"] or "(cluster scope)"
    return AccessDenied(
        f"RBAC configuration error: {m['user']} may not {m['verb']} {m['resource']} "
        f"in namespace {ns} (bind the ClusterRole cocoon-hibernation-writer there: "
        f"infra/k8s/namespace-binding.yaml; reads need infra/k8s/rbac.yaml) — {text}",
        verb=m["verb"],
        resource=m["resource"],
        namespace=m["ns"] or "",
    )


def default_kubeconfig() -> str:
    """`~/.kube/config`, resolved now (the library resolves it at import)."""
    return os.path.join(os.path.expanduser("~"), ".kube", "config")


def _merged_kubeconfig(paths: str) -> Any:
    """The files of `paths` merged by kubectl's rules: missing ones skipped, the first
    definition wins, the first `current-context` too (the library lets the last win)."""
    from kubernetes.config import ConfigException, kube_config  # noqa: PLC0415 - lazy

    docs = [read_kubeconfig(one) or {} for one in paths.split(os.pathsep)]
    merger = kube_config.KubeConfigMerger(paths)  # type: ignore[no-untyped-call]  # untyped upstream
    if merger.config is None:
        raise ConfigException(f"no kubeconfig file found in {paths}")
    if current := next((d["current-context"] for d in docs if d.get("current-context")), None):
        merger.config.value["current-context"] = current
    return merger.config


def read_kubeconfig(path: str) -> dict[str, Any] | None:
    """The file's document, None when missing or empty; one that is not a kubeconfig at all is
    a one-line ConfigError (the library's merger lets it escape as a traceback)."""
    import yaml  # noqa: PLC0415 - lazy: cold start

    try:
        with open(os.path.expanduser(path), encoding="utf-8") as f:
            doc = yaml.safe_load(f)
    except FileNotFoundError:
        return None
    except yaml.MarkedYAMLError as e:
        mark = e.problem_mark
        where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark is not None else ""
        raise ConfigError(
            f"cannot load kubeconfig {path}: invalid YAML: {where}{e.problem or e.context}"
        ) from None
    except (yaml.YAMLError, OSError, UnicodeDecodeError) as e:
        raise ConfigError(f"cannot load kubeconfig {path}: {' '.join(str(e).split())}") from None
    if doc is not None and not isinstance(doc, dict):
        kind = "a string" if isinstance(doc, str) else f"a {type(doc).__name__}"
        raise ConfigError(
            f"cannot load kubeconfig {path}: not a kubeconfig ({kind}; expected a mapping "
            "with clusters, users and contexts)"
        )
    return doc


_M = TypeVar("_M", bound=BaseModel)


def _object_id(body: Any) -> str:
    meta = body.get("metadata") if isinstance(body, dict) else None
    meta = meta if isinstance(meta, dict) else {}
    return f"{meta.get('namespace') or '-'}/{meta.get('name') or '?'}"


def parse(model: type[_M], body: Any) -> _M:
    """`body` as `model`; an object the models reject (e.g. written under another CRD
    version) is an UnreadableObject naming it: permanent for that object, not a crash."""
    try:
        return model.model_validate(body)
    except ValidationError as e:
        first = e.errors()[0]
        where = ".".join(str(part) for part in first["loc"])
        raise UnreadableObject(
            f"{model.__name__} {_object_id(body)} is unreadable "
            f"({e.error_count()} error(s)): {where}: {first['msg']}"
        ) from e


def _pods(body: Mapping[str, Any]) -> list[Pod]:
    return [parse(Pod, item) for item in body.get("items") or []]


_T = TypeVar("_T")


def read_retried(what: str, once: Callable[[], _T]) -> _T:
    """An idempotent read, tried up to READ_ATTEMPTS times on a TransientError."""
    for attempt in range(READ_ATTEMPTS - 1):
        try:
            return once()
        except ResourceVersionTooLarge:
            raise  # the caller decides (a bound the server did not reach)
        except TransientError as e:
            log.debug("read failed; retrying", what=what, attempt=attempt + 1, error=str(e))
            time.sleep(READ_BACKOFF_S[min(attempt, len(READ_BACKOFF_S) - 1)])
    return once()


def follow_pages(read_page: Callable[[str | None], Any]) -> Iterator[dict[str, Any]]:
    """Each page of a LIST, each read with the `continue` token of the one before."""
    body = read_page(None)
    yield body
    while token := (body.get("metadata") or {}).get("continue"):
        body = read_page(token)
        yield body


def readable_sets(items: list[Any]) -> list[CocoonSet]:
    """One unreadable set is skipped (and logged), never the whole page."""
    out: list[CocoonSet] = []
    for item in items:
        try:
            out.append(parse(CocoonSet, item))
        except UnreadableObject as e:
            log.warning("unreadable cocoonset skipped", cocoonset=_object_id(item), error=str(e))
    return out


def _retryable_io_errors() -> tuple[type[BaseException], ...]:
    import urllib3.exceptions  # noqa: PLC0415 - lazy: cold start

    return (urllib3.exceptions.HTTPError, OSError, TimeoutError)


# Told (method, url, status or None, seconds) of every request sent; set by the CLI's -v.
_request_observer: Callable[[str, str, int | None, float], None] | None = None


def observe_requests(observer: Callable[[str, str, int | None, float], None] | None) -> None:
    """Tell `observer` of every API request of every client, both transports (None: stop)."""
    global _request_observer  # noqa: PLW0603 - one switch for the process (the CLI's -v)
    _request_observer = observer


# The official client's generated methods this module calls, under their names (the RBAC
# test reads them here), with keywords: path {placeholders}, body, options, query (snake case).
_PODS = "/api/v1/namespaces/{namespace}/pods"
_SETS = "/apis/{group}/{version}/namespaces/{namespace}/{plural}"
_ROUTES: dict[str, tuple[str, str]] = {
    "list_namespaced_pod": ("GET", _PODS),
    "list_pod_for_all_namespaces": ("GET", "/api/v1/pods"),
    "read_namespaced_pod": ("GET", _PODS + "/{name}"),
    "create_namespaced_pod": ("POST", _PODS),
    "patch_namespaced_pod": ("PATCH", _PODS + "/{name}"),
    "delete_namespaced_pod": ("DELETE", _PODS + "/{name}"),
    "create_namespaced_event": ("POST", "/api/v1/namespaces/{namespace}/events"),
    "get_namespaced_custom_object": ("GET", _SETS + "/{name}"),
    "list_cluster_custom_object": ("GET", "/apis/{group}/{version}/{plural}"),
    "list_namespaced_custom_object": ("GET", _SETS),
    "patch_namespaced_custom_object": ("PATCH", _SETS + "/{name}"),
    "patch_namespaced_custom_object_status": ("PATCH", _SETS + "/{name}/status"),
    "create_token_review": ("POST", "/apis/authentication.k8s.io/v1/tokenreviews"),
}
_PLACEHOLDER = re.compile(r"\{(\w+)\}")
_COCOONSETS = {"group": k.GROUP, "version": k.VERSION, "plural": k.PLURAL}
_POD_METRICS = {"group": "metrics.k8s.io", "version": "v1beta1", "plural": "pods"}


def _wire(name: str) -> str:
    """A generated method's keyword as its query parameter: `_continue` -> `continue`."""
    head, *rest = name.lstrip("_").split("_")
    return head + "".join(part.title() for part in rest)


class _Api:
    """The official client's transport (kubeconfig loader, exec plugins, token refresh)
    without its generated API classes, whose import was most of a cold start."""

    def __init__(self, api_client: ApiClient) -> None:
        self._api = api_client

    def __getattr__(self, name: str) -> Callable[..., Any]:
        try:
            method, template = _ROUTES[name]
        except KeyError:
            raise AttributeError(name) from None

        def call(body: Any = None, **kw: Any) -> Any:
            path = {n: kw.pop(n) for n in _PLACEHOLDER.findall(template)}
            options = {n: kw.pop(n) for n in list(kw) if n.startswith("_") and n != "_continue"}
            query = {_wire(n): v for n, v in kw.items()}
            return self.send(method, template, path, body, query, **options)

        return call

    def send(
        self,
        method: str,
        template: str,
        path_params: dict[str, Any],
        body: Any = None,
        query: Mapping[str, Any] | None = None,
        *,
        _request_timeout: Any = None,
        _content_type: str | None = None,
        _headers: dict[str, str] | None = None,
    ) -> Any:
        """One request, its urllib3 response; non-2xx raises the library's ApiException."""
        from kubernetes.client.exceptions import ApiException  # noqa: PLC0415 - lazy: cold start

        headers = {"Accept": "application/json", **(_headers or {})}
        if body is not None:
            headers["Content-Type"] = _content_type or "application/json"
        request = self._api.param_serialize(
            method=method,
            resource_path=template,
            path_params=path_params,
            query_params=[(n, v) for n, v in (query or {}).items() if v is not None],
            header_params=headers,
            body=body,
            auth_settings=["BearerToken"],
        )
        start, resp = time.monotonic(), None
        try:
            resp = self._api.call_api(*request, _request_timeout=_request_timeout)
        finally:
            if _request_observer is not None:
                status = resp.status if resp is not None else None
                _request_observer(method, request[1], status, time.monotonic() - start)
        if not 200 <= resp.status <= 299:
            resp.read()  # type: ignore[no-untyped-call]  # untyped upstream
            raise ApiException.from_response(http_resp=resp, body=None, data=None)
        return resp.response


class KubeClient:
    """Typed access to CocoonSets, their pods and Events. Thread-safe."""

    def __init__(self, api_client: ApiClient, *, timeout: tuple[float, float] = DEFAULT_TIMEOUT):
        conf = api_client.configuration
        if conf.retries is not False or getattr(conf, "client_go_retries", False):
            # Library retries would re-send a PATCH whose answer was lost: a pool without them.
            from kubernetes.client import rest  # noqa: PLC0415 - lazy: cold start

            conf.retries = conf.client_go_retries = False
            api_client.rest_client = rest.RESTClientObject(conf)
        self._api = api_client
        self._core = self._custom = _Api(api_client)
        self._timeout = timeout
        self._lock = threading.Lock()
        self.requests = 0  # API requests sent, retries included
        self._instance = os.environ.get("K_REVISION") or socket.gethostname()

    @classmethod
    def from_kubeconfig(
        cls, path: str | None = None, *, context: str | None = None, **kw: Any
    ) -> Self:
        """From kubeconfig files (`KUBECONFIG`'s os.pathsep list; None: `~/.kube/config`)
        merged as kubectl merges them; `context` as kubectl's `--context`."""
        from kubernetes import client, config  # noqa: PLC0415 - lazy: cold start

        paths = path if path is not None else default_kubeconfig()
        what = path or default_kubeconfig()
        conf = client.Configuration()
        try:
            merged = _merged_kubeconfig(paths)
            # Each entry is the library's ConfigNode (its dict in `.value`).
            contexts = [getattr(c, "value", c).get("name") for c in merged.value["contexts"]]
            if context is not None and context not in contexts:
                listed = ", ".join(str(c) for c in contexts) or "none"
                raise ConfigError(
                    f"context {context!r} is not in kubeconfig {what} (contexts: {listed})"
                )
            loader = config.kube_config.KubeConfigLoader(  # type: ignore[no-untyped-call]  # untyped upstream
                config_dict=merged, active_context=context, config_base_path=None
            )
            loader.load_and_set(conf)  # type: ignore[no-untyped-call]  # untyped upstream
        except (config.ConfigException, OSError, ValueError, KeyError, TypeError) as e:
            raise ConfigError(f"cannot load kubeconfig {what}: {e}") from e
        return cls(client.ApiClient(conf), **kw)

    @classmethod
    def from_google(cls, server: str, ca_b64: str | None, **kw: Any) -> Self:
        """GKE from Cloud Run: a Google access token, refreshed before it expires."""
        import google.auth  # noqa: PLC0415 - lazy: cold start
        import google.auth.exceptions  # noqa: PLC0415 - lazy: cold start
        import google.auth.transport.requests  # noqa: PLC0415 - lazy: cold start
        from kubernetes import client  # noqa: PLC0415 - lazy: cold start

        try:
            creds, _ = google.auth.default(scopes=list(GOOGLE_SCOPES))
        except google.auth.exceptions.GoogleAuthError as e:  # the base: none escapes
            raise ConfigError(f"COCOON_KUBE_AUTH=google: no Google credentials ({e})") from e
        conf = client.Configuration(
            host=server, api_key={"BearerToken": ""}, api_key_prefix={"BearerToken": "Bearer"}
        )
        if ca_b64:
            try:
                ca = base64.b64decode(ca_b64, validate=True)
            except ValueError as e:
                raise ConfigError("COCOON_KUBE_CA is not valid base64") from e
            with tempfile.NamedTemporaryFile("wb", suffix=".crt", delete=False) as f:
                f.write(ca)
            conf.ssl_ca_cert = f.name
        lock = threading.Lock()

        def refresh(c: Any) -> None:
            # `valid` turns false shortly *before* expiry: a token never expires mid-request.
            with lock:
                if not creds.valid:
                    try:
                        creds.refresh(google.auth.transport.requests.Request())  # type: ignore[no-untyped-call]  # untyped upstream
                    except google.auth.exceptions.GoogleAuthError as e:
                        raise TransientError(f"refreshing the Google access token: {e}") from e
                c.api_key["BearerToken"] = creds.token

        conf.refresh_api_key_hook = refresh  # type: ignore[assignment]  # typed None upstream
        return cls(client.ApiClient(conf), **kw)

    @classmethod
    def from_settings(cls, settings: Settings) -> Self:
        if settings.kube_auth is KubeAuth.GOOGLE:
            if not settings.kube_server:
                raise ConfigError("COCOON_KUBE_SERVER is required when COCOON_KUBE_AUTH=google")
            return cls.from_google(settings.kube_server, settings.kube_ca)
        # kubectl's order: $KUBECONFIG, else ~/.kube/config, else the in-cluster account.
        if settings.kubeconfig or os.path.exists(default_kubeconfig()):
            return cls.from_kubeconfig(settings.kubeconfig or None, context=settings.kube_context)
        if settings.kube_context is not None:
            raise ConfigError(
                f"--context {settings.kube_context}: no kubeconfig ($KUBECONFIG is unset "
                f"and {default_kubeconfig()} does not exist)"
            )
        from kubernetes import client, config  # noqa: PLC0415 - lazy: cold start

        conf = client.Configuration()
        try:
            config.load_incluster_config(client_configuration=conf)  # type: ignore[no-untyped-call]  # untyped upstream
        except config.ConfigException as e:
            raise ConfigError(
                f"no kubeconfig ($KUBECONFIG is unset, {default_kubeconfig()} does not "
                f"exist) and not running in a cluster ({e}); pass --kubeconfig, set "
                "KUBECONFIG, or COCOON_KUBE_AUTH=google with COCOON_KUBE_SERVER/COCOON_KUBE_CA"
            ) from e
        return cls(client.ApiClient(conf))

    def reset_requests(self) -> None:
        with self._lock:
            self.requests = 0

    def _read(self, what: str, fn: Callable[..., Any], *args: Any, **kw: Any) -> Any:
        return read_retried(what, lambda: self._call(what, fn, *args, **kw))

    def _call(self, what: str, fn: Callable[..., Any], *args: Any, **kw: Any) -> Any:
        from kubernetes.client.exceptions import OpenApiException  # noqa: PLC0415 - lazy: cold start

        errors: tuple[type[BaseException], ...] = (OpenApiException, *_retryable_io_errors())
        with self._lock:
            self.requests += 1
        try:
            data = fn(*args, **{"_request_timeout": self._timeout, **kw}).data
        except errors as e:
            raise translate(e, what) from e
        try:
            return json.loads(data) if data else {}
        except ValueError as e:
            raise TransientError(f"{what}: the API server answered non-JSON") from e

    @staticmethod
    def _set(ref: SetRef) -> dict[str, str]:
        return {**_COCOONSETS, "namespace": ref.namespace, "name": ref.name}

    def get_set(self, ref: SetRef) -> CocoonSet | None:
        what, fn = f"GET cocoonset {ref}", self._custom.get_namespaced_custom_object
        try:
            return parse(CocoonSet, self._read(what, fn, **self._set(ref)))
        except NotFound:
            return None

    def list_sets(
        self, namespace: str | None, *, limit: int = 500, label_selector: str | None = None
    ) -> Iterator[list[CocoonSet]]:
        kw = {**_COCOONSETS, "limit": limit, "label_selector": label_selector or None}
        if namespace is None:
            what, fn = "LIST cocoonsets", self._custom.list_cluster_custom_object
        else:
            what, fn = f"LIST cocoonsets in {namespace}", self._custom.list_namespaced_custom_object
            kw["namespace"] = namespace
        for body in follow_pages(lambda token: self._read(what, fn, **kw, _continue=token)):
            yield readable_sets(body.get("items") or [])

    def patch_set(
        self, ref: SetRef, patch: dict[str, Any], *, resource_version: str | None = None
    ) -> CocoonSet:
        fn = self._custom.patch_namespaced_custom_object
        return self._patch_set(f"PATCH cocoonset {ref}", fn, ref, patch, resource_version)

    def patch_set_status(
        self, ref: SetRef, patch: dict[str, Any], *, resource_version: str | None = None
    ) -> CocoonSet:
        fn = self._custom.patch_namespaced_custom_object_status
        return self._patch_set(f"PATCH cocoonset {ref}/status", fn, ref, patch, resource_version)

    def _patch_set(
        self, what: str, fn: Callable[..., Any], ref: SetRef, patch: dict[str, Any], rv: str | None
    ) -> CocoonSet:
        if rv is not None:
            patch = {**patch, "metadata": {**(patch.get("metadata") or {}), "resourceVersion": rv}}
        body = self._call(what, fn, body=patch, _content_type=MERGE_PATCH, **self._set(ref))
        return parse(CocoonSet, body)

    def list_pods(self, ref: SetRef, *, not_older_than: str | None = None) -> list[Pod]:
        """The pods labelled with the set's name (one LIST). `not_older_than` (a resourceVersion
        held) lets the watch cache answer at once, not after catching up."""
        what, fn = f"LIST pods of {ref}", self._core.list_namespaced_pod
        kw = {"namespace": ref.namespace, "label_selector": f"{k.LABEL_SET_NAME}={ref.name}"}
        bound = {"resource_version": not_older_than, "resource_version_match": "NotOlderThan"}
        try:
            body = self._read(what, fn, **kw, **(bound if not_older_than else {}))
        except ResourceVersionTooLarge as e:
            if not not_older_than:
                raise
            # The server did not reach the bound within its own wait (a cache far behind,
            # revisions from several etcd clusters): one consistent read, logged.
            log.warning(
                "bounded LIST answered too large; listing consistently", what=what, error=str(e)
            )
            body = self._read(what, fn, **kw)
        return _pods(body)

    def list_pods_matching(
        self,
        namespace: str | None,
        label_selector: str,
        *,
        limit: int = 500,
        field_selector: str | None = None,
        from_cache: bool = False,
    ) -> Iterator[list[Pod]]:
        """Pages of pods matching a selector (one namespace, or all); `from_cache`: one page
        from the watch cache (resourceVersion=0, a moment stale)."""
        kw = {
            "label_selector": label_selector,
            "limit": limit,
            "field_selector": field_selector or None,
            "resource_version": "0" if from_cache else None,
        }
        if namespace is None:
            what, fn = f"LIST pods {label_selector}", self._core.list_pod_for_all_namespaces
        else:
            what, fn = f"LIST pods {label_selector} in {namespace}", self._core.list_namespaced_pod
            kw["namespace"] = namespace
        for body in follow_pages(lambda token: self._read(what, fn, **kw, _continue=token)):
            yield _pods(body)

    def list_pod_metrics(self, namespace: str, label_selector: str) -> list[dict[str, Any]]:
        """Raw metrics.k8s.io PodMetrics items (without metrics-server: NotFound or Transient)."""
        what = f"LIST podmetrics {label_selector} in {namespace}"
        kw = {**_POD_METRICS, "namespace": namespace, "label_selector": label_selector}
        body = self._call(what, self._custom.list_namespaced_custom_object, **kw)
        return [i for i in body.get("items") or [] if isinstance(i, dict)]

    def get_pod(self, namespace: str, name: str) -> Pod | None:
        what, fn = f"GET pod {namespace}/{name}", self._core.read_namespaced_pod
        try:
            return parse(Pod, self._read(what, fn, namespace=namespace, name=name))
        except NotFound:
            return None

    def watch_pod(self, namespace: str, name: str, *, timeout: float) -> Iterator[Pod | None]:
        """The pod now, then after each change, for up to `timeout` s (None: gone): a LIST and
        one WATCH, never re-established (a closed stream ends it; the caller decides)."""
        pod = f"{namespace}/{name}"
        kw = {"namespace": namespace, "field_selector": f"metadata.name={name}"}
        body = self._read(f"LIST pod {pod}", self._core.list_namespaced_pod, **kw)
        items = body.get("items") or []
        yield parse(Pod, items[0]) if items else None
        rv = (body.get("metadata") or {}).get("resourceVersion")
        if timeout <= 0 or not rv:
            return
        deadline = time.monotonic() + timeout
        from kubernetes.watch.watch import iter_resp_lines  # noqa: PLC0415 - lazy: cold start

        with self._lock:
            self.requests += 1
        try:
            resp: Any = self._core.list_namespaced_pod(
                **kw,
                watch=True,
                resource_version=rv,
                timeout_seconds=max(1, int(timeout + 0.999)),
                _request_timeout=(self._timeout[0], timeout + 1.0),
            )
        except Exception as e:  # noqa: BLE001 - any failure ends the wait; the caller decides
            # Loud: a refusal (no RBAC `watch` on pods) delays every early push's seat.
            log.warning("pod watch not opened", pod=pod, error=str(e))
            return
        try:
            for line in iter_resp_lines(resp):  # type: ignore[no-untyped-call]
                try:
                    event = json.loads(line)
                except ValueError:
                    return
                kind, obj = event.get("type"), event.get("object") or {}
                if kind == "ERROR":
                    return  # 410 Gone and friends: the caller re-reads if it still cares
                if kind == "DELETED":
                    yield None
                elif kind in ("ADDED", "MODIFIED"):
                    yield parse(Pod, obj)
                if time.monotonic() >= deadline:
                    return
        except _retryable_io_errors() as e:
            # The read deadline, or the stream cut: the wait is over either way.
            log.debug("pod watch ended", pod=pod, error=str(e))
        finally:
            resp.close()
            resp.release_conn()

    def create_pod(self, namespace: str, body: dict[str, Any]) -> Pod:
        what = f"CREATE pod {namespace}/{(body.get('metadata') or {}).get('name', '')}"
        out = self._call(what, self._core.create_namespaced_pod, namespace=namespace, body=body)
        return parse(Pod, out)

    def patch_pod(self, namespace: str, name: str, patch: dict[str, Any]) -> Pod:
        what, fn = f"PATCH pod {namespace}/{name}", self._core.patch_namespaced_pod
        out = self._call(
            what, fn, namespace=namespace, name=name, body=patch, _content_type=MERGE_PATCH
        )
        return parse(Pod, out)

    def delete_pod(
        self, namespace: str, name: str, *, uid: str, resource_version: str | None = None
    ) -> bool:
        """Delete the pod only if its UID (and resourceVersion) match; False when already gone."""
        body = {"preconditions": {"uid": uid}}
        if resource_version:
            body["preconditions"]["resourceVersion"] = resource_version
        what, fn = f"DELETE pod {namespace}/{name}", self._core.delete_namespaced_pod
        try:
            self._call(what, fn, namespace=namespace, name=name, body=body)
        except NotFound:
            return False
        return True

    def emit_event(
        self,
        cs: CocoonSet,
        *,
        reason: str,
        message: str,
        type: str = "Normal",
        key: str | None = None,
    ) -> bool:
        """A core/v1 Event on the set. With `key` its name derives from it, so a repeat
        answers AlreadyExists and this returns False: "once per situation", without state."""
        ns = cs.namespace
        seed = key if key is not None else uuid.uuid4().hex  # no key: a new name every time
        suffix = hashlib.sha256(f"{reason}/{seed}".encode()).hexdigest()[:16]
        now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        body = {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {"name": f"{cs.name}.{suffix}", "namespace": ns},
            "involvedObject": {
                "apiVersion": cs.api_version,
                "kind": cs.kind,
                "name": cs.name,
                "namespace": ns,
                "uid": cs.metadata.uid,
                "resourceVersion": cs.metadata.resource_version,
            },
            "reason": reason,
            "message": message[:_EVENT_MESSAGE_MAX],
            "type": type,
            "source": {"component": k.EVENT_COMPONENT},
            "reportingComponent": k.EVENT_COMPONENT,
            "reportingInstance": self._instance[:128],
            "firstTimestamp": now,
            "lastTimestamp": now,
            "count": 1,
        }
        what = f"CREATE event {reason} on {ns}/{cs.name}"
        try:
            self._call(what, self._core.create_namespaced_event, namespace=ns, body=body)
        except AlreadyExists:
            return False
        log.count(METRIC_EVENTS, namespace=ns, reason=reason, type=type)
        return True

    def review_token(self, token: str, audience: str) -> str | None:
        """The username `token` authenticates as for `audience`, else None (a tighter timeout:
        a caller waits on it before its body is read)."""
        review = {"token": token, "audiences": [audience]}
        body = {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview", "spec": review}
        fn = self._core.create_token_review
        out = self._call("CREATE tokenreview", fn, body=body, _request_timeout=(2.0, 5.0))
        status = out.get("status") or {}
        if not status.get("authenticated") or audience not in (status.get("audiences") or []):
            return None
        return (status.get("user") or {}).get("username") or None


# The process's client per settings, reused by warm invocations; reset for tests.
_clients: ProcessCache[Settings, KubeClient] = ProcessCache(KubeClient.from_settings)
get_client = _clients.get
reset_clients = _clients.reset
