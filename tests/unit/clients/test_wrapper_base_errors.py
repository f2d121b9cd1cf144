"""No library exception escapes its wrapper: each library's *base* error becomes a typed one.

The targets decide ack-or-retry on our error types only (`functions/dispatch.py`); a
library exception that slipped through would crash the invocation with a traceback
and an unplanned retry. The libraries' specific errors are covered where the real
thing runs (the registry, the embedded API, a local Pub/Sub service); here each
library raises its **base** class, which stands for every subclass the wrapper did
not name, including ones a future version adds.

What is faked and why: a base class is abstract in practice (the libraries raise
subclasses), so no real server can be made to raise it. The raise is injected at the
library call the wrapper makes (`google.auth.default`, a session's `request`, a boto3
client method, a kubernetes API method, a Pub/Sub client's `publish`,
`google.auth.jwt.decode`), and everything between that call and the caller is ours.
"""

from __future__ import annotations

from typing import Any

import boto3
import botocore.exceptions
import google.auth
import google.auth.exceptions
import pytest
import requests
import urllib3.exceptions
from google.api_core import exceptions as api_exceptions
from kubernetes import client as k8s
from kubernetes.client.exceptions import OpenApiException

from shared.clients import oidc
from shared.clients.kube import KubeClient
from shared.clients.pubsub import PubSubPublisher
from shared.clients.registry import RegistryClient
from shared.config import RegistryAuth, Settings, parse_registry_base
from shared.errors import (
    CocoonError,
    ConfigError,
    RegistryAuthError,
    RegistryError,
    TransientError,
)
from shared.names import SetRef

HOST = "127.0.0.1:9"  # never contacted: every call fails before the network


def _raise(exc: BaseException) -> Any:
    def boom(*_args: Any, **_kwargs: Any) -> Any:
        raise exc

    return boom


# --- registry -------------------------------------------------------------------------


def _registry(auth: RegistryAuth, host: str = HOST) -> RegistryClient:
    settings = Settings(
        registry_base=parse_registry_base(f"{host}/snapshots"),
        registry_insecure=True,
        registry_auth=auth,
    )
    return RegistryClient(settings)


def test_registry_google_auth_base_error_is_a_registry_auth_error(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(
        google.auth, "default", _raise(google.auth.exceptions.GoogleAuthError("reauth needed"))
    )
    with pytest.raises(RegistryAuthError, match="reauth needed") as caught:
        _registry(RegistryAuth.GOOGLE).snapshot_present("vk-a-b-0")
    assert isinstance(caught.value.__cause__, google.auth.exceptions.GoogleAuthError)


def test_registry_google_refresh_base_error_is_a_registry_auth_error(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    class Creds:
        valid = False
        token = None
        refresh = staticmethod(_raise(google.auth.exceptions.GoogleAuthError("bad key file")))

    monkeypatch.setattr(google.auth, "default", lambda **_kw: (Creds(), "p"))
    with pytest.raises(RegistryAuthError, match="bad key file"):
        _registry(RegistryAuth.GOOGLE).snapshot_present("vk-a-b-0")


def test_registry_requests_base_error_is_a_transient_registry_error(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(requests.Session, "request", _raise(requests.RequestException("odd")))
    with pytest.raises(RegistryError, match="odd"):
        _registry(RegistryAuth.NONE).snapshot_present("vk-a-b-0")


def test_registry_botocore_base_error_is_a_transient_registry_error() -> None:
    ecr = boto3.client(
        "ecr",
        region_name="eu-west-1",
        aws_access_key_id="AKIDEXAMPLE",
        aws_secret_access_key="not-a-secret",
    )
    ecr.describe_images = _raise(botocore.exceptions.BotoCoreError())
    host = "123456789012.dkr.ecr.eu-west-1.amazonaws.com"
    settings = Settings(
        registry_base=parse_registry_base(f"{host}/snapshots"), registry_auth=RegistryAuth.ECR
    )
    with pytest.raises(RegistryError):
        RegistryClient(settings, ecr_client=ecr).snapshot_present("vk-a-b-0")


# --- kube -----------------------------------------------------------------------------


def _kube() -> KubeClient:
    conf = k8s.Configuration()
    conf.host = f"http://{HOST}"
    return KubeClient(k8s.ApiClient(conf))


@pytest.mark.parametrize(
    "exc",
    [OpenApiException("client-side"), urllib3.exceptions.HTTPError("pool")],
    ids=["kubernetes-OpenApiException", "urllib3-HTTPError"],
)
def test_kube_library_base_errors_are_typed(exc: Exception) -> None:
    kube = _kube()
    kube._custom.get_namespaced_custom_object = _raise(exc)  # type: ignore[method-assign]
    with pytest.raises(CocoonError) as caught:
        kube.get_set(SetRef("team-a", "agent"))
    assert caught.value.__cause__ is exc


def test_kube_google_auth_base_error_is_a_config_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(
        google.auth, "default", _raise(google.auth.exceptions.GoogleAuthError("reauth needed"))
    )
    with pytest.raises(ConfigError, match="reauth needed"):
        KubeClient.from_google("https://203.0.113.1", None)


# --- pubsub ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "exc",
    [api_exceptions.GoogleAPIError("api"), google.auth.exceptions.GoogleAuthError("auth")],
    ids=["api_core-GoogleAPIError", "google-auth-GoogleAuthError"],
)
def test_pubsub_library_base_errors_are_typed(exc: Exception) -> None:
    class Client:
        publish = staticmethod(_raise(exc))

        def resume_publish(self, topic: str, key: str) -> None:
            pass

    publisher = PubSubPublisher("projects/p/topics/t", client=Client())
    with pytest.raises(TransientError) as caught:
        publisher.publish(b"{}", ordering_key="ns/name", attributes={})
    assert caught.value.__cause__ is exc


def test_pubsub_client_construction_base_error_is_typed() -> None:
    exc = google.auth.exceptions.GoogleAuthError("no credentials at all")
    publisher = PubSubPublisher("projects/p/topics/t", client_factory=_raise(exc))
    with pytest.raises(CocoonError) as caught:
        publisher.publish(b"{}", ordering_key="", attributes={})
    assert caught.value.__cause__ is exc


# --- oidc -----------------------------------------------------------------------------


def test_oidc_google_auth_base_error_rejects_the_token(monkeypatch: pytest.MonkeyPatch) -> None:
    from google.auth import jwt

    monkeypatch.setattr(jwt, "decode", _raise(google.auth.exceptions.GoogleAuthError("x")))
    with pytest.raises(oidc.TokenRejected):
        oidc.verify_push_token("a.b.c", audience="https://ingest", certs={"k": "pem"})
