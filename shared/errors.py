"""Typed errors: whether to acknowledge or retry is a type, decided once. Client wrappers
translate library errors into these (`raise ... from`); nothing above them sees a library's."""

from __future__ import annotations


class CocoonError(Exception):
    """Base of every error this project raises on purpose."""


class PermanentError(CocoonError):
    """Redelivering the same input cannot help: acknowledge and log."""


class TransientError(CocoonError):
    """A retry may succeed: fail the invocation so the platform redelivers."""


class InvalidName(PermanentError, ValueError):
    """A namespace, name, repository, tag or digest failed validation."""


class MalformedEvent(PermanentError):
    """An event body that cannot be parsed into a trigger."""


class ConfigError(CocoonError):
    """The deployment is misconfigured (a missing variable, a 401 from the registry):
    reported loudly and retried, so a fixed configuration lets the redelivery succeed."""


class AccessDenied(ConfigError):
    """403 from the API server's authorizer (RBAC): the identity lacks `verb` on `resource`
    in `namespace`; retried, so the redelivery succeeds once the binding is applied."""

    def __init__(self, message: str, *, verb: str, resource: str, namespace: str) -> None:
        super().__init__(message)
        self.verb = verb
        self.resource = resource
        self.namespace = namespace


class AdmissionDenied(PermanentError):
    """403 from an admission plugin (ResourceQuota, PodSecurity, ...): refused on its merits,
    so acknowledged, told to the set's owner in a Warning Event, and left to the sweep."""

    def __init__(self, message: str, *, server_message: str) -> None:
        super().__init__(message)
        self.server_message = server_message


class WebhookDenied(AdmissionDenied):
    """An admission webhook refused the write (400 when it sets no code, as cocoon-webhook
    does); permanent like the plugins', told in one Warning naming `webhook`, `user`, `fix`."""

    def __init__(
        self, message: str, *, server_message: str, webhook: str, user: str, fix: str
    ) -> None:
        super().__init__(message, server_message=server_message)
        self.webhook = webhook
        self.user = user
        self.fix = fix


class CrdNotInstalled(ConfigError):
    """404 because the server does not serve the CocoonSet type at all: never read as
    "this set does not exist"."""


class NotFound(PermanentError):
    pass


class Conflict(TransientError):
    """409: a compare-and-swap lost, or the object already exists."""


class AlreadyExists(Conflict):
    pass


class Invalid(PermanentError):
    """422 from the API server."""


class RegistryError(TransientError):
    """The registry answered 5xx, timed out, or could not be reached."""


class RegistryAuthError(ConfigError):
    """401/403 from the registry: never read as 'absent'."""


class UnreadableObject(PermanentError):
    """The API server returned an object the models reject (another CRD version, say)."""
