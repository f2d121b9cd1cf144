"""The HTTP `ingest` target through `functions_framework.create_app(...).test_client()`.

One table per source: valid, irrelevant, malformed, oversized, unauthenticated,
each with the HTTP status and the decision (what reached the dispatch)
asserted. The dispatch is a recorder: `functions.dispatch.run` needs a cluster
and belongs to the reconciler work.
"""

from __future__ import annotations

import base64
import json
import socket
from typing import Any

import pytest

from functions import ingest, process
from shared.errors import ConfigError, NotFound, RegistryError
from shared.names import SetRef
from shared.triggers import SetChanged, SnapshotPushed, Source, SweepTick, WakeRequested
from tests.data.events import event_bytes, load_event
from tests.fixtures.ingest import AUDIT_TOKEN, ROUTE_TOKENS, SWEEP_TOKEN, TOKEN, Recorder, auth

VM = "vk-team-a-agent-0"
DIGEST = "sha256:3f5e9a" + "0" * 55 + "e21"
AGENT = SetRef("team-a", "agent")
DIST_TYPE = "application/vnd.docker.distribution.events.v1+json"


def _pubsub(payload: dict[str, Any], message_id: str = "42") -> bytes:
    data = base64.b64encode(json.dumps(payload).encode()).decode()
    return json.dumps({"message": {"data": data, "messageId": message_id}}).encode()


# (route, content type, valid body, expected triggers, irrelevant body)
SOURCES = {
    "distribution-v1": (
        "/registry",
        DIST_TYPE,
        event_bytes("distribution_push_hibernate"),
        [SnapshotPushed(f"cocoon/{VM}", "hibernate", DIGEST, Source.DISTRIBUTION, VM)],
        event_bytes("distribution_blob_push"),
    ),
    "distribution-v2": (
        "/registry",
        "application/vnd.docker.distribution.events.v2+json",
        event_bytes("distribution_push_hibernate"),
        [SnapshotPushed(f"cocoon/{VM}", "hibernate", DIGEST, Source.DISTRIBUTION, VM)],
        event_bytes("distribution_push_latest"),
    ),
    "harbor-default": (
        "/registry",
        "application/json",
        event_bytes("harbor_default_push"),
        [SnapshotPushed(f"cocoon/{VM}", "hibernate", DIGEST, Source.HARBOR, VM)],
        event_bytes("harbor_default_pull"),
    ),
    "harbor-cloudevents": (
        "/registry",
        "application/cloudevents+json",
        event_bytes("harbor_cloudevent_push"),
        [SnapshotPushed(f"cocoon/{VM}", "hibernate", DIGEST, Source.HARBOR, VM)],
        json.dumps({**load_event("harbor_cloudevent_push"), "type": "harbor.scan.completed"}),
    ),
    "ecr": (
        "/registry",
        "application/json",
        event_bytes("ecr_push_hibernate"),
        [SnapshotPushed(f"cocoon/{VM}", "hibernate", DIGEST, Source.ECR, VM)],
        event_bytes("ecr_push_failed"),
    ),
    "k8s-audit": (
        "/kubernetes/audit",
        "application/json",
        event_bytes("audit_eventlist"),
        [
            SetChanged(AGENT, "cocoonsets.patch", Source.K8S_AUDIT),
            SetChanged(SetRef("team-a", "other"), "pods.delete", Source.K8S_AUDIT),
        ],
        event_bytes("audit_eventlist_reads"),
    ),
    "pubsub-push": (
        "/pubsub",
        "application/json",
        _pubsub({"namespace": "team-a", "name": "agent"}),
        [WakeRequested(AGENT, Source.PUBSUB)],
        _pubsub({"action": "DELETE", "tag": f"127.0.0.1:5000/cocoon/{VM}:hibernate"}),
    ),
}

CASES = [
    pytest.param(source, case, id=f"{source}-{case}")
    for source in SOURCES
    for case in ("valid", "irrelevant", "malformed", "oversized", "unauthenticated", "wrong-token")
]


@pytest.mark.parametrize(("source", "case"), CASES)
def test_ingest_table(client: Any, recorder: Recorder, source: str, case: str) -> None:
    route, content_type, valid, expected, irrelevant = SOURCES[source]
    token = ROUTE_TOKENS[route]
    headers = {"Content-Type": content_type, **auth(token)}
    body: bytes | str = valid
    if case == "irrelevant":
        body = irrelevant
    elif case == "malformed":
        body = b'{"events": [{"action": '
    elif case == "oversized":
        body = b" " * (ingest.MAX_BODY + 1)
    elif case == "unauthenticated":
        del headers["Authorization"]
    elif case == "wrong-token":
        headers.update(auth(token[:-1] + "x"))

    response = client.post(route, data=body, headers=headers)

    if case == "valid":
        assert response.status_code == 202
        assert response.get_json()["accepted"] == len(expected)
        assert recorder.calls == [(expected, "ingest")]
        return
    assert recorder.calls == []
    if case in ("irrelevant", "malformed"):
        # Acknowledged: a non-2xx makes Distribution retry forever and stall its queue.
        assert response.status_code == 202
        assert response.get_json()["accepted"] == 0
        assert response.get_json()["dropped"] >= 1
    elif case == "oversized":
        assert response.status_code == 413
    else:
        assert response.status_code == 401
        assert response.headers["WWW-Authenticate"] == "Bearer"


