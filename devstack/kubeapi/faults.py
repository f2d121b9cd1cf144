"""Injected faults: make chosen requests fail the ways a real apiserver (or the
network in front of it) fails: 5xx/429 answers with a Status body and
Retry-After, added latency, or a connection cut with no response at all.

A rule matches a method (None: any) and a regex searched in the path; it fires
for its next `times` matches (None: unlimited), each with `probability`.
"""

from __future__ import annotations

import random
import re
import threading
from dataclasses import dataclass, field
from typing import Any

from devstack.kubeapi.errors import ApiError

_REASONS = {
    400: "BadRequest",
    401: "Unauthorized",
    403: "Forbidden",
    404: "NotFound",
    409: "Conflict",
    410: "Expired",
    422: "Invalid",
    429: "TooManyRequests",
    500: "InternalError",
    503: "ServiceUnavailable",
    504: "Timeout",
}


class _Unset:
    pass


UNSET: Any = _Unset()


@dataclass(slots=True)
class Fault:
    method: str | None
    path: re.Pattern[str]
    status: int | None
    times: int | None
    probability: float | None
    retry_after: int | None
    latency_ms: float | None
    cut: bool
    fired: int = 0
    id: int = 0

    def describe(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "method": self.method,
            "path": self.path.pattern,
            "status": self.status,
            "times": self.times,
            "probability": self.probability,
            "retry_after": self.retry_after,
            "latency_ms": self.latency_ms,
            "cut": self.cut,
            "fired": self.fired,
        }


@dataclass(slots=True)
class Decision:
    latency_ms: float = 0.0
    cut: bool = False
    error: ApiError | None = None


def fault_error(status: int, retry_after: int | None) -> ApiError:
    reason = _REASONS.get(status, "InternalError")
    if status == 429:
        message = "Too many requests, please try again later."
    elif status == 503:
        message = "the server is currently unable to handle the request"
    elif status == 504:
        message = (
            "the server was unable to return a response in the time allotted, "
            "but may still be processing the request"
        )
    else:
        message = "Internal error occurred: injected fault"
    err = ApiError(status, reason, message, retry_after=retry_after)
    if retry_after is not None:
        err.headers["Retry-After"] = str(retry_after)
    return err


@dataclass
class Faults:
    _rules: list[Fault] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _next_id: int = 1

    def add(
        self,
        *,
        method: str | None = "PATCH",
        path: str = ".*",
        status: Any = UNSET,
        times: int | None = 1,
        probability: float | None = None,
        retry_after: int | None = None,
        latency_ms: float | None = None,
        cut: bool = False,
    ) -> Fault:
        # Latency alone (no status given) delays the request and then serves it.
        if isinstance(status, _Unset):
            status = None if (latency_ms and not cut) else 500
        rule = Fault(
            method=method.upper() if method else None,
            path=re.compile(path),
            status=int(status) if status is not None else None,
            times=times,
            probability=probability,
            retry_after=retry_after,
            latency_ms=latency_ms,
            cut=cut,
        )
        with self._lock:
            rule.id = self._next_id
            self._next_id += 1
            self._rules.append(rule)
        return rule

    def clear(self) -> None:
        with self._lock:
            self._rules.clear()

    def list(self) -> list[dict[str, Any]]:
        with self._lock:
            return [r.describe() for r in self._rules]

    def decide(self, method: str, path: str) -> Decision | None:
        with self._lock:
            for rule in self._rules:
                if rule.method and rule.method != method:
                    continue
                if not rule.path.search(path):
                    continue
                if rule.times is not None and rule.fired >= rule.times:
                    continue
                if rule.probability is not None and random.random() >= rule.probability:  # noqa: S311
                    continue
                rule.fired += 1
                d = Decision(latency_ms=rule.latency_ms or 0.0, cut=rule.cut)
                if rule.status is not None and not rule.cut:
                    d.error = fault_error(rule.status, rule.retry_after)
                return d
        return None
