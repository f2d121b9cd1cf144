"""Event adapters: every recorded source -> the decision (triggers or drop reasons).

Pure tier: no HTTP, no clients. The CloudEvent cases go through the real
`cloudevents.http.CloudEvent` type the functions-framework hands over.
"""

from __future__ import annotations

import base64
import json
from dataclasses import replace
from typing import Any

import pytest
from cloudevents.http import CloudEvent

from shared.adapters import (
    ACCEPT_PUBSUB_PUSH,
    ACCEPT_RELEASE,
    ACCEPT_SWEEP,
    ACCEPT_WAKE,
    DropReason,
    Parsed,
    parse_audit_eventlist,
    parse_cloudevent,
    parse_pubsub_push,
    parse_registry_webhook,
)
from shared.adapters.audit_events import parse_gke_method
from shared.adapters.push_events import split_qualified
from shared.config import RegistryBase, Settings
from shared.errors import InvalidName, MalformedEvent
from shared.names import SetRef
from shared.triggers import SetChanged, SnapshotPushed, Source, SweepTick, WakeRequested
from tests.data.events import cloudevent, event_bytes, load_event

VM = "vk-team-a-agent-0"
REPO = f"cocoon/{VM}"
DIGEST = "sha256:3f5e9a" + "0" * 55 + "e21"
AGENT = SetRef("team-a", "agent")


def settings(host: str = "127.0.0.1:5000", prefix: str = "cocoon") -> Settings:
    return Settings(registry_base=RegistryBase(host, prefix))


def pushed(source: Source, repo: str = REPO, digest: str | None = DIGEST) -> SnapshotPushed:
    return SnapshotPushed(repo, "hibernate", digest, source, VM)


def reasons(parsed: Parsed) -> list[DropReason]:
    return [d.reason for d in parsed.dropped]


# --- HTTP bodies ----------------------------------------------------------------

REGISTRY_CASES = [
    pytest.param(
        "distribution_push_hibernate", [pushed(Source.DISTRIBUTION)], [], id="dist-hibernate"
    ),
    pytest.param("distribution_push_latest", [], [DropReason.TAG], id="dist-latest"),
    pytest.param("distribution_blob_push", [], [DropReason.BLOB], id="dist-blob"),
    pytest.param("distribution_pull", [], [DropReason.NOT_PUSH], id="dist-pull"),
    pytest.param("distribution_manifest_delete", [], [DropReason.NOT_PUSH], id="dist-delete"),
    pytest.param(
        "distribution_outside_base", [], [DropReason.OUTSIDE_BASE], id="dist-outside-base"
    ),
    pytest.param("harbor_default_push", [pushed(Source.HARBOR)], [], id="harbor-default"),
    pytest.param("harbor_default_pull", [], [DropReason.NOT_PUSH], id="harbor-pull"),
    pytest.param("harbor_cloudevent_push", [pushed(Source.HARBOR)], [], id="harbor-cloudevents"),
    pytest.param("ecr_push_hibernate", [pushed(Source.ECR)], [], id="ecr-push"),
    pytest.param("ecr_push_failed", [], [DropReason.PUSH_FAILED], id="ecr-failed"),
    pytest.param("ecr_push_untagged", [], [DropReason.UNTAGGED], id="ecr-untagged"),
]


@pytest.mark.parametrize(("fixture", "triggers", "dropped"), REGISTRY_CASES)
def test_registry_webhook_decision(
    fixture: str, triggers: list[SnapshotPushed], dropped: list[DropReason]
) -> None:
    parsed = parse_registry_webhook(event_bytes(fixture), "application/json", settings())
    assert parsed.triggers == triggers
    assert reasons(parsed) == dropped


def test_registry_trigger_carries_the_event_id_for_correlation() -> None:
    parsed = parse_registry_webhook(
        event_bytes("distribution_push_hibernate"), "application/json", settings()
    )
    assert parsed.triggers[0].event_id == "7b1c3f0e-2d44-4c0a-9a51-3f1e2d9c0a11"
    assert parsed.event_id == "7b1c3f0e-2d44-4c0a-9a51-3f1e2d9c0a11"