def test_unknown_path_is_404(client: Any, recorder: Recorder) -> None:
    response = client.post("/other", data=b"{}", headers=auth())
    assert response.status_code == 404
    assert recorder.calls == []


@pytest.mark.parametrize("method", ["get", "put", "delete"])
def test_wrong_method_is_405(client: Any, method: str) -> None:
    response = getattr(client, method)("/registry", headers=auth())
    assert response.status_code == 405
    assert response.headers["Allow"] == "POST"


def test_oversize_is_refused_from_content_length_before_reading(client: Any) -> None:
    # The body is small but the declared length is not: refused without reading.
    environ = {"CONTENT_LENGTH": str(ingest.MAX_BODY + 1)}
    response = client.post(
        "/registry",
        input_stream=__import__("io").BytesIO(b"{}"),
        headers=auth(),
        environ_overrides=environ,
    )
    assert response.status_code == 413


def test_unset_token_refuses_everything_with_500(
    client: Any,
    recorder: Recorder,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.delenv("COCOON_INGEST_TOKEN")
    process.reset()
    for headers in ({}, auth(), auth("")):
        response = client.post(
            "/registry", data=event_bytes("distribution_push_hibernate"), headers=headers
        )
        assert response.status_code == 500
    assert recorder.calls == []
    assert "COCOON_INGEST_TOKEN" in capsys.readouterr().out


def test_invalid_configuration_is_500_naming_the_variable(
    client: Any, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("COCOON_NAMESPACES", "Not_Valid")
    process.reset()
    response = client.post("/registry", data=b"{}", headers=auth())
    assert response.status_code == 500
    assert "COCOON_NAMESPACES" in capsys.readouterr().out


def test_missing_registry_base_asks_for_redelivery_of_a_hibernate_push(
    client: Any, recorder: Recorder, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("COCOON_REGISTRY_BASE")
    process.reset()
    hibernate = client.post(
        "/registry", data=event_bytes("distribution_push_hibernate"), headers=auth()
    )
    blob = client.post("/registry", data=event_bytes("distribution_blob_push"), headers=auth())
    assert hibernate.status_code == 503  # fixed configuration + redelivery = success
    assert blob.status_code == 202  # a blob never matters, configured or not
    assert recorder.calls == []


@pytest.mark.parametrize(
    ("error", "status"),
    [
        pytest.param(RegistryError("registry 503"), 503, id="transient-503"),
        pytest.param(ConfigError("COCOON_KUBE_SERVER unreachable"), 503, id="config-503"),
        pytest.param(NotFound("set is gone"), 202, id="permanent-ack"),
    ],
)
def test_dispatch_errors_decide_ack_or_retry(
    client: Any, recorder: Recorder, error: Exception, status: int
) -> None:
    recorder.error = error
    response = client.post(
        "/registry", data=event_bytes("distribution_push_hibernate"), headers=auth()
    )
    assert response.status_code == status
    assert len(recorder.calls) == 1


def test_namespace_allowlist_drops_before_dispatch(
    client: Any, recorder: Recorder, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COCOON_NAMESPACES", "team-b")
    process.reset()
    response = client.post(
        "/kubernetes/audit", data=event_bytes("audit_eventlist"), headers=auth(AUDIT_TOKEN)
    )
    assert response.status_code == 202
    assert response.get_json()["accepted"] == 0
    assert recorder.calls == []


def test_one_log_line_per_event_with_decision_reason_and_event_id(
    client: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    client.post("/kubernetes/audit", data=event_bytes("audit_eventlist"), headers=auth(AUDIT_TOKEN))
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    events = [r for r in lines if r.get("decision")]
    assert len(events) == len(load_event("audit_eventlist")["items"])
    by_id = {r["event_id"]: r for r in events}
    accepted = by_id["5d1f7c2a-8e3b-4b0f-9d6e-2a4c8b1e7f30"]
    assert accepted["decision"] == "accepted"
    assert accepted["cocoonset"] == "team-a/agent"
    assert accepted["severity"] == "INFO"
    read = by_id["5d1f7c2a-8e3b-4b0f-9d6e-2a4c8b1e7f34"]
    assert (read["decision"], read["reason"]) == ("dropped", "read-verb")


@pytest.mark.parametrize(
    "token",
    [pytest.param(TOKEN, id="right-token"), pytest.param(TOKEN + "-wrong", id="wrong-token")],
)
def test_tokens_never_reach_the_logs(
    client: Any, recorder: Recorder, token: str, capsys: pytest.CaptureFixture[str]
) -> None:
    for body in (event_bytes("distribution_push_hibernate"), b"not json", b"{}"):
        client.post("/registry", data=body, headers=auth(token))
    client.post("/nowhere", data=b"{}", headers=auth(token))
    # A producer configured without the scheme sends the bare token.
    client.post("/registry", data=b"{}", headers={"Authorization": token})
    client.post("/pubsub", data=b"{}", headers={"Authorization": f"Basic {token}"})
    out = capsys.readouterr()
    assert out.out  # something was logged...
    assert TOKEN not in out.out + out.err  # ...and never the token
    assert token not in out.out + out.err


INJECTIONS = (
    [
        pytest.param(
            "/registry",
            json.dumps(
                {
                    "events": [
                        {
                            "id": "x",
                            "action": "push",
                            "target": {"repository": repo, "tag": "hibernate", "digest": DIGEST},
                        }
                    ]
                }
            ),
            id=ident,
        )
        for repo, ident in [
            ("cocoon/../vk-team-a-agent-0", "repo-dot-dot"),
            ("cocoon%2Fvk-team-a-agent-0", "repo-percent-2f"),
            ("cocoon/vk-team-a-agent-0\x00", "repo-nul"),
            ("cocoon/vk-" + "a" * 300 + "-agent-0", "repo-over-long"),
        ]
    ]
    + [
        pytest.param(
            "/kubernetes/audit",
            json.dumps(
                {
                    "kind": "EventList",
                    "items": [
                        {
                            "auditID": "x",
                            "stage": "ResponseComplete",
                            "verb": "patch",
                            "responseStatus": {"code": 200},
                            "objectRef": {
                                "resource": "cocoonsets",
                                "apiGroup": "cocoonset.cocoonstack.io",
                                "namespace": ns,
                                "name": name,
                            },
                        }
                    ],
                }
            ),
            id=ident,
        )
        for ns, name, ident in [
            ("../kube-system", "agent", "ns-dot-dot"),
            ("team-a%2F..", "agent", "ns-percent-2f"),
            ("team-a", "agent\x00", "name-nul"),
            ("team-a", "a" * 254, "name-over-long"),
            ("team-a", "agent/../../secrets", "name-slash"),
        ]
    ]
    + [
        pytest.param(
            "/pubsub",
            _pubsub({"namespace": "team-a", "name": "../../api/v1/secrets"}),
            id="wake-name-traversal",
        ),
    ]
)


@pytest.mark.parametrize(("route", "body"), INJECTIONS)
def test_injection_is_refused_without_any_connection(
    client: Any,
    recorder: Recorder,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    *,
    route: str,
    body: str,
) -> None:
    def no_network(self: socket.socket, address: object) -> None:
        pytest.fail(f"a connection to {address!r} was attempted for an invalid name")

    monkeypatch.setattr(socket.socket, "connect", no_network)
    monkeypatch.setattr(socket.socket, "connect_ex", no_network)
    response = client.post(route, data=body, headers=auth(ROUTE_TOKENS[route]))
    assert response.status_code == 202  # logged and acknowledged
    assert recorder.calls == []
    assert "invalid-name" in capsys.readouterr().out


def test_sweep_tick_over_pubsub_push_reaches_dispatch(client: Any, recorder: Recorder) -> None:
    response = client.post("/pubsub", data=_pubsub({"dryRun": True}), headers=auth(SWEEP_TOKEN))
    assert response.status_code == 202
    assert recorder.triggers == [SweepTick(True, Source.SCHEDULER)]


@pytest.mark.parametrize(
    ("payload", "reason"),
    [
        # Reproduced in review: any unrecognised payload used to run a full sweep.
        pytest.param({"ns": "a", "set": "b"}, "malformed", id="unrecognised"),
        pytest.param(
            {"action": "INSERT", "tag": f"127.0.0.1:5000/cocoon/{VM}:hibernate"},
            "type-not-accepted",
            id="misrouted-registry-message",
        ),
    ],
)
def test_pubsub_push_refuses_what_is_not_a_wake_or_a_tick(
    client: Any,
    recorder: Recorder,
    capsys: pytest.CaptureFixture[str],
    payload: dict[str, Any],
    reason: str,
) -> None:
    response = client.post("/pubsub", data=_pubsub(payload), headers=auth(ROUTE_TOKENS["/pubsub"]))
    assert response.status_code == 202  # acknowledged: redelivery would not change it
    assert response.get_json() == {"accepted": 0, "dropped": 1}
    assert recorder.calls == []
    [line] = [json.loads(x) for x in capsys.readouterr().out.splitlines() if '"dropped"' in x]
    assert line["reason"] == reason
