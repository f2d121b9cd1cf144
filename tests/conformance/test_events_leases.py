"""Core and events.k8s.io Events (one storage, two shapes) and coordination Leases."""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Any

from kubernetes import client

from tests.conformance.helpers import expect_error


def _now() -> dt.datetime:
    # Non-zero microseconds: the official client re-serialises an eventTime string through
    # datetime.isoformat(), which drops a zero fraction, and a MicroTime without its six
    # digits is a 400 on a real server.
    return dt.datetime.now(dt.UTC).replace(microsecond=123456)


def test_core_event_is_visible_through_events_k8s_io_with_renamed_fields(
    k8s_api: client.ApiClient,
) -> None:
    core = client.CoreV1Api(k8s_api)
    core.create_namespaced_event(
        "default",
        {
            "metadata": {"name": "x.1"},
            "eventTime": _now().isoformat(),
            "involvedObject": {"kind": "CocoonSet", "name": "x", "namespace": "default"},
            "reason": "Hibernated",
            "message": "snapshot pushed",
            "type": "Normal",
            "source": {"component": "cocoon-hibernation"},
            "reportingComponent": "cocoon-hibernation",
            "reportingInstance": "fn-1",
            "action": "Hibernate",
            "count": 1,
        },
    )
    ev = client.EventsV1Api(k8s_api).read_namespaced_event("x.1", "default")
    assert ev.regarding.name == "x"
    assert ev.note == "snapshot pushed"
    assert ev.reason == "Hibernated"
    assert ev.deprecated_count == 1
    assert ev.deprecated_source.component == "cocoon-hibernation"


def test_events_v1_event_is_visible_through_core_api(k8s_api: client.ApiClient) -> None:
    client.EventsV1Api(k8s_api).create_namespaced_event(
        "default",
        {
            "metadata": {"name": "y.1"},
            "eventTime": _now().isoformat(),
            "reportingController": "cocoonstack.io/hibernation",
            "reportingInstance": "fn-1",
            "action": "Release",
            "reason": "Released",
            "type": "Normal",
            "note": "seat freed",
            "regarding": {"kind": "CocoonSet", "name": "y", "namespace": "default"},
        },
    )
    core_events = client.CoreV1Api(k8s_api).list_namespaced_event(
        "default", field_selector="involvedObject.name=y"
    )
    assert [(e.reason, e.message, e.reporting_component) for e in core_events.items] == [
        ("Released", "seat freed", "cocoonstack.io/hibernation")
    ]


def test_events_v1_requires_event_time_and_reporting_fields(k8s_api: client.ApiClient) -> None:
    st = expect_error(
        422,
        client.EventsV1Api(k8s_api).create_namespaced_event,
        "default",
        {
            "metadata": {"name": "bad"},
            "eventTime": _now().isoformat(),
            "reason": "R",
            "type": "Normal",
            "regarding": {"kind": "Pod", "name": "p"},
        },
    )
    fields = {c["field"] for c in st["details"]["causes"]}
    assert {"reportingController", "reportingInstance", "action"} <= fields


def test_lease_acquire_and_renew_with_optimistic_concurrency(k8s_api: client.ApiClient) -> None:
    coord = client.CoordinationV1Api(k8s_api)
    lease = coord.create_namespaced_lease(
        "default",
        {
            "metadata": {"name": "sweep"},
            "spec": {"holderIdentity": "a", "leaseDurationSeconds": 15},
        },
    )
    lease.spec.holder_identity = "b"
    renewed = coord.replace_namespaced_lease("sweep", "default", lease)
    assert renewed.spec.holder_identity == "b"
    lease.spec.holder_identity = "c"  # still carries the old resourceVersion
    st = expect_error(409, coord.replace_namespaced_lease, "sweep", "default", lease)
    assert st["message"].startswith(
        'Operation cannot be fulfilled on leases.coordination.k8s.io "sweep"'
    )


def test_core_event_involved_object_namespace_must_match_422(k8s_api: client.ApiClient) -> None:
    st = expect_error(
        422,
        client.CoreV1Api(k8s_api).create_namespaced_event,
        "default",
        {
            "metadata": {"name": "x.2"},
            "involvedObject": {"kind": "Pod", "name": "p", "namespace": "elsewhere"},
            "reason": "R",
            "message": "m",
        },
    )
    assert st["message"] == (
        'Event "x.2" is invalid: involvedObject.namespace: Invalid value: "elsewhere": '
        "does not match event.namespace"
    )


def test_event_time_without_microseconds_is_400(kube: Any, kubeconfig: Path) -> None:
    # Sent as raw JSON (the official client would reformat it).
    import json
    import urllib.request

    import yaml

    cfg = yaml.safe_load(kubeconfig.read_text())
    server = cfg["clusters"][0]["cluster"]
    ctx = None
    if server.get("certificate-authority-data"):
        import base64
        import ssl

        ctx = ssl.create_default_context(
            cadata=base64.b64decode(server["certificate-authority-data"]).decode()
        )
    body = {
        "metadata": {"name": "t.1"},
        "eventTime": "2026-01-02T03:04:05Z",
        "reportingController": "c/h",
        "reportingInstance": "fn",
        "action": "A",
        "reason": "R",
        "type": "Normal",
        "regarding": {"kind": "Pod", "name": "p", "namespace": "default"},
    }
    req = urllib.request.Request(
        server["server"] + "/apis/events.k8s.io/v1/namespaces/default/events",
        data=json.dumps(body).encode(),
        method="POST",
        headers={
            "Content-Type": "application/json",
            "Authorization": f"Bearer {cfg['users'][0]['user']['token']}",
        },
    )
    try:
        urllib.request.urlopen(req, context=ctx)
    except urllib.error.HTTPError as e:
        st = json.loads(e.read())
        assert e.code == 400 and st["reason"] == "BadRequest"
        assert 'parsing time "2026-01-02T03:04:05Z"' in st["message"]
    else:
        raise AssertionError("an eventTime without microseconds must be refused")


def test_core_event_with_event_time_must_name_its_reporter(k8s_api: client.ApiClient) -> None:
    st = expect_error(
        422,
        client.CoreV1Api(k8s_api).create_namespaced_event,
        "default",
        {
            "metadata": {"name": "x.3"},
            "eventTime": _now().isoformat(),
            "involvedObject": {"kind": "Pod", "name": "p", "namespace": "default"},
            "reason": "R",
        },
    )
    assert {c["field"] for c in st["details"]["causes"]} == {
        "reportingComponent",
        "reportingInstance",
        "action",
    }