def test_registry_without_base_drops_with_a_reason_naming_the_variable() -> None:
    parsed = parse_registry_webhook(
        event_bytes("distribution_push_hibernate"), "application/json", Settings()
    )
    assert parsed.triggers == []
    assert parsed.dropped[0].reason is DropReason.NO_REGISTRY_BASE
    assert "COCOON_REGISTRY_BASE" in parsed.dropped[0].detail


def test_registry_namespace_allowlist_drops_other_namespaces() -> None:
    only_b = replace(settings(), namespaces=frozenset({"team-b"}))
    parsed = parse_registry_webhook(event_bytes("distribution_push_hibernate"), None, only_b)
    assert reasons(parsed) == [DropReason.NAMESPACE]


def test_registry_repository_that_is_not_an_agent_vm_is_dropped() -> None:
    body = load_event("distribution_push_hibernate")
    body["events"][0]["target"]["repository"] = "cocoon/base-image"
    parsed = parse_registry_webhook(json.dumps(body).encode(), None, settings())
    assert reasons(parsed) == [DropReason.NOT_A_VM]


@pytest.mark.parametrize(
    "repository",
    [
        pytest.param("cocoon/../etc/vk-team-a-agent-0", id="dot-dot"),
        pytest.param("cocoon%2Fvk-team-a-agent-0", id="percent-2f"),
        pytest.param("cocoon/vk-team-a-agent-0\x00", id="nul"),
        pytest.param("cocoon/" + "a" * 300, id="over-long"),
        pytest.param("Cocoon/VK-team-a-agent-0", id="upper-case"),
    ],
)
def test_registry_injection_is_refused_per_item(repository: str) -> None:
    body = load_event("distribution_push_hibernate")
    good = body["events"][0]
    bad = json.loads(json.dumps(good))
    bad["id"] = "bad"
    bad["target"]["repository"] = repository
    body["events"] = [bad, good]
    parsed = parse_registry_webhook(json.dumps(body).encode(), None, settings())
    # The bad item is dropped with its reason; the good one in the same batch still counts.
    assert parsed.triggers == [pushed(Source.DISTRIBUTION)]
    assert parsed.dropped[0].reason is DropReason.INVALID_NAME
    assert parsed.dropped[0].event_id == "bad"


@pytest.mark.parametrize(
    "body",
    [
        pytest.param(b"not json", id="not-json"),
        pytest.param(b"\xff\xfe", id="not-utf8"),
        pytest.param(b"[]", id="array"),
        pytest.param(b'{"hello": 1}', id="unknown-shape"),
        pytest.param(b'{"events": 3}', id="events-not-a-list"),
        pytest.param(b"[" * 100000, id="deep-nesting"),
    ],
)
def test_registry_malformed_raises_malformed_event(body: bytes) -> None:
    with pytest.raises(MalformedEvent):
        parse_registry_webhook(body, "application/json", settings())


def test_registry_structured_cloudevent_of_another_type_is_not_accepted() -> None:
    body = load_event("harbor_cloudevent_push")
    body["type"] = "harbor.artifact.pulled"
    parsed = parse_registry_webhook(json.dumps(body).encode(), None, settings())
    assert reasons(parsed) == [DropReason.NOT_ACCEPTED]


def test_audit_eventlist_maps_writes_to_sets_once_each() -> None:
    parsed = parse_audit_eventlist(event_bytes("audit_eventlist"), settings())
    assert parsed.triggers == [
        SetChanged(AGENT, "cocoonsets.patch", Source.K8S_AUDIT),
        # pod delete without the object in the event: the set comes from `<set>-<slot>`
        SetChanged(SetRef("team-a", "other"), "pods.delete", Source.K8S_AUDIT),
    ]
    assert reasons(parsed) == [
        DropReason.DUPLICATE,  # cocoonsets/status update of the same set
        DropReason.DUPLICATE,  # pod agent-0, labelled cocoonset.cocoonstack.io/name=agent
        DropReason.READ,
        DropReason.REQUEST_FAILED,
        DropReason.STAGE,
        DropReason.RESOURCE,
    ]
    assert parsed.triggers[0].event_id == "5d1f7c2a-8e3b-4b0f-9d6e-2a4c8b1e7f30"


