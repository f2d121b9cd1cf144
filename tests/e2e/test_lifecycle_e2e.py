"""Lifecycle CloudEvents (docs/design.md#lifecycle) end to end: release, wake, sweep flows through
functions-framework, the embedded Kubernetes API and a real Distribution registry,
with `COCOON_EVENTS_TOPIC` set.

What is faked and why: Pub/Sub. Its emulator needs the gcloud SDK and Java and
there is no network, so the library's `PublisherClient` is replaced by a
recording fake at the wrapper's library boundary (`shared.clients.pubsub`
builds it through `_library_client`, which these tests swap). Everything above
it is the product's code: the executor and sweep hook points, the event
builders, `PubSubPublisher` (ordering key, attributes, wait, resume on error).
The real client over gRPC is covered in `tests/integration/test_lifecycle_publisher.py`.
"""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

import pytest
from google.api_core import exceptions as api

from functions.sweep import run_sweep
from shared import constants as k
from shared.clients import pubsub
from tests.e2e.test_release_e2e import (
    gone_or_terminating,
    hibernated_main,
    pushed_event,
    suspended_set,
)
from tests.e2e.test_sweep_e2e import idle_ann, later, running_set, vk_cocoon_hibernates
from tests.e2e.test_wake_e2e import changed_event, post, released_set, report_live, wake_event
from tests.fixtures.cocoon_objects import NS, SET, VM0
from tests.fixtures.reconcile_world import World

pytestmark = pytest.mark.e2e

TOPIC = "projects/acme/topics/cocoon-lifecycle"
KEY = f"{NS}/{SET}"
TYPE = "io.cocoonstack.hibernation."


class Future:
    def __init__(self, message_id: str, error: BaseException | None) -> None:
        self.message_id = message_id
        self.error = error

    def result(self, timeout: float | None = None) -> str:
        assert timeout is not None, "the wrapper must bound its wait"
        if self.error is not None:
            raise self.error
        return self.message_id


class RecordingPublisherClient:
    """Stands in for `pubsub_v1.PublisherClient`: records messages, answers at once."""

    def __init__(self, error: BaseException | None = None) -> None:
        self.error = error
        self.messages: list[dict[str, Any]] = []
        self.resumed: list[tuple[str, str]] = []

    def publish(
        self,
        topic: str,
        data: bytes,
        ordering_key: str = "",
        retry: Any = None,
        timeout: Any = None,
        **attrs: str,
    ) -> Future:
        self.messages.append(
            {
                "topic": topic,
                "ordering_key": ordering_key,
                "attrs": attrs,
                "event": json.loads(data),
            }
        )
        return Future(str(len(self.messages)), self.error)

    def resume_publish(self, topic: str, ordering_key: str) -> None:
        self.resumed.append((topic, ordering_key))

    def stop(self) -> None:
        pass

    def events(self) -> list[dict[str, Any]]:
        return [m["event"] for m in self.messages]

    def kinds(self) -> list[str]:
        return [e["type"].removeprefix(TYPE) for e in self.events()]


class Library:
    """The swapped `_library_client`: counts how often a client was built."""

    def __init__(self, client: RecordingPublisherClient) -> None:
        self.client = client
        self.built = 0

    def __call__(self) -> RecordingPublisherClient:
        self.built += 1
        return self.client


@pytest.fixture
def library(monkeypatch: pytest.MonkeyPatch) -> Library:
    lib = Library(RecordingPublisherClient())
    monkeypatch.setattr(pubsub, "_library_client", lib)
    return lib


@pytest.fixture
def topic(monkeypatch: pytest.MonkeyPatch, function_app: Any) -> str:
    """`COCOON_EVENTS_TOPIC` set for the function (settings are read on the first request)."""
    monkeypatch.setenv("COCOON_EVENTS_TOPIC", TOPIC)
    return TOPIC


def log_records(out: str) -> list[dict[str, Any]]:
    records = []
    for line in out.splitlines():
        try:
            rec = json.loads(line)
        except ValueError:
            continue
        if isinstance(rec, dict):
            records.append(rec)
    return records


def released_world(world: World) -> None:
    cs = suspended_set(world)
    hibernated_main(world, cs, node="node-7")
    world.push_snapshot(VM0)


# --- release ------------------------------------------------------------------------


def test_a_release_publishes_one_released_event(
    world: World, function_app: Any, topic: str, library: Library
) -> None:
    released_world(world)
    release = function_app("release")

    assert post(release, pushed_event(world)).status_code == 200
    assert post(release, pushed_event(world)).status_code == 200  # a redelivery

    client = library.client
    assert client.kinds() == ["released"]
    [message] = client.messages
    assert message["topic"] == TOPIC
    assert message["ordering_key"] == KEY
    event = message["event"]
    cs = world.get_set(NS, SET)
    # The release round's durable identity: the set's generation at the stash.
    assert event["id"] == f"released:{cs['metadata']['uid']}:g{cs['metadata']['generation']}"
    assert event["subject"] == KEY
    assert event["source"] == f"//cocoon-hibernation/namespaces/{NS}/cocoonsets/{SET}"
    assert event["data"] == {
        "namespace": NS,
        "name": SET,
        "uid": cs["metadata"]["uid"],
        "deletedPods": [f"{SET}-0"],
        "hintNode": "node-7",
    }
    assert message["attrs"]["ce-type"] == f"{TYPE}released"
    assert message["attrs"]["Content-Type"].startswith("application/cloudevents+json")
    # It went out beside the Kubernetes Event it mirrors.
    assert [e.reason for e in world.events(NS)] == [k.REASON_SEAT_RELEASED]


