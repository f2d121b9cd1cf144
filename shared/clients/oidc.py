"""Google-signed OIDC tokens of a Pub/Sub push subscription (docs/design.md#pubsub-push).

A push subscription with `oidc_token` puts `Authorization: Bearer <JWT>` on
every delivery: signed by Google, `iss` accounts.google.com, `aud` the
configured audience (`COCOON_PUSH_AUDIENCE`). This module checks signature,
expiry, audience and issuer, and translates google-auth's exceptions into
ours. Those checks prove only that Google signed a token for a URL anyone can
guess: any Google account can mint one. `require_caller` is the check that
authorises, the verified `email` of one of `COCOON_PUSH_SERVICE_ACCOUNTS`;
the caller (`functions.ingest`) applies it after every verification.
`google.auth` is imported on first use only: most deployments never verify a
push token, and cold start pays for every import.
"""

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
    """The token's claims if it is valid for `audience`; else `TokenRejected`.

    `certs` (key id -> PEM certificate) replaces Google's published
    certificates: tests sign tokens with a locally generated key and pass its
    certificate here, so the real verification code runs without the network.
    A failure to fetch Google's certificates is a `TransientError` (retry).
    """
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
    """The caller's email if the claims name a verified, allowlisted one; else `TokenRejected`.

    `email_verified` must be the JSON boolean true (Google sends a boolean; a
    string "true" is not what Google signs). The rejection message never quotes
    the email: it is the caller's claim, not ours to log.
    """
    if claims.get("email_verified") is not True:
        raise TokenRejected("push token rejected: email not verified")
    email = claims.get("email")
    if not isinstance(email, str) or email.lower() not in allowed:
        raise TokenRejected("push token rejected: caller not in COCOON_PUSH_SERVICE_ACCOUNTS")
    return email
