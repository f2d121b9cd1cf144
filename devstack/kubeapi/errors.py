"""Kubernetes `Status` failures, shaped exactly as kube-apiserver writes them.

Clients (the official Python client, kubectl, client-go) parse `reason`,
`code`, `details.kind` and `details.causes`; the message texts follow
k8s.io/apimachinery/pkg/api/errors so that log lines and assertions written
against a real cluster read the same here.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True, slots=True)
class Cause:
    reason: str
    message: str
    field: str = ""

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"reason": self.reason, "message": self.message}
        if self.field:
            out["field"] = self.field
        return out


@dataclass(slots=True)
class ApiError(Exception):
    """A failure answer: `code` is the HTTP status, the rest is the Status body."""

    code: int
    reason: str
    message: str
    name: str = ""
    group: str = ""
    kind: str = ""
    causes: list[Cause] = field(default_factory=list)
    retry_after: int | None = None
    headers: dict[str, str] = field(default_factory=dict)
    # NewGenericServerResponse always sends a (possibly empty) `details` object.
    empty_details: bool = False

    def __str__(self) -> str:
        return f"{self.code} {self.reason}: {self.message}"

    def status(self) -> dict[str, Any]:
        details: dict[str, Any] = {}
        if self.name:
            details["name"] = self.name
        if self.group:
            details["group"] = self.group
        if self.kind:
            details["kind"] = self.kind
        if self.causes:
            details["causes"] = [c.to_dict() for c in self.causes]
        if self.retry_after is not None:
            details["retryAfterSeconds"] = self.retry_after
        out: dict[str, Any] = {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
            "reason": self.reason,
            "code": self.code,
        }
        if details or self.empty_details:
            out["details"] = details
        return out


def qualified(resource: str, group: str) -> str:
    """`pods` for the core group, `cocoonsets.cocoonset.cocoonstack.io` otherwise."""
    return f"{resource}.{group}" if group else resource


def not_found(resource: str, group: str, name: str) -> ApiError:
    return ApiError(
        404,
        "NotFound",
        f'{qualified(resource, group)} "{name}" not found',
        name=name,
        group=group,
        kind=resource,
    )


def already_exists(resource: str, group: str, name: str) -> ApiError:
    return ApiError(
        409,
        "AlreadyExists",
        f'{qualified(resource, group)} "{name}" already exists',
        name=name,
        group=group,
        kind=resource,
    )


def conflict(resource: str, group: str, name: str, detail: str) -> ApiError:
    return ApiError(
        409,
        "Conflict",
        f'Operation cannot be fulfilled on {qualified(resource, group)} "{name}": {detail}',
        name=name,
        group=group,
        kind=resource,
    )


MODIFIED = (
    "the object has been modified; please apply your changes to the latest version and try again"
)


def stale(resource: str, group: str, name: str) -> ApiError:
    return conflict(resource, group, name, MODIFIED)


def invalid(kind: str, group: str, name: str, causes: list[Cause]) -> ApiError:
    """422 Invalid: `Kind.group "name" is invalid: field: detail` (a list when several)."""
    parts = [f"{c.field}: {c.message}" if c.field else c.message for c in causes]
    summary = parts[0] if len(parts) == 1 else "[" + ", ".join(parts) + "]"
    qkind = f"{kind}.{group}" if group else kind
    return ApiError(
        422,
        "Invalid",
        f'{qkind} "{name}" is invalid: {summary}',
        name=name,
        group=group,
        kind=kind,
        causes=causes,
    )


def bad_request(message: str) -> ApiError:
    return ApiError(400, "BadRequest", message)


def method_not_allowed(verb: str = "") -> ApiError:
    return ApiError(
        405, "MethodNotAllowed", "the server does not allow this method on the requested resource"
    )


def unsupported_media_type(content_type: str, accepted: list[str]) -> ApiError:
    return ApiError(
        415,
        "UnsupportedMediaType",
        f"the body of the request was in an unknown format - accepted media types include: "
        f"{', '.join(accepted)}",
    )


def gone(message: str) -> ApiError:
    return ApiError(410, "Expired", message)


def unprocessable(message: str) -> ApiError:
    """apimachinery's NewGenericServerResponse(422): how a failed JSON patch is reported.

    A real kube-apiserver sends only the generic message and `"details": {}`: `message`
    (what failed) is kept for the emulator's own debugging, not sent."""
    del message
    return ApiError(
        422,
        "Invalid",
        "the server rejected our request due to an error in our request",
        empty_details=True,
    )


def internal(message: str) -> ApiError:
    return ApiError(500, "InternalError", f"Internal error occurred: {message}")
