"""Google-signed OIDC tokens of a Pub/Sub push subscription: `verify_push_token` checks
signature, expiry, audience and issuer; `require_caller` authorises (any Google account can
mint a token for a URL, so only a verified, allowlisted email passes)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from shared.errors import CocoonError, TransientError

GOOGLE_ISSUERS = frozenset({"accounts.google.com", "https://accounts.google.com"})


class TokenRejected(CocoonError):
    """The bearer token is not a valid Google-signed token for our audience (answer 401)."""


class _Transport:
    """One `google.auth` HTTP transport per instance (it holds a `requests` session)."""

    request: Any = None


def verify_push_token(
    token: str, *, audience: str, certs: Mapping[str, str] | None = None
) -> Mapping[str, Any]:
    """The token's claims if it is valid for `audience`; else `TokenRejected` (TransientError
    when Google's certificates cannot be fetched). `certs` (key id -> PEM): offline tests."""
    if not audience:
        # google-auth skips the audience check for audience=None: never allow that.
        raise TokenRejected("no audience configured for push-token verification")
    from google.auth import exceptions as gexc  # noqa: PLC0415 - lazy: cold start

    try:
        if certs is not None:
            from google.auth import jwt  # noqa: PLC0415 - lazy: cold start

            # google-auth leaves decode/verify_oauth2_token unannotated.
            claims: Mapping[str, Any] = jwt.decode(  # type: ignore[no-untyped-call]
                token, certs=dict(certs), audience=audience
            )
        else:
            from google.auth.transport import requests as gar  # noqa: PLC0415 - lazy: cold start
            from google.oauth2 import id_token  # noqa: PLC0415 - lazy: cold start

            if _Transport.request is None:
                _Transport.request = gar.Request()
            claims = id_token.verify_oauth2_token(  # type: ignore[no-untyped-call]
                token, _Transport.request, audience=audience
            )
    except gexc.TransportError as err:
        raise TransientError(f"could not fetch Google's token certificates: {err}") from err
    except (ValueError, gexc.GoogleAuthError) as err:
        raise TokenRejected(f"push token rejected: {type(err).__name__}") from err
    if claims.get("iss") not in GOOGLE_ISSUERS:
        raise TokenRejected("push token rejected: not issued by Google")
    return claims


def require_caller(claims: Mapping[str, Any], allowed: frozenset[str]) -> str:
    """The caller's email if the claims name a verified (JSON `true`, as Google signs it),
    allowlisted one; else `TokenRejected`, never quoting the caller's claimed email."""
    if claims.get("email_verified") is not True:
        raise TokenRejected("push token rejected: email not verified")
    email = claims.get("email")
    if not isinstance(email, str) or email.lower() not in allowed:
        raise TokenRejected("push token rejected: caller not in COCOON_PUSH_SERVICE_ACCOUNTS")
    return email
