"""The Pub/Sub wrapper (`shared.clients.pubsub`) at its library boundary.

What is faked and why: Pub/Sub itself cannot run here (the emulator needs the
gcloud SDK and Java, and there is no network), so these tests inject a fake
`PublisherClient` through the wrapper's constructor and check what the wrapper
asks of the library (topic, ordering key, attributes, no library retry, a
bounded timeout) and how it turns the library's real exception types into this
project's. `tests/integration/test_lifecycle_publisher.py` drives the real
`PublisherClient` over gRPC against a local fake Publisher service.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from google.api_core import exceptions as api
from google.auth import exceptions as auth
from google.cloud.pubsub_v1.publisher import exceptions as pub

from shared.clients import pubsub
from shared.clients.pubsub import PubSubPublisher
from shared.errors import CocoonError, ConfigError, PermanentError, TransientError

TOPIC = "projects/acme/topics/cocoon-lifecycle"
KEY = "team-a/agent"
ATTRS = {"Content-Type": "application/cloudevents+json; charset=utf-8", "ce-type": "t"}
REPO = Path(__file__).resolve().parents[3]


class FakeFuture:
    def __init__(self, result: str | None = None, error: BaseException | None = None) -> None:
        self._result = result
        self._error = error
        self.waited_with: list[float | None] = []

    def result(self, timeout: float | None = None) -> str:
        self.waited_with.append(timeout)
        if self._error is not None:
            raise self._error
        assert self._result is not None
        return self._result


class FakeLibraryClient:
    """Mirrors `PublisherClient.publish(topic, data, ordering_key, retry, timeout, **attrs)`."""

    def __init__(self, *outcomes: FakeFuture | BaseException) -> None:
        self.outcomes = list(outcomes)
        self.calls: list[dict[str, Any]] = []
        self.resumed: list[tuple[str, str]] = []

    def publish(
        self,
        topic: str,
        data: bytes,
        ordering_key: str = "",
        retry: Any = "DEFAULT",
        timeout: Any = "DEFAULT",
        **attrs: str,
    ) -> FakeFuture:
        self.calls.append(
            {
                "topic": topic,
                "data": data,
                "ordering_key": ordering_key,
                "retry": retry,
                "timeout": timeout,
                "attrs": attrs,
            }
        )
        outcome = self.outcomes.pop(0) if self.outcomes else FakeFuture("1")
        if isinstance(outcome, BaseException):
            raise outcome
        return outcome

    def resume_publish(self, topic: str, ordering_key: str) -> None:
        self.resumed.append((topic, ordering_key))


def test_publish_sends_the_message_as_given_and_returns_the_server_id() -> None:
    future = FakeFuture("m-42")
    client = FakeLibraryClient(future)
    publisher = PubSubPublisher(TOPIC, client=client, timeout=3.0)

    assert publisher.publish(b'{"x":1}', ordering_key=KEY, attributes=ATTRS) == "m-42"

    [call] = client.calls
    assert call["topic"] == TOPIC
    assert call["data"] == b'{"x":1}'
    assert call["ordering_key"] == KEY
    assert call["attrs"] == ATTRS
    # The library's ordered-publish retry has an unbounded deadline: turned off.
    assert call["retry"] is None
    assert call["timeout"] == 3.0
    # The wait is bounded too (never fire-and-forget, never forever).
    assert future.waited_with and future.waited_with[0] is not None
    assert client.resumed == []


def test_an_unacknowledged_publish_times_out_and_resumes_the_key() -> None:
    client = FakeLibraryClient(FakeFuture(error=TimeoutError()))
    publisher = PubSubPublisher(TOPIC, client=client)

    with pytest.raises(TransientError, match="no acknowledgement"):
        publisher.publish(b"{}", ordering_key=KEY, attributes={})

    assert client.resumed == [(TOPIC, KEY)]


@pytest.mark.parametrize(
    ("error", "expected"),
    [
        (api.ServiceUnavailable("down"), TransientError),
        (api.DeadlineExceeded("slow"), TransientError),
        (api.InternalServerError("oops"), TransientError),
        (api.NotFound("Resource not found (resource=cocoon-lifecycle)."), ConfigError),
        (api.PermissionDenied("User not authorized to perform this action."), ConfigError),
        (api.Unauthenticated("no token"), ConfigError),
        (api.InvalidArgument("bad attribute"), PermanentError),
        (pub.PublishToPausedOrderingKeyException(KEY), TransientError),
        (pub.FlowControlLimitError("full"), TransientError),
        (auth.RefreshError("token refresh failed"), TransientError),
        (RuntimeError("Cannot publish on a stopped publisher."), TransientError),
    ],
    ids=[
        "unavailable",
        "deadline",
        "internal",
        "topic-not-found",
        "permission-denied",
        "unauthenticated",
        "invalid-argument",
        "paused-key",
        "flow-control",
        "refresh",
        "stopped",
    ],
)
def test_a_failed_publish_becomes_a_project_error_and_resumes_the_key(
    error: BaseException, expected: type[CocoonError]
) -> None:
    client = FakeLibraryClient(FakeFuture(error=error))
    publisher = PubSubPublisher(TOPIC, client=client)

    with pytest.raises(CocoonError) as info:
        publisher.publish(b"{}", ordering_key=KEY, attributes={})

    assert type(info.value) is expected
    assert info.value.__cause__ is error
    assert client.resumed == [(TOPIC, KEY)]


def test_an_error_raised_by_publish_itself_is_translated_too() -> None:
    too_big = pub.MessageTooLargeError("The message being published would produce too large")
    client = FakeLibraryClient(too_big)
    publisher = PubSubPublisher(TOPIC, client=client)

    with pytest.raises(PermanentError):
        publisher.publish(b"x" * 10, ordering_key=KEY, attributes={})
    assert client.resumed == [(TOPIC, KEY)]


def test_missing_credentials_are_a_configuration_error() -> None:
    def no_adc() -> Any:
        raise auth.DefaultCredentialsError("Your default credentials were not found.")

    publisher = PubSubPublisher(TOPIC, client_factory=no_adc)

    with pytest.raises(ConfigError, match="credentials"):
        publisher.publish(b"{}", ordering_key=KEY, attributes={})


def test_the_library_client_is_built_once_on_first_publish() -> None:
    built: list[FakeLibraryClient] = []

    def factory() -> FakeLibraryClient:
        built.append(FakeLibraryClient())
        return built[-1]

    publisher = PubSubPublisher(TOPIC, client_factory=factory)
    assert built == [] and not publisher.library_loaded

    publisher.publish(b"{}", ordering_key=KEY, attributes={})
    publisher.publish(b"{}", ordering_key=KEY, attributes={})

    assert len(built) == 1
    assert len(built[0].calls) == 2


def test_the_default_library_client_orders_messages(monkeypatch: pytest.MonkeyPatch) -> None:
    # The library's own offline mode (what its emulator support uses): anonymous
    # credentials, an insecure channel to the given host. Nothing is sent here.
    monkeypatch.setenv("PUBSUB_EMULATOR_HOST", "127.0.0.1:9")
    client = pubsub._library_client()
    try:
        assert client.publisher_options.enable_message_ordering is True
    finally:
        client.stop()


def test_get_publisher_is_once_per_topic() -> None:
    try:
        a = pubsub.get_publisher(TOPIC)
        assert pubsub.get_publisher(TOPIC) is a
        assert pubsub.get_publisher(TOPIC + "-2") is not a
    finally:
        pubsub.reset_clients()


COLD = r"""
import json, sys
from shared.config import Settings
from shared.lifecycle import FROM_SETTINGS, resolve_publisher
publisher = resolve_publisher(FROM_SETTINGS, Settings(events_topic="projects/p/topics/t"))
print(json.dumps({
    "built": type(publisher).__name__,
    "loaded": sorted(m for m in sys.modules if m.startswith(("google.cloud.pubsub", "grpc"))),
}))
"""


def test_a_publisher_that_has_not_published_has_not_imported_the_library() -> None:
    out = subprocess.run(
        [sys.executable, "-c", COLD],
        capture_output=True,
        text=True,
        check=True,
        cwd=REPO,
        timeout=60,
    )
    assert json.loads(out.stdout.strip().splitlines()[-1]) == {
        "built": "PubSubPublisher",
        "loaded": [],
    }