def test_audit_reads_and_failures_produce_nothing() -> None:
    parsed = parse_audit_eventlist(event_bytes("audit_eventlist_reads"), settings())
    assert parsed.triggers == []
    assert reasons(parsed) == [DropReason.READ, DropReason.READ, DropReason.REQUEST_FAILED]


def test_audit_pod_without_the_set_label_is_not_a_cocoonset_pod() -> None:
    body = load_event("audit_eventlist")
    item = body["items"][2]
    del item["responseObject"]["metadata"]["labels"]
    body["items"] = [item]
    parsed = parse_audit_eventlist(json.dumps(body).encode(), settings())
    assert reasons(parsed) == [DropReason.NOT_COCOONSET_POD]


def test_audit_namespace_allowlist() -> None:
    only_b = replace(settings(), namespaces=frozenset({"team-b"}))
    parsed = parse_audit_eventlist(event_bytes("audit_eventlist"), only_b)
    assert parsed.triggers == []
    assert DropReason.NAMESPACE in reasons(parsed)


@pytest.mark.parametrize(
    ("field", "value"),
    [
        pytest.param("namespace", "../kube-system", id="ns-dot-dot"),
        pytest.param("namespace", "team-a%2Fx", id="ns-percent"),
        pytest.param("name", "agent\x00", id="name-nul"),
        pytest.param("name", "a" * 300, id="name-over-long"),
    ],
)
def test_audit_invalid_names_are_refused(field: str, value: str) -> None:
    body = load_event("audit_eventlist")
    body["items"] = [body["items"][0]]
    body["items"][0]["objectRef"][field] = value
    parsed = parse_audit_eventlist(json.dumps(body).encode(), settings())
    assert parsed.triggers == []
    assert reasons(parsed) == [DropReason.INVALID_NAME]


def test_audit_wrong_kind_is_malformed() -> None:
    with pytest.raises(MalformedEvent):
        parse_audit_eventlist(b'{"kind": "Pod", "items": []}', settings())


# --- CloudEvents ------------------------------------------------------------------

AR_HOST = "europe-west1-docker.pkg.dev"
AR_REPO = f"acme-prod/cocoon/{VM}"
AR_SETTINGS = settings(AR_HOST, "acme-prod/cocoon")

