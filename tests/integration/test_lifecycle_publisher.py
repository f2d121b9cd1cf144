"""The real `PublisherClient`, over real gRPC, against a local fake Publisher service.

What is faked and why: the Pub/Sub service. Its emulator needs the gcloud SDK
and Java, and there is no network, so this file serves
`google.pubsub.v1.Publisher/Publish` itself on 127.0.0.1 (a generic gRPC
handler using the library's own request/response message types) and records
what arrives. Everything on our side is real: `shared.clients.pubsub` builds
its default client (ordering enabled) and reaches the server through the
library's documented offline mode (`PUBSUB_EMULATOR_HOST`: anonymous
credentials, insecure channel), batching, the ordering sequencer, the gRPC
transport and the library's exception types.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from concurrent import futures
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import grpc
import pytest
from google.pubsub_v1 import types as pubsub_types

from shared import lifecycle
from shared.clients import pubsub
from shared.clients.pubsub import PubSubPublisher
from shared.errors import ConfigError, TransientError
from tests.fixtures.cocoon_objects import make_set

TOPIC = "projects/acme/topics/cocoon-lifecycle"

OK = "ok"
HANG = "hang"


@dataclass
class FakePublisherService:
    """Answers Publish from a script: `OK`, `HANG` (until released) or a gRPC status code."""

    received: list[Any] = field(default_factory=list)
    script: list[Any] = field(default_factory=list)
    release: threading.Event = field(default_factory=threading.Event)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def publish(self, request: Any, context: grpc.ServicerContext) -> Any:
        with self.lock:
            self.received.append(request)
            n = len(self.received)
            outcome = self.script.pop(0) if self.script else OK
        if outcome == HANG:
            self.release.wait(timeout=30)
            outcome = OK
        if isinstance(outcome, grpc.StatusCode):
            context.abort(outcome, f"scripted {outcome.name}")
        return pubsub_types.PublishResponse(
            message_ids=[f"m-{n}-{i}" for i in range(len(request.messages))]
        )

    def messages(self) -> list[Any]:
        return [m for r in self.received for m in r.messages]


@pytest.fixture
def service(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakePublisherService]:
    fake = FakePublisherService()
    handler = grpc.method_handlers_generic_handler(
        "google.pubsub.v1.Publisher",
        {
            "Publish": grpc.unary_unary_rpc_method_handler(
                fake.publish,
                request_deserializer=pubsub_types.PublishRequest.deserialize,
                response_serializer=pubsub_types.PublishResponse.serialize,
            )
        },
    )
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
    server.add_generic_rpc_handlers((handler,))
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    monkeypatch.setenv("PUBSUB_EMULATOR_HOST", f"127.0.0.1:{port}")
    try:
        yield fake
    finally:
        fake.release.set()
        server.stop(grace=None)


@pytest.fixture
def publisher(service: FakePublisherService) -> Iterator[PubSubPublisher]:
    p = PubSubPublisher(TOPIC, timeout=2.0)  # the default library client, as deployed
    try:
        yield p
    finally:
        p.close()


def event(namespace: str = "team-a", name: str = "agent", rv: str = "10") -> Any:
    cs = make_set(namespace=namespace, name=name, resource_version=rv, hint="node-7")
    return lifecycle.waking(cs, hint="node-7", now=datetime(2026, 3, 1, tzinfo=UTC))


def test_a_lifecycle_event_arrives_as_published(
    service: FakePublisherService, publisher: PubSubPublisher
) -> None:
    ev = event()

    assert lifecycle.emit(publisher, ev) is True

    [request] = service.received
    assert request.topic == TOPIC
    [message] = request.messages
    sent = ev.message()
    assert message.data == sent.data
    assert message.ordering_key == "team-a/agent"
    assert dict(message.attributes) == dict(sent.attributes)


def test_one_sets_events_keep_their_order(
    service: FakePublisherService, publisher: PubSubPublisher
) -> None:
    events = [event(rv=str(rv)) for rv in range(10, 15)]

    for ev in events:
        assert lifecycle.emit(publisher, ev) is True

    assert [m.data for m in service.messages()] == [ev.message().data for ev in events]
    assert {m.ordering_key for m in service.messages()} == {"team-a/agent"}


def test_a_failure_pauses_nothing_for_the_next_event(
    service: FakePublisherService, publisher: PubSubPublisher
) -> None:
    # After an error the library pauses the ordering key and refuses every later
    # publish on it; the wrapper resumes it, so the set's next event goes out.
    service.script = [grpc.StatusCode.UNAVAILABLE]

    with pytest.raises(TransientError, match="ServiceUnavailable"):
        publisher.publish(b"{}", ordering_key="team-a/agent", attributes={})
    assert publisher.publish(b"{}", ordering_key="team-a/agent", attributes={}) == "m-2-0"

    # One attempt each: the library's retry (unbounded for ordered publishes) is off.
    assert len(service.received) == 2


@pytest.mark.parametrize(
    ("code", "expected"),
    [
        (grpc.StatusCode.NOT_FOUND, ConfigError),
        (grpc.StatusCode.PERMISSION_DENIED, ConfigError),
        (grpc.StatusCode.UNAVAILABLE, TransientError),
        (grpc.StatusCode.RESOURCE_EXHAUSTED, TransientError),
    ],
    ids=["topic-not-found", "permission-denied", "unavailable", "resource-exhausted"],
)
def test_service_errors_are_project_errors(
    service: FakePublisherService,
    publisher: PubSubPublisher,
    code: grpc.StatusCode,
    expected: type[Exception],
) -> None:
    service.script = [code]

    with pytest.raises(expected):
        publisher.publish(b"{}", ordering_key="team-a/agent", attributes={})


def test_an_unanswered_publish_gives_up_after_the_timeout(service: FakePublisherService) -> None:
    service.script = [HANG]
    publisher = PubSubPublisher(TOPIC, timeout=0.3)
    try:
        with pytest.raises(TransientError):
            publisher.publish(b"{}", ordering_key="team-a/agent", attributes={})
        service.release.set()
        # The key was resumed: the set's next event is not refused.
        assert publisher.publish(b"{}", ordering_key="team-a/agent", attributes={})
    finally:
        publisher.close()


def test_the_process_publisher_is_reset_cleanly(service: FakePublisherService) -> None:
    p = pubsub.get_publisher(TOPIC)
    assert p.publish(b"{}", ordering_key="a/b", attributes={}) == "m-1-0"
    pubsub.reset_clients()
    assert pubsub.get_publisher(TOPIC) is not p
    pubsub.reset_clients()
