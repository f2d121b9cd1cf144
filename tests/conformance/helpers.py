"""Shared helpers for the conformance suite: only the official `kubernetes` client.

Every test drives the embedded API the way production code drives a real
cluster, so each assertion states what kube-apiserver itself does.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest
from kubernetes import client

GROUP = "cocoonset.cocoonstack.io"
VERSION = "v1"
PLURAL = "cocoonsets"


def status_of(exc: client.ApiException) -> dict[str, Any]:
    """The Status body of a failed call."""
    body: dict[str, Any] = json.loads(exc.body)
    return body


def expect_error(code: int, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> dict[str, Any]:
    with pytest.raises(client.ApiException) as info:
        fn(*args, **kwargs)
    assert info.value.status == code, info.value.body
    st = status_of(info.value)
    assert st["kind"] == "Status"
    assert st["apiVersion"] == "v1"
    assert st["status"] == "Failure"
    assert st["code"] == code
    return st


def pod(
    name: str, *, labels: dict[str, str] | None = None, node: str | None = None, **spec: Any
) -> dict[str, Any]:
    body: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": labels or {}},
        "spec": {"containers": [{"name": "main", "image": "registry.local/agent:1"}], **spec},
    }
    if node:
        body["spec"]["nodeName"] = node
    return body


def cocoonset(name: str, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "CocoonSet",
        "metadata": {"name": name},
        "spec": {"agent": {"image": "registry.local/agent:1"}, **spec},
    }


class Custom:
    """CustomObjectsApi bound to the CocoonSet resource in one namespace."""

    def __init__(self, api: client.ApiClient, namespace: str = "default") -> None:
        self.co = client.CustomObjectsApi(api)
        self.ns = namespace

    def create(self, body: dict[str, Any], **kw: Any) -> dict[str, Any]:
        out: dict[str, Any] = self.co.create_namespaced_custom_object(
            GROUP, VERSION, self.ns, PLURAL, body, **kw
        )
        return out

    def get(self, name: str) -> dict[str, Any]:
        out: dict[str, Any] = self.co.get_namespaced_custom_object(
            GROUP, VERSION, self.ns, PLURAL, name
        )
        return out

    def list(self, **kw: Any) -> dict[str, Any]:
        out: dict[str, Any] = self.co.list_namespaced_custom_object(
            GROUP, VERSION, self.ns, PLURAL, **kw
        )
        return out

    def patch(self, name: str, body: Any, **kw: Any) -> dict[str, Any]:
        out: dict[str, Any] = self.co.patch_namespaced_custom_object(
            GROUP, VERSION, self.ns, PLURAL, name, body, **kw
        )
        return out

    def patch_status(self, name: str, body: Any) -> dict[str, Any]:
        out: dict[str, Any] = self.co.patch_namespaced_custom_object_status(
            GROUP, VERSION, self.ns, PLURAL, name, body
        )
        return out

    def replace(self, name: str, body: dict[str, Any]) -> dict[str, Any]:
        out: dict[str, Any] = self.co.replace_namespaced_custom_object(
            GROUP, VERSION, self.ns, PLURAL, name, body
        )
        return out

    def replace_status(self, name: str, body: dict[str, Any]) -> dict[str, Any]:
        out: dict[str, Any] = self.co.replace_namespaced_custom_object_status(
            GROUP, VERSION, self.ns, PLURAL, name, body
        )
        return out

    def delete(self, name: str, **kw: Any) -> dict[str, Any]:
        out: dict[str, Any] = self.co.delete_namespaced_custom_object(
            GROUP, VERSION, self.ns, PLURAL, name, **kw
        )
        return out


def wait_for(predicate: Callable[[], bool], timeout: float = 5.0, interval: float = 0.02) -> None:
    """Poll until `predicate()`; the emulator's controllers act asynchronously, as real ones do."""
    import time

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(interval)
    raise AssertionError("condition not reached in time")


def gone(fn: Callable[[], Any]) -> bool:
    try:
        fn()
    except client.ApiException as exc:
        if exc.status == 404:
            return True
        raise
    return False


def api_client_for(kube: Any, tmp_path: Any) -> client.ApiClient:
    """An ApiClient for an extra EmbeddedKube a test starts itself."""
    from kubernetes import config

    path = kube.write_kubeconfig(tmp_path / "extra-kubeconfig")
    configuration = client.Configuration()
    config.load_kube_config(config_file=str(path), client_configuration=configuration)
    return client.ApiClient(configuration)


def new_namespace(core: client.CoreV1Api, name: str) -> None:
    """Create a namespace and wait for its `default` ServiceAccount, as a client of a real
    cluster must: the ServiceAccount controller adds it moments later, and until then
    ServiceAccount admission refuses every pod there."""
    core.create_namespace({"metadata": {"name": name}})
    wait_for(lambda: not gone(lambda: core.read_namespaced_service_account("default", name)))