CE_CASES = [
    pytest.param(
        "ar_insert_hibernate",
        ACCEPT_RELEASE,
        [SnapshotPushed(AR_REPO, "hibernate", DIGEST, Source.ARTIFACT_REGISTRY, VM)],
        [],
        id="ar-insert",
    ),
    pytest.param("ar_insert_untagged", ACCEPT_RELEASE, [], [DropReason.UNTAGGED], id="ar-untagged"),
    pytest.param("ar_insert_latest", ACCEPT_RELEASE, [], [DropReason.TAG], id="ar-latest"),
    pytest.param("ar_delete_tag", ACCEPT_RELEASE, [], [DropReason.NOT_PUSH], id="ar-delete"),
    pytest.param(
        "ar_insert_hibernate", ACCEPT_SWEEP, [], [DropReason.NOT_ACCEPTED], id="ar-to-sweep"
    ),
    pytest.param(
        "gke_audit_cocoonset_patch",
        ACCEPT_RELEASE,
        [SetChanged(AGENT, "cocoonsets.patch", Source.GKE_AUDIT)],
        [],
        id="gke-cocoonset-patch",
    ),
    pytest.param(
        "gke_audit_pod_delete",
        ACCEPT_WAKE,
        [SetChanged(AGENT, "pods.delete", Source.GKE_AUDIT)],
        [],
        id="gke-pod-delete",
    ),
    pytest.param(
        "gke_audit_lease_update", ACCEPT_RELEASE, [], [DropReason.RESOURCE], id="gke-lease"
    ),
    pytest.param(
        "gke_audit_failed_patch", ACCEPT_RELEASE, [], [DropReason.REQUEST_FAILED], id="gke-failed"
    ),
    pytest.param(
        "knative_resource_pod_update",
        ACCEPT_RELEASE,
        [SetChanged(AGENT, "pods.update", Source.KNATIVE)],
        [],
        id="knative-resource-pod",
    ),
    pytest.param(
        "knative_ref_cocoonset_delete",
        ACCEPT_WAKE,
        [SetChanged(AGENT, "cocoonsets.delete", Source.KNATIVE)],
        [],
        id="knative-ref-set",
    ),
    pytest.param(
        "knative_resource_configmap_add",
        ACCEPT_RELEASE,
        [],
        [DropReason.RESOURCE],
        id="knative-configmap",
    ),
    pytest.param(
        "wake_requested",
        ACCEPT_WAKE,
        [WakeRequested(AGENT, Source.CANONICAL)],
        [],
        id="wake-canonical",
    ),
    pytest.param(
        "wake_pubsub", ACCEPT_WAKE, [WakeRequested(AGENT, Source.PUBSUB)], [], id="wake-pubsub"
    ),
    pytest.param(
        "wake_requested", ACCEPT_RELEASE, [], [DropReason.NOT_ACCEPTED], id="wake-to-release"
    ),
    pytest.param(
        "wake_pubsub", ACCEPT_SWEEP, [], [DropReason.NOT_ACCEPTED], id="wake-pubsub-to-sweep"
    ),
    pytest.param(
        "scheduler_pubsub", ACCEPT_SWEEP, [SweepTick(False, Source.SCHEDULER)], [], id="scheduler"
    ),
    pytest.param(
        "scheduler_pubsub_plain",
        ACCEPT_SWEEP,
        [SweepTick(False, Source.SCHEDULER)],
        [],
        id="scheduler-not-json",
    ),
    pytest.param(
        "scheduler_pubsub", ACCEPT_RELEASE, [], [DropReason.NOT_ACCEPTED], id="tick-to-release"
    ),
    pytest.param("knative_ping", ACCEPT_SWEEP, [SweepTick(True, Source.KNATIVE)], [], id="ping"),
    pytest.param(
        "sweep_requested", ACCEPT_SWEEP, [SweepTick(True, Source.CANONICAL)], [], id="sweep"
    ),
    pytest.param(
        "snapshot_pushed",
        ACCEPT_RELEASE,
        [pushed(Source.CANONICAL)],
        [],
        id="snapshot-pushed",
    ),
    pytest.param(
        "set_changed",
        ACCEPT_RELEASE,
        [SetChanged(AGENT, "cocoonset.changed", Source.CANONICAL)],
        [],
        id="set-changed",
    ),
    pytest.param(
        "harbor_cloudevent_push_ce",
        ACCEPT_RELEASE,
        [pushed(Source.HARBOR)],
        [],
        id="harbor-cloudevents",
    ),
]


def _ce(name: str) -> CloudEvent:
    if name == "harbor_cloudevent_push_ce":
        body = load_event("harbor_cloudevent_push")
        data = body.pop("data")
        return CloudEvent(body, data)
    return cloudevent(name)


@pytest.mark.parametrize(("fixture", "accept", "triggers", "dropped"), CE_CASES)
def test_cloudevent_decision(
    fixture: str,
    accept: frozenset[str],
    triggers: list[Any],
    dropped: list[DropReason],
) -> None:
    config = AR_SETTINGS if fixture.startswith("ar_") else settings()
    parsed = parse_cloudevent(_ce(fixture), settings=config, accept=accept)
    assert parsed.triggers == triggers
    assert reasons(parsed) == dropped


def test_cloudevent_event_id_is_the_pubsub_message_id() -> None:
    parsed = parse_cloudevent(_ce("ar_insert_hibernate"), settings=AR_SETTINGS, accept=None)
    assert [t.event_id for t in parsed] == ["12844560301874993"]


def test_gke_audit_event_id_is_the_kubernetes_audit_id() -> None:
    parsed = parse_cloudevent(_ce("gke_audit_cocoonset_patch"), settings=settings(), accept=None)
    assert parsed.event_id == "8d1f7c2a-8e3b-4b0f-9d6e-2a4c8b1e7f30"


def test_gke_audit_without_extensions_falls_back_to_proto_payload() -> None:
    fixture = load_event("gke_audit_pod_delete")
    attrs = {
        k: v
        for k, v in fixture["attributes"].items()
        if k not in ("servicename", "methodname", "resourcename")
    }
    parsed = parse_cloudevent(CloudEvent(attrs, fixture["data"]), settings=settings(), accept=None)
    assert parsed.triggers == [SetChanged(AGENT, "pods.delete", Source.GKE_AUDIT)]