def test_an_event_that_publishes_nothing_loads_no_pubsub_client(
    world: World, function_app: Any, topic: str, library: Library
) -> None:
    cs = suspended_set(world)
    hibernated_main(world, cs)  # hibernated, but no snapshot in the registry yet: keep waiting

    # The announced tag is not served yet: "retry" (see test_release_e2e), publishing nothing.
    assert post(function_app("release"), pushed_event(world)).status_code == 500

    assert library.built == 0
    assert library.client.messages == []


def test_without_a_topic_nothing_is_published(
    world: World, function_app: Any, library: Library
) -> None:
    released_world(world)

    assert post(function_app("release"), pushed_event(world)).status_code == 200

    assert world.get_set(NS, SET)["status"]["phase"] == "Suspended"
    assert library.built == 0
    assert library.client.messages == []


def test_a_failing_publish_keeps_the_report_owed_until_a_redelivery_sends_it(
    world: World,
    function_app: Any,
    topic: str,
    library: Library,
    capsys: pytest.CaptureFixture[str],
) -> None:
    library.client.error = api.ServiceUnavailable("Pub/Sub is down")
    released_world(world)
    release = function_app("release")

    # The seat is freed (the actions never wait on Pub/Sub), but `released` is
    # owed: the answer is a retry, not an acknowledgement that would lose it.
    assert post(release, pushed_event(world)).status_code == 500
    assert world.get_set(NS, SET)["status"]["phase"] == "Suspended"
    assert gone_or_terminating(world)
    assert library.client.resumed == [(TOPIC, KEY)]
    records = log_records(capsys.readouterr().out)
    [failed] = [r for r in records if r.get("message") == "trigger failed; redelivery expected"]
    assert "not published" in failed["reason"]

    library.client.error = None
    assert post(release, pushed_event(world)).status_code == 200  # the platform's redelivery

    ids = [e["id"] for e in library.client.events()]
    assert len(ids) == 2 and ids[0] == ids[1]  # the same occurrence, dedupable by id
    assert [e.reason for e in world.events(NS)] == [k.REASON_SEAT_RELEASED]
    assert post(release, pushed_event(world)).status_code == 200
    assert len(library.client.events()) == 2  # reported: nothing more goes out


# --- wake ---------------------------------------------------------------------------


def test_a_wake_publishes_waking_then_woken(
    world: World, function_app: Any, topic: str, library: Library
) -> None:
    released_set(world)
    wake = function_app("wake")

    assert post(wake, wake_event()).status_code == 200
    assert library.client.kinds() == ["waking"]
    report_live(world, node="node-a")
    assert post(wake, changed_event()).status_code == 200
    assert post(wake, changed_event()).status_code == 200  # nothing new: nothing published

    client = library.client
    assert client.kinds() == ["waking", "woken"]
    assert {m["ordering_key"] for m in client.messages} == {KEY}
    waking, woken = client.events()
    uid = world.get_set(NS, SET)["metadata"]["uid"]
    assert waking["id"].startswith(f"waking:{uid}:")
    assert waking["data"]["hintNode"] == "node-a"
    assert woken["data"]["placement"] == k.PLACEMENT_HINT_NODE
    assert woken["data"]["node"] == "node-a"
    assert woken["id"] != waking["id"]


def test_repeated_wake_requests_publish_one_waking(
    world: World, function_app: Any, topic: str, library: Library
) -> None:
    released_set(world)
    wake = function_app("wake")

    for _ in range(3):
        assert post(wake, wake_event()).status_code == 200

    assert library.client.kinds() == ["waking"]


def test_no_capacity_is_published_once_per_situation(
    world: World, function_app: Any, topic: str, library: Library
) -> None:
    released_set(world)
    wake = function_app("wake")
    assert post(wake, wake_event()).status_code == 200
    message = "0/3 nodes are available: 3 Insufficient cpu."
    world.pod_status(
        NS,
        f"{SET}-0",
        {
            "phase": "Pending",
            "conditions": [
                {
                    "type": "PodScheduled",
                    "status": "False",
                    "reason": "Unschedulable",
                    "message": message,
                }
            ],
        },
    )

    for _ in range(3):
        assert post(wake, changed_event()).status_code == 200

    assert library.client.kinds() == ["waking", "wake-no-capacity"]
    no_capacity = library.client.events()[1]
    assert no_capacity["data"]["message"] == message
    assert no_capacity["data"]["pod"] == f"{SET}-0"


# --- sweep --------------------------------------------------------------------------


def test_an_idle_suspend_then_its_release_are_published_in_order(world: World) -> None:
    # The sweep takes its publisher as a parameter, like its kube and registry clients.
    client = RecordingPublisherClient()
    publisher = pubsub.PubSubPublisher(TOPIC, client=client)
    running_set(world, **idle_ann("30m"))
    now = later(hours=3)
    settings = replace(world.settings, events_topic=TOPIC)

    def sweep() -> None:
        run_sweep(
            settings=settings,
            dry_run=False,
            kube=world.client,
            registry=world.snapshots,
            now=now,
            publisher=publisher,
        )

    sweep()
    vk_cocoon_hibernates(world)
    sweep()

    assert client.kinds() == ["idle-suspended", "released"]
    assert {m["ordering_key"] for m in client.messages} == {KEY}
    idle = client.events()[0]["data"]
    assert idle["idleTimeoutSeconds"] == 1800
    assert idle["idleSeconds"] >= 3 * 3600 - 60


def test_a_dry_run_sweep_publishes_nothing(world: World) -> None:
    client = RecordingPublisherClient()
    running_set(world, **idle_ann("30m"))

    run_sweep(
        settings=replace(world.settings, events_topic=TOPIC),
        dry_run=True,
        kube=world.client,
        registry=world.snapshots,
        now=later(hours=3),
        publisher=pubsub.PubSubPublisher(TOPIC, client=client),
    )

    assert client.messages == []
