"""Typed errors: whether to acknowledge or retry is a type, decided once.

Nothing above a client wrapper sees a library's exception: the wrappers
translate `kubernetes`, `requests`, `botocore` and `google.api_core` errors
into these (with `raise ... from`).
"""

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
    """The deployment is misconfigured (a missing variable, a 401 from the registry).

    Reported loudly and treated as retryable by the targets: a fix to the
    configuration should let the redelivered event succeed.
    """


class AccessDenied(ConfigError):
    """403 from the API server's authorizer (RBAC): the identity lacks `verb` on
    `resource` in `namespace` — a missing RoleBinding, say. A configuration error:
    logged loudly and retried, so the redelivery succeeds once the binding is applied."""

    def __init__(self, message: str, *, verb: str, resource: str, namespace: str) -> None:
        super().__init__(message)
        self.verb = verb
        self.resource = resource
        self.namespace = namespace


class AdmissionDenied(PermanentError):
    """403 from an admission plugin (ResourceQuota, PodSecurity, a missing
    ServiceAccount, a terminating namespace): the write was authorised and refused on
    its merits. Redelivery within minutes will not change that: acknowledge, tell the
    set's owner (a Warning Event with the server's message), leave it to the sweep."""

    def __init__(self, message: str, *, server_message: str) -> None:
        super().__init__(message)
        self.server_message = server_message


class WebhookDenied(AdmissionDenied):
    """An admission webhook refused the write (`admission webhook "<name>" denied the
    request: ...`; 400 when the webhook sets no code, as cocoon-webhook does). Permanent
    like the plugins' refusals: what changes it is the webhook's configuration (its
    `POD_CREATORS`) or the object, so the wake acknowledges with one Warning naming
    `webhook`, `user` and `fix`, and the sweep tries again at its own pace."""

    def __init__(
        self, message: str, *, server_message: str, webhook: str, user: str, fix: str
    ) -> None:
        super().__init__(message, server_message=server_message)
        self.webhook = webhook
        self.user = user
        self.fix = fix


class CrdNotInstalled(ConfigError):
    """404 on a CocoonSet path where the server does not serve the type at all (no
    object named): the CRD is not installed. A configuration error, never read as
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
    """The API server returned an object the models reject (e.g. written under
    another CRD version): redelivering cannot make it readable."""