def test_gke_audit_read_is_dropped() -> None:
    fixture = load_event("gke_audit_pod_delete")
    fixture["attributes"]["methodname"] = "io.k8s.core.v1.pods.get"
    parsed = parse_cloudevent(
        CloudEvent(fixture["attributes"], fixture["data"]), settings=settings()
    )
    assert reasons(parsed) == [DropReason.READ]


def test_artifact_registry_on_another_host_is_outside_the_base() -> None:
    parsed = parse_cloudevent(
        _ce("ar_insert_hibernate"), settings=settings("us-docker.pkg.dev", "acme-prod/cocoon")
    )
    assert reasons(parsed) == [DropReason.OUTSIDE_BASE]


def test_artifact_registry_host_with_a_port() -> None:
    message = {"action": "INSERT", "tag": f"127.0.0.1:5000/cocoon/{VM}:hibernate"}
    envelope = {"message": {"data": base64.b64encode(json.dumps(message).encode()).decode()}}
    parsed = parse_pubsub_push(json.dumps(envelope).encode(), settings())
    assert parsed.triggers == [
        SnapshotPushed(REPO, "hibernate", None, Source.ARTIFACT_REGISTRY, VM)
    ]


@pytest.mark.parametrize(
    ("ref", "sep", "expected"),
    [
        pytest.param("h.io/p/r:t", ":", ("h.io", "p/r", "t"), id="tag"),
        pytest.param("h.io:5000/p/r:t", ":", ("h.io:5000", "p/r", "t"), id="tag-port"),
        pytest.param(
            "h.io:5000/p/r@sha256:ab", "@", ("h.io:5000", "p/r", "sha256:ab"), id="digest"
        ),
    ],
)
def test_split_qualified(ref: str, sep: str, expected: tuple[str, str, str]) -> None:
    assert split_qualified(ref, sep) == expected


@pytest.mark.parametrize("ref", ["h.io:5000/p/r", "noslash:t", ":t", "h.io/p/r:"])
def test_split_qualified_refuses_references_without_a_tag_or_host(ref: str) -> None:
    with pytest.raises(MalformedEvent):
        split_qualified(ref, ":")


@pytest.mark.parametrize(
    ("method", "expected"),
    [
        pytest.param("io.k8s.core.v1.pods.patch", ("", "pods", None, "patch"), id="pod-patch"),
        pytest.param(
            "io.k8s.core.v1.pods.status.patch", ("", "pods", "status", "patch"), id="pod-status"
        ),
        pytest.param(
            "io.cocoonstack.cocoonset.v1.cocoonsets.update",
            ("cocoonset.cocoonstack.io", "cocoonsets", None, "update"),
            id="crd-reversed-group",
        ),
        pytest.param("io.k8s.apps.v1.deployments.patch", None, id="other-group"),
        pytest.param("io.k8s.core.pods.patch", None, id="no-version"),
    ],
)
def test_parse_gke_method(method: str, expected: object) -> None:
    assert parse_gke_method(method) == expected


def test_wake_with_invalid_name_raises_invalid_name() -> None:
    event = CloudEvent(
        {"type": "io.cocoonstack.cocoonset.wake.requested", "source": "/x"},
        {"namespace": "team-a", "name": "../agent"},
    )
    with pytest.raises(InvalidName):
        parse_cloudevent(event, settings=settings(), accept=ACCEPT_WAKE)


def test_sweep_dry_run_must_be_a_boolean() -> None:
    event = CloudEvent(
        {"type": "io.cocoonstack.sweep.requested", "source": "/x"}, {"dryRun": "yes"}
    )
    with pytest.raises(MalformedEvent):
        parse_cloudevent(event, settings=settings(), accept=ACCEPT_SWEEP)


def test_unknown_cloudevent_type_is_dropped_not_raised() -> None:
    event = CloudEvent({"type": "com.example.other", "source": "/x"}, {"a": 1})
    parsed = parse_cloudevent(event, settings=settings(), accept=None)
    assert reasons(parsed) == [DropReason.UNKNOWN_TYPE]


