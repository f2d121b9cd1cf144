"""A small JSON client for the local Kubernetes API, used by the simulator and the demo.

The functions talk to Kubernetes through `shared.clients.kube` (the official
client, any kubeconfig). The local stack's own parts (the cluster simulator,
the demo's observer) stand in for things that are not ours, talk only to the
embedded API over plain HTTP, and count their own requests so the demo can
tell the functions' API traffic apart from the simulator's.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator, Mapping
from typing import Any

import requests

from shared import constants as k

JSON = dict[str, Any]
MERGE_PATCH = "application/merge-patch+json"


class ApiError(Exception):
    def __init__(self, status: int, method: str, path: str, body: str) -> None:
        super().__init__(f"{method} {path}: HTTP {status}: {body[:300]}")
        self.status = status


class NotFoundError(ApiError):
    pass


class ConflictError(ApiError):
    """409: a compare-and-swap lost or the object exists; the next tick re-decides."""


def set_path(namespace: str | None = None, name: str | None = None) -> str:
    base = f"/apis/{k.GROUP}/{k.VERSION}"
    if namespace is None:
        return f"{base}/{k.PLURAL}"
    path = f"{base}/namespaces/{namespace}/{k.PLURAL}"
    return f"{path}/{name}" if name else path


def pod_path(namespace: str | None = None, name: str | None = None) -> str:
    if namespace is None:
        return "/api/v1/pods"
    path = f"/api/v1/namespaces/{namespace}/pods"
    return f"{path}/{name}" if name else path


class KubeHTTP:
    """JSON over HTTP against one API server; thread-safe request counting."""

    def __init__(
        self,
        base_url: str,
        *,
        timeout: float = 5.0,
        token: str | None = None,
        ca_file: str | None = None,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self.timeout = timeout
        self._session = requests.Session()
        # An https API server with its own CA (the real kube-apiserver fixture). Passed
        # per request: requests lets REQUESTS_CA_BUNDLE override a session-wide setting.
        self._verify: str | bool = ca_file or True
        if token:
            self._session.headers["Authorization"] = f"Bearer {token}"
        self._lock = threading.Lock()
        self.requests_made = 0

    def close(self) -> None:
        self._session.close()

    def request(
        self,
        method: str,
        path: str,
        *,
        body: Mapping[str, Any] | None = None,
        content_type: str = "application/json",
        params: Mapping[str, str] | None = None,
    ) -> JSON:
        with self._lock:
            self.requests_made += 1
        headers = {"Content-Type": content_type} if body is not None else {}
        resp = self._session.request(
            method,
            self.base_url + path,
            json=body,
            headers=headers,
            params=params,
            timeout=self.timeout,
            verify=self._verify,
        )
        if resp.status_code == 404:
            raise NotFoundError(resp.status_code, method, path, resp.text)
        if resp.status_code == 409:
            raise ConflictError(resp.status_code, method, path, resp.text)
        if resp.status_code >= 400:
            raise ApiError(resp.status_code, method, path, resp.text)
        if not resp.content:
            return {}
        out: JSON = resp.json()
        return out

    def get(self, path: str, params: Mapping[str, str] | None = None) -> JSON:
        return self.request("GET", path, params=params)

    def list_items(self, path: str, params: Mapping[str, str] | None = None) -> list[JSON]:
        """Every item of a list, following `continue` tokens."""
        out: list[JSON] = []
        query = dict(params or {})
        while True:
            page = self.get(path, query or None)
            out.extend(page.get("items") or [])
            token = (page.get("metadata") or {}).get("continue")
            if not token:
                return out
            query["continue"] = token

    def iter_items(self, path: str) -> Iterator[JSON]:
        yield from self.list_items(path)

    def post(self, path: str, body: Mapping[str, Any]) -> JSON:
        return self.request("POST", path, body=body)

    def merge_patch(self, path: str, patch: Mapping[str, Any]) -> JSON:
        return self.request("PATCH", path, body=patch, content_type=MERGE_PATCH)

    def delete(self, path: str, body: Mapping[str, Any] | None = None) -> JSON:
        return self.request("DELETE", path, body=body)
