"""The Kubernetes client wrapper lets no `kubernetes`/`urllib3` exception escape.

Status -> error type is a table (docs/design.md#ack-or-retry: what is retried and what is
acknowledged depends on it). Connection failures are exercised for real
against a closed port on 127.0.0.1.
"""

from __future__ import annotations

import json
import socket
from pathlib import Path

import pytest
from kubernetes.client.exceptions import ApiException

from shared.clients.kube import READ_ATTEMPTS, KubeClient, translate
from shared.errors import (
    AccessDenied,
    AdmissionDenied,
    AlreadyExists,
    CocoonError,
    ConfigError,
    Conflict,
    Invalid,
    NotFound,
    PermanentError,
    TransientError,
)
from shared.names import SetRef


def _api_error(status: int, reason: str = "") -> ApiException:
    err = ApiException(status=status, reason="x")
    err.body = json.dumps({"kind": "Status", "reason": reason, "message": f"m{status}"})
    return err


@pytest.mark.parametrize(
    ("status", "reason", "expected"),
    [
        (404, "NotFound", NotFound),
        (409, "Conflict", Conflict),
        (409, "AlreadyExists", AlreadyExists),
        (422, "Invalid", Invalid),
        (401, "Unauthorized", ConfigError),
        (403, "Forbidden", AdmissionDenied),
        (400, "BadRequest", PermanentError),
        (410, "Expired", TransientError),
        (429, "TooManyRequests", TransientError),
        (500, "InternalError", TransientError),
        (503, "ServiceUnavailable", TransientError),
        (0, "", TransientError),
    ],
    ids=str,
)
def test_status_maps_to_a_typed_error(status: int, reason: str, expected: type) -> None:
    err = translate(_api_error(status, reason), "GET thing")
    assert type(err) is expected
    assert "GET thing" in str(err)


def _forbidden(message: str) -> ApiException:
    err = ApiException(status=403, reason="Forbidden")
    err.body = json.dumps({"kind": "Status", "reason": "Forbidden", "message": message})
    return err


def test_rbac_denial_is_a_config_error_naming_namespace_and_verb() -> None:
    # The authorizer's wording, as the real kube-apiserver sends it (tests/e2e proves it).
    err = translate(
        _forbidden(
            'cocoonsets.cocoonset.cocoonstack.io "agent" is forbidden: User '
            '"cocoon-wake@p.iam.gserviceaccount.com" cannot patch resource '
            '"cocoonsets/status" in API group "cocoonset.cocoonstack.io" in the namespace "team-b"'
        ),
        "PATCH cocoonsets/status team-b/agent",
    )
    assert isinstance(err, AccessDenied) and isinstance(err, ConfigError)
    assert (err.verb, err.resource, err.namespace) == ("patch", "cocoonsets/status", "team-b")
    assert "may not patch cocoonsets/status in namespace team-b" in str(err)


def test_owner_references_enforcement_is_an_rbac_gap_not_an_admission_verdict() -> None:
    # The real server's wording when the identity lacks update on cocoonsets/finalizers.
    err = translate(
        _forbidden(
            'pods "agent-0" is forbidden: cannot set blockOwnerDeletion if an ownerReference '
            "refers to a resource you can't set finalizers on: , <nil>"
        ),
        "CREATE pod team-a/agent-0",
    )
    assert isinstance(err, AccessDenied)
    assert (err.verb, err.resource) == ("update", "cocoonsets/finalizers")
    assert "team-a/agent-0" in str(err)


@pytest.mark.parametrize(
    "message",
    [
        'pods "a-0" is forbidden: exceeded quota: seats, requested: pods=1, used: pods=1, '
        "limited: pods=1",
        'pods "a-0" is forbidden: violates PodSecurity "restricted:latest": '
        "allowPrivilegeEscalation != false",
        'pods "a-0" is forbidden: error looking up service account team-a/default: '
        'serviceaccount "default" not found',
        'pods "a-0" is forbidden: unable to create new content in namespace team-a because it '
        "is being terminated",
    ],
    ids=["quota", "podsecurity", "serviceaccount", "terminating"],
)
def test_admission_denial_is_acknowledged_with_the_server_message(message: str) -> None:
    err = translate(_forbidden(message), "POST pods team-a")
    assert isinstance(err, AdmissionDenied) and isinstance(err, PermanentError)
    assert err.server_message == message


def test_conflict_is_retryable_and_not_found_is_acknowledged() -> None:
    assert isinstance(translate(_api_error(409, "Conflict"), "x"), TransientError)
    assert isinstance(translate(_api_error(404, "NotFound"), "x"), PermanentError)


def test_non_json_body_still_translates() -> None:
    err = ApiException(status=502, reason="Bad Gateway")
    err.body = "<html>bad gateway</html>"
    assert isinstance(translate(err, "x"), TransientError)


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_unreachable_api_server_is_transient(tmp_path: Path) -> None:
    port = _closed_port()
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(
        json.dumps(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [{"name": "c", "cluster": {"server": f"http://127.0.0.1:{port}"}}],
                "users": [{"name": "u", "user": {"token": "t"}}],
                "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u"}}],
                "current-context": "x",
            }
        )
    )
    client = KubeClient.from_kubeconfig(str(kubeconfig), timeout=(0.5, 0.5))
    with pytest.raises(TransientError) as info:
        client.get_set(SetRef("team-a", "agent"))
    # The library's exception is the cause, never the thing raised.
    assert isinstance(info.value, CocoonError)
    assert info.value.__cause__ is not None
    # A read is idempotent: our own bounded retry, never the library's.
    assert client.requests == READ_ATTEMPTS


def test_bad_kubeconfig_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError):
        KubeClient.from_kubeconfig(str(tmp_path / "missing"))