def test_pubsub_message_with_a_declared_type_attribute() -> None:
    data = base64.b64encode(b'{"namespace": "team-a", "name": "agent"}').decode()
    envelope = {
        "message": {
            "data": data,
            "attributes": {"type": "io.cocoonstack.cocoonset.changed"},
            "messageId": "1",
        }
    }
    parsed = parse_pubsub_push(json.dumps(envelope).encode(), settings())
    assert parsed.triggers == [SetChanged(AGENT, "cocoonset.changed", Source.CANONICAL)]


def test_pubsub_data_must_be_base64() -> None:
    with pytest.raises(MalformedEvent):
        parse_pubsub_push(b'{"message": {"data": "!!!"}}', settings())


def test_parsed_iterates_its_triggers() -> None:
    parsed = parse_cloudevent(_ce("wake_requested"), settings=settings())
    assert list(parsed) == [WakeRequested(AGENT, Source.CANONICAL)]
    assert len(parsed) == 1


@pytest.mark.parametrize(
    ("subresource", "verb", "expected"),
    [
        pytest.param("eviction", "create", "pods.eviction.create", id="eviction-counts"),
        pytest.param("status", "patch", "pods.status.patch", id="status-counts"),
        pytest.param("exec", "create", None, id="exec-ignored"),
        pytest.param("log", "get", None, id="log-read-ignored"),
    ],
)
def test_audit_pod_subresources(subresource: str, verb: str, expected: str | None) -> None:
    body = load_event("audit_eventlist")
    item = body["items"][3]  # pod other-1, no object in the event
    item["objectRef"]["subresource"] = subresource
    item["verb"] = verb
    body["items"] = [item]
    parsed = parse_audit_eventlist(json.dumps(body).encode(), settings())
    if expected is None:
        assert parsed.triggers == []
    else:
        assert parsed.triggers == [
            SetChanged(SetRef("team-a", "other"), expected, Source.K8S_AUDIT)
        ]


# --- Pub/Sub: what is a sweep tick ----------------------------------------------------


def _push(
    data: bytes | None, attributes: dict[str, str] | None = None, message_id: str = "7"
) -> bytes:
    message: dict[str, Any] = {"messageId": message_id, "attributes": attributes or {}}
    if data is not None:
        message["data"] = base64.b64encode(data).decode()
    return json.dumps({"message": message}).encode()


SCHEDULER = {"origin": "scheduler"}
TICK = [SweepTick(False, Source.SCHEDULER, event_id="7")]
DRY_TICK = [SweepTick(True, Source.SCHEDULER, event_id="7")]

PUBSUB_TICK_CASES = [
    # What the Terraform scheduler job sends (terraform/modules/cocoon-hibernation).
    pytest.param(b'{"dryRun": false}', None, TICK, id="terraform-job"),
    pytest.param(b'{"dryRun": true}', None, DRY_TICK, id="dry-run"),
    pytest.param(b'{"dry_run": true}', None, DRY_TICK, id="dry-run-snake"),
    pytest.param(b"{}", None, TICK, id="empty-object"),
    pytest.param(b"", SCHEDULER, TICK, id="attributes-only"),
    pytest.param(None, None, TICK, id="no-data"),
    pytest.param(b"tick", SCHEDULER, TICK, id="scheduler-attribute-plain-text"),
    # docs/design.md#scheduler-ticks: free-form data under origin=scheduler.
    pytest.param(
        b'{"task": "reconcile", "dry_run": true}', SCHEDULER, DRY_TICK, id="scheduler-free-form"
    ),
    pytest.param(
        b'{"anything": 1}',
        {"type": "io.cocoonstack.sweep.requested"},
        TICK,
        id="canonical-type-attribute",
    ),
    # Not recognisably a tick: dropped, never a full sweep.
    pytest.param(b'{"ns": "a", "set": "b"}', None, [], id="unknown-object"),
    pytest.param(b'{"dryRun": false, "extra": 1}', None, [], id="tick-plus-unknown-key"),
    pytest.param(b'{"task": "reconcile"}', {"origin": "portal"}, [], id="other-origin"),
    pytest.param(b"tick", None, [], id="plain-text-without-attribute"),
    pytest.param(b"[1, 2]", None, [], id="json-array"),
    pytest.param(b'"sweep"', None, [], id="json-string"),
]


