"""In-cluster callers authenticated by the cluster itself (TokenReview), on a real kube-apiserver.

A ServiceAccount named as Knative Eventing names a source's OIDC identity gets a token
from the TokenRequest subresource, as the source's adapter would, and calls `serve`'s
`/wake`; `serve` runs as a function identity with exactly the shipped RBAC plus the
TokenReview binding Terraform renders with `kubernetes_token_review`. The embedded API
has no service-account signing keys, so it cannot judge a token: real server only.
"""

from __future__ import annotations

import base64
import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from cloudevents.http import to_binary

from devstack.realkube import FUNCTION_USERS
from functions import doors, process
from functions.serve import create_app
from tests.e2e import test_real_cluster as flows
from tests.e2e.test_hostile_input import Tripwire
from tests.e2e.test_wake_e2e import released_set, wake_event
from tests.fixtures.cocoon_objects import NS, SET
from tests.fixtures.reconcile_world import World

pytestmark = pytest.mark.e2e

real = flows.real
rworld = flows.rworld

AUDIENCE = "cocoon-hibernation"
SOURCES_NS = "cocoon-system"
# What Knative Eventing names the OIDC ServiceAccount of the ApiServerSource `cocoon-wake`.
SOURCE_SA = "cocoon-wake-oidc-sources.knative.dev-apiserversource"
CALLER = f"system:serviceaccount:{SOURCES_NS}:{SOURCE_SA}"
IDENTITY = "wake"  # serve runs as this function identity


def _token(real: Any, account: str, audience: str) -> str:
    """A bound token from the TokenRequest subresource, as a source's adapter gets one."""
    path = f"/api/v1/namespaces/{SOURCES_NS}/serviceaccounts"
    status, body = real.request("POST", path, {"metadata": {"name": account}})
    assert status in (201, 409), body
    request = {"spec": {"audiences": [audience], "expirationSeconds": 600}}
    status, body = real.request("POST", f"{path}/{account}/token", request)
    assert status == 201, body
    token: str = json.loads(body)["status"]["token"]
    return token


def _forged(claims: dict[str, Any]) -> str:
    """A JWT with the right claims and no valid signature."""
    part = base64.urlsafe_b64encode(json.dumps(claims).encode()).decode().rstrip("=")
    return f"eyJhbGciOiJSUzI1NiJ9.{part}.c2lnbmF0dXJl"


@pytest.fixture
def serve_as_function(
    real: Any, rworld: World, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[Any]:
    real.ensure_namespace(SOURCES_NS)
    binding = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRoleBinding",
        "metadata": {"name": "cocoon-test-tokenreview", "labels": {"cocoon-test": "true"}},
        "roleRef": {
            "apiGroup": "rbac.authorization.k8s.io",
            "kind": "ClusterRole",
            "name": "cocoon-hibernation-tokenreview",
        },
        "subjects": [
            {
                "apiGroup": "rbac.authorization.k8s.io",
                "kind": "User",
                "name": FUNCTION_USERS[IDENTITY],
            }
        ],
    }
    real.apply_manifest(json.dumps(binding))
    for key in [k for k in os.environ if k.startswith("COCOON_")]:
        monkeypatch.delenv(key)
    for key, value in rworld.env.items():
        monkeypatch.setenv(key, value)
    kubeconfig = real.write_kubeconfig(tmp_path / "serve.kubeconfig", identity=IDENTITY)
    monkeypatch.setenv("KUBECONFIG", str(kubeconfig))
    monkeypatch.setenv("COCOON_CLUSTER_AUDIENCE", AUDIENCE)
    monkeypatch.setenv("COCOON_CLUSTER_CALLERS", f"{CALLER}=wake")
    process.reset()
    doors._reviews.clear()
    yield create_app().test_client()
    process.reset()


def _post(client: Any, token: str) -> tuple[int, int]:
    headers, body = to_binary(wake_event())
    stream = Tripwire(body)
    response = client.post(
        "/wake",
        input_stream=stream,
        content_length=len(body),
        headers=dict(headers) | {"Authorization": f"Bearer {token}"},
    )
    return response.status_code, stream.reads


def test_a_listed_service_account_with_the_sinks_audience_wakes_and_nothing_else_opens(
    real: Any, rworld: World, serve_as_function: Any
) -> None:
    released_set(rworld)
    before = rworld.get_set(NS, SET)["metadata"]["resourceVersion"]
    refused = {
        "wrong audience": _token(real, SOURCE_SA, "another-sink"),
        "unlisted account": _token(real, "cocoon-release-oidc-other", AUDIENCE),
        "garbage": "x" * 40,
        "forged": _forged({"sub": CALLER, "aud": [AUDIENCE], "exp": 4102444800}),
    }
    for what, token in refused.items():
        assert _post(serve_as_function, token) == (401, 0), what
        assert rworld.get_set(NS, SET)["metadata"]["resourceVersion"] == before, what

    good = _token(real, SOURCE_SA, AUDIENCE)
    assert _post(serve_as_function, good)[0] == 200
    cs = rworld.get_set(NS, SET)
    assert cs["spec"]["suspend"] is False
    # Who asked is the ServiceAccount's username, never the token.
    assert good not in json.dumps(cs)
    assert f"wake:{CALLER}" in json.dumps(cs["metadata"]["annotations"])
