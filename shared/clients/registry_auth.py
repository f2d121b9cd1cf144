"""Pure pieces of the Docker token flow (the challenge, the realm check, a token answer's
token and expiry), shared by the registry client and the local stack's `push_image`."""

from __future__ import annotations

import re
import urllib.parse
from dataclasses import dataclass, field

from shared.durations import parse_rfc3339

# Docker's token spec: a missing or too-small `expires_in` means 60 seconds.
DEFAULT_TOKEN_TTL = 60.0
# Refresh a little early, so a token never expires between our check and the registry's.
EXPIRY_MARGIN = 5.0

_SCHEME = re.compile(r"\s*([A-Za-z][A-Za-z0-9!#$%&'*+.^_`|~-]*)")
_PARAM = re.compile(r"\s*([A-Za-z0-9_-]+)\s*=\s*(\"(?:[^\"\\]|\\.)*\"|[^,\s]*)\s*,?")


@dataclass(frozen=True, slots=True)
class Challenge:
    """One parsed `WWW-Authenticate` challenge (the first, when a header holds several)."""

    scheme: str  # lower-cased: "bearer", "basic"
    params: dict[str, str] = field(default_factory=dict)

    @property
    def realm(self) -> str | None:
        return self.params.get("realm")

    @property
    def service(self) -> str | None:
        return self.params.get("service")

    @property
    def scope(self) -> str | None:
        return self.params.get("scope")


def realm_allowed(realm: str, registry_host: str, allowed: frozenset[str]) -> bool:
    """Whether a challenge's realm may receive our credentials: the registry's own host (any
    port) or one listed in `allowed`, since whoever answers for the registry names the realm."""
    parts = urllib.parse.urlsplit(realm)
    host, netloc = parts.hostname, parts.netloc.rpartition("@")[2].lower()  # hostname: lower case
    own = urllib.parse.urlsplit(f"//{registry_host}").hostname
    return bool(host) and (host == own or host in allowed or netloc in allowed)


def parse_challenge(header: str | None) -> Challenge | None:
    """Parse `WWW-Authenticate`; None when the header is absent or unparseable."""
    m = _SCHEME.match(header or "")
    if not m:
        return None
    scheme = m.group(1).lower()
    rest = m.string[m.end() :]
    params: dict[str, str] = {}
    pos = 0
    while pos < len(rest):
        pm = _PARAM.match(rest, pos)
        if not pm or pm.end() == pos:
            break
        key, raw = pm.group(1).lower(), pm.group(2)
        if raw.startswith('"') and raw.endswith('"') and len(raw) >= 2:
            raw = re.sub(r"\\(.)", r"\1", raw[1:-1])
        params.setdefault(key, raw)
        pos = pm.end()
    return Challenge(scheme=scheme, params=params)


def token_expiry(body: dict[str, object], *, now: float) -> float:
    """When a token answer stops being usable (Unix time, minus the margin, at least a
    second from `now`), from `issued_at` when it is sane, else from our clock."""
    raw_ttl = body.get("expires_in")
    ttl = DEFAULT_TOKEN_TTL
    if isinstance(raw_ttl, int | float) and not isinstance(raw_ttl, bool) and raw_ttl > 0:
        ttl = float(raw_ttl)
    issued = body.get("issued_at")
    try:
        at = parse_rfc3339(issued).timestamp() if isinstance(issued, str) else now
    except ValueError:
        at = now
    # A token server with a skewed clock must not make us cache a dead token or
    # one from the future: only trust issued_at when it is close to our clock.
    start = min(at, now) if abs(at - now) < ttl else now
    return max(start + ttl - EXPIRY_MARGIN, now + 1.0)


def token_of(body: dict[str, object]) -> str | None:
    """The bearer token of a token answer (`token`, or OAuth2's `access_token`)."""
    for key in ("token", "access_token"):
        value = body.get(key)
        if isinstance(value, str) and value:
            return value
    return None