@pytest.mark.parametrize(("data", "attributes", "triggers"), PUBSUB_TICK_CASES)
def test_pubsub_sweep_tick_only_when_recognisable(
    data: bytes | None, attributes: dict[str, str] | None, triggers: list[SweepTick]
) -> None:
    for accept in (None, ACCEPT_SWEEP, ACCEPT_PUBSUB_PUSH):
        parsed = parse_pubsub_push(_push(data, attributes), settings(), accept=accept)
        assert parsed.triggers == triggers, accept
        assert reasons(parsed) == ([] if triggers else [DropReason.MALFORMED])


def test_unrecognised_pubsub_drop_says_why_without_the_values() -> None:
    parsed = parse_pubsub_push(_push(b'{"ns": "a", "set": "secret-b"}'), settings())
    [drop] = parsed.dropped
    assert "ns, set" in drop.detail
    assert "secret-b" not in drop.detail


def test_unrecognised_pubsub_cloudevent_does_not_run_the_sweep() -> None:
    fixture = load_event("scheduler_pubsub")
    message = fixture["data"]["message"]
    message["attributes"] = {}
    message["data"] = base64.b64encode(b'{"ns": "a", "set": "b"}').decode()
    event = CloudEvent(fixture["attributes"], fixture["data"])
    parsed = parse_cloudevent(event, settings=settings(), accept=ACCEPT_SWEEP)
    assert parsed.triggers == []
    assert reasons(parsed) == [DropReason.MALFORMED]


PUSH_ROUTE_CASES = [
    pytest.param(
        b'{"namespace": "team-a", "name": "agent"}',
        None,
        [WakeRequested(AGENT, Source.PUBSUB, event_id="7")],
        [],
        id="wake",
    ),
    pytest.param(b'{"dryRun": false}', None, TICK, [], id="tick"),
    pytest.param(
        json.dumps({"action": "INSERT", "tag": f"127.0.0.1:5000/{REPO}:hibernate"}).encode(),
        None,
        [],
        [DropReason.NOT_ACCEPTED],
        id="artifact-registry",
    ),
    pytest.param(
        json.dumps({"protoPayload": {"methodName": "x"}}).encode(),
        None,
        [],
        [DropReason.NOT_ACCEPTED],
        id="audit-log-sink",
    ),
    pytest.param(
        b'{"namespace": "team-a", "name": "agent"}',
        {"type": "io.cocoonstack.cocoonset.changed"},
        [],
        [DropReason.NOT_ACCEPTED],
        id="set-changed",
    ),
]


@pytest.mark.parametrize(("data", "attributes", "triggers", "dropped"), PUSH_ROUTE_CASES)
def test_pubsub_push_route_takes_wake_requests_and_ticks_only(
    data: bytes,
    attributes: dict[str, str] | None,
    triggers: list[Any],
    dropped: list[DropReason],
) -> None:
    parsed = parse_pubsub_push(_push(data, attributes), settings(), accept=ACCEPT_PUBSUB_PUSH)
    assert parsed.triggers == triggers
    assert reasons(parsed) == dropped


def test_audit_eventlist_as_a_real_kube_apiserver_sends_it() -> None:
    # Recorded from kube-apiserver v1.34 with infra/k8s/audit/policy.yaml (Metadata level:
    # no objects in the events) by tests/e2e/test_real_cluster.py: a set patch, its status
    # patch, then vk-cocoon's pod status and pod patches.
    parsed = parse_audit_eventlist(event_bytes("audit_eventlist_real_kube_apiserver"), settings())
    assert parsed.triggers == [SetChanged(AGENT, "cocoonsets.patch", Source.K8S_AUDIT)]
    # The same set three more times (status, and its pod by the `<set>-<slot>` name).
    assert reasons(parsed) == [DropReason.DUPLICATE] * 3
    assert parsed.triggers[0].event_id == "d4a44fda-b09c-4daa-99ad-bea195e9a977"
