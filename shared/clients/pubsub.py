"""The Pub/Sub publisher of the lifecycle CloudEvents (ordered). Each publish waits, bounded,
for its acknowledgement (a returned instance may be frozen), with the library's retry off
(unbounded for ordered publishes); a failed key is resumed."""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from typing import Any, Final

from shared import log
from shared.clients.cache import ProcessCache
from shared.errors import CocoonError, ConfigError, PermanentError, TransientError

# Bounds the RPC and (with a margin for the batch's commit) the wait for its acknowledgement.
PUBLISH_TIMEOUT: Final = 5.0
_WAIT_MARGIN: Final = 1.0


def _library_client() -> Any:
    """`pubsub_v1.PublisherClient` with ordering enabled (credentials: application default)."""
    from google.cloud import pubsub_v1  # noqa: PLC0415 - lazy: cold start

    return pubsub_v1.PublisherClient(
        publisher_options=pubsub_v1.types.PublisherOptions(enable_message_ordering=True)
    )


def _exceptions() -> tuple[Any, Any, Any]:
    from google.api_core import exceptions as api  # noqa: PLC0415
    from google.auth import exceptions as auth  # noqa: PLC0415
    from google.cloud.pubsub_v1.publisher import exceptions as pub  # noqa: PLC0415

    return api, auth, pub


def _library_errors() -> tuple[type[BaseException], ...]:
    api, auth, pub = _exceptions()
    return (
        api.GoogleAPIError,
        auth.GoogleAuthError,
        pub.PublishToPausedOrderingKeyException,
        pub.FlowControlLimitError,
        pub.MessageTooLargeError,
        TimeoutError,  # the future's wait (concurrent.futures.TimeoutError is this on 3.11)
        RuntimeError,  # the client was stopped
    )


def translate(err: BaseException, topic: str) -> CocoonError:
    """A library exception as this project's error type (the caller raises it `from err`)."""
    api, auth, pub = _exceptions()
    what = f"publish to {topic}"
    if isinstance(err, TimeoutError):
        return TransientError(f"{what}: no acknowledgement within the timeout")
    if isinstance(err, api.NotFound):
        return ConfigError(f"{what}: the topic does not exist (COCOON_EVENTS_TOPIC)")
    if isinstance(err, api.Unauthorized | api.Forbidden):
        return ConfigError(f"{what}: not allowed ({err.message})")
    if isinstance(err, auth.DefaultCredentialsError):
        return ConfigError(f"{what}: no application default credentials ({err})")
    if isinstance(err, pub.MessageTooLargeError | api.BadRequest):
        return PermanentError(f"{what}: the message was refused ({err})")
    if isinstance(err, pub.PublishToPausedOrderingKeyException):
        return TransientError(f"{what}: the ordering key was paused by an earlier failure")
    return TransientError(f"{what}: {type(err).__name__}: {err}")


class PubSubPublisher:
    """Publishes to one topic, one per process (:func:`get_publisher`); `client` or
    `client_factory` (called on the first publish) replace the library client in tests."""

    def __init__(
        self,
        topic: str,
        *,
        client: Any = None,
        client_factory: Callable[[], Any] | None = None,
        timeout: float = PUBLISH_TIMEOUT,
    ) -> None:
        self.topic = topic
        self.timeout = timeout
        self._client = client
        self._factory = client_factory
        self._lock = threading.Lock()

    @property
    def library_loaded(self) -> bool:
        return self._client is not None

    def publish(self, data: bytes, *, ordering_key: str, attributes: Mapping[str, str]) -> str:
        """Publish one message and wait for its acknowledgement; return the server's id."""
        errors = _library_errors()
        client: Any = None  # built (or taken) under the lock below
        try:
            with self._lock:
                if self._client is None:
                    # Looked up at call time: the default stays replaceable until first use.
                    self._client = (self._factory or _library_client)()
                client = self._client
            future = client.publish(
                self.topic,
                data,
                ordering_key=ordering_key,
                retry=None,
                timeout=self.timeout,
                **dict(attributes),
            )
            message_id = future.result(timeout=self.timeout + _WAIT_MARGIN)
        except errors as err:
            try:
                if client is not None and ordering_key:  # a failed key stays paused until resumed
                    client.resume_publish(self.topic, ordering_key)
            except (ValueError, RuntimeError) as resume_err:
                # Nothing to resume (a key never published) or a stopped client.
                log.debug("resume_publish failed", topic=self.topic, error=str(resume_err))
            raise translate(err, self.topic) from err
        return str(message_id)

    def close(self) -> None:
        """Flush and stop the library client, when one was built."""
        with self._lock:
            client, self._client = self._client, None
        if client is None:
            return
        try:
            client.stop()
        except _library_errors() as err:
            log.debug("stopping the Pub/Sub client failed", topic=self.topic, error=str(err))


# The process's publisher per topic, reused by warm invocations; reset stops them (tests).
_publishers: ProcessCache[str, PubSubPublisher] = ProcessCache(
    PubSubPublisher, close=PubSubPublisher.close
)
get_publisher = _publishers.get
reset_clients = _publishers.reset
