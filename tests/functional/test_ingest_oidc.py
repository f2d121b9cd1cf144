"""Google OIDC tokens on `POST /pubsub` (a Pub/Sub push subscription with `oidc_token`).

The verification is the real `shared.clients.oidc.verify_push_token` ->
`google.auth.jwt.decode`; the only stand-in is where the certificates come
from: Google's published certificates need the network, so the tokens here
are signed with an RSA key generated for the test and its certificate is
passed in as `certs`.
"""

from __future__ import annotations

import base64
import json
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from cryptography.x509.oid import NameOID
from google.auth import crypt, jwt

from functions import ingest, process
from shared.clients import oidc
from shared.config import Settings
from shared.errors import ConfigError
from shared.names import SetRef
from shared.triggers import Source, WakeRequested
from tests.fixtures.ingest import WAKE_TOKEN, Recorder, auth

AUDIENCE = "https://ingest-abc123-ew.a.run.app/pubsub"
KID = "test-key-1"
PUSH_SA = "pubsub-push@acme-prod.iam.gserviceaccount.com"


def _key_and_cert() -> tuple[bytes, bytes]:
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "test-signer")])
    now = datetime.now(UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - timedelta(days=1))
        .not_valid_after(now + timedelta(days=1))
        .sign(key, hashes.SHA256())
    )
    pem_key = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )
    return pem_key, cert.public_bytes(serialization.Encoding.PEM)


KEY, CERT = _key_and_cert()
OTHER_KEY, _ = _key_and_cert()
CERTS = {KID: CERT.decode()}


def token(key: bytes = KEY, **overrides: Any) -> str:
    now = int(time.time())
    claims = {
        "iss": "https://accounts.google.com",
        "aud": AUDIENCE,
        "email": PUSH_SA,
        "email_verified": True,
        "iat": now,
        "exp": now + 600,
        "sub": "1234567890",
        **overrides,
    }
    signer = crypt.RSASigner.from_string(key, KID)
    return jwt.encode(signer, claims).decode()


def _wake_push() -> bytes:
    data = base64.b64encode(json.dumps({"namespace": "team-a", "name": "agent"}).encode())
    return json.dumps({"message": {"data": data.decode(), "messageId": "9"}}).encode()


@pytest.fixture
def oidc_client(client: Any, monkeypatch: pytest.MonkeyPatch) -> Any:
    monkeypatch.setenv("COCOON_PUSH_AUDIENCE", AUDIENCE)
    monkeypatch.setenv(
        "COCOON_PUSH_SERVICE_ACCOUNTS", f"relay@acme-prod.iam.gserviceaccount.com, {PUSH_SA}"
    )
    process.reset()
    monkeypatch.setattr(
        ingest,
        "verify_push_token",
        lambda t, a: oidc.verify_push_token(t, audience=a, certs=CERTS),
    )
    return client


@pytest.mark.parametrize(
    ("make_token", "status"),
    [
        pytest.param(token, 202, id="valid"),
        pytest.param(lambda: token(iss="accounts.google.com"), 202, id="valid-short-issuer"),
        pytest.param(lambda: token(aud="https://elsewhere.example/"), 401, id="wrong-audience"),
        pytest.param(lambda: token(iss="https://evil.example"), 401, id="wrong-issuer"),
        pytest.param(
            lambda: token(iat=int(time.time()) - 7200, exp=int(time.time()) - 3600),
            401,
            id="expired",
        ),
        pytest.param(lambda: token(OTHER_KEY), 401, id="other-signer"),
        pytest.param(lambda: "not.a.jwt", 401, id="garbage"),
        # Google signs a valid token for our audience for any account: only the
        # allowlist (COCOON_PUSH_SERVICE_ACCOUNTS) makes it an authorised caller.
        pytest.param(lambda: token(email="mallory@gmail.com"), 401, id="any-google-account"),
        pytest.param(
            lambda: token(email="other@acme-prod.iam.gserviceaccount.com"),
            401,
            id="other-service-account",
        ),
        pytest.param(lambda: token(email=PUSH_SA.upper()), 202, id="allowlisted-any-case"),
        pytest.param(lambda: token(email_verified=False), 401, id="email-unverified"),
        pytest.param(lambda: token(email_verified="true"), 401, id="email-verified-not-a-boolean"),
        pytest.param(lambda: token(email_verified=None), 401, id="email-verified-absent"),
        pytest.param(lambda: token(email=None), 401, id="no-email"),
    ],
)
def test_pubsub_push_oidc(
    oidc_client: Any,
    recorder: Recorder,
    capsys: pytest.CaptureFixture[str],
    make_token: Callable[[], str],
    status: int,
) -> None:
    # Minted now, not at collection: a valid token lives 600 s, less than a slow suite.
    jwt_token = make_token()
    response = oidc_client.post("/pubsub", data=_wake_push(), headers=auth(jwt_token))
    assert response.status_code == status
    if status == 202:
        assert recorder.triggers == [WakeRequested(SetRef("team-a", "agent"), Source.PUBSUB)]
    else:
        assert recorder.calls == []
        assert response.headers["WWW-Authenticate"] == "Bearer"
    logs = capsys.readouterr().out
    assert jwt_token not in logs
    assert "mallory" not in logs


@pytest.mark.parametrize(
    ("env", "variable"),
    [
        pytest.param(
            {"COCOON_PUSH_AUDIENCE": AUDIENCE}, "COCOON_PUSH_SERVICE_ACCOUNTS", id="audience-alone"
        ),
        pytest.param(
            {"COCOON_PUSH_SERVICE_ACCOUNTS": PUSH_SA}, "COCOON_PUSH_AUDIENCE", id="accounts-alone"
        ),
        pytest.param(
            {"COCOON_PUSH_AUDIENCE": AUDIENCE, "COCOON_PUSH_SERVICE_ACCOUNTS": "me@gmail.com"},
            "COCOON_PUSH_SERVICE_ACCOUNTS",
            id="a-person-not-a-service-account",
        ),
        pytest.param(
            {"COCOON_PUSH_AUDIENCE": AUDIENCE, "COCOON_PUSH_SERVICE_ACCOUNTS": " , "},
            "COCOON_PUSH_SERVICE_ACCOUNTS",
            id="only-separators",
        ),
    ],
)
def test_push_settings_are_refused_naming_the_variable(env: dict[str, str], variable: str) -> None:
    with pytest.raises(ConfigError, match=variable):
        Settings.from_env(env)


def test_push_settings_parse_the_allowlist() -> None:
    settings = Settings.from_env(
        {
            "COCOON_PUSH_AUDIENCE": AUDIENCE,
            "COCOON_PUSH_SERVICE_ACCOUNTS": f" {PUSH_SA.upper()} ,relay@p.iam.gserviceaccount.com,",
        }
    )
    assert settings.push_service_accounts == {PUSH_SA, "relay@p.iam.gserviceaccount.com"}


def test_audience_without_an_allowlist_refuses_every_request(
    client: Any, recorder: Recorder, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COCOON_PUSH_AUDIENCE", AUDIENCE)
    process.reset()
    response = client.post("/pubsub", data=_wake_push(), headers=auth())
    assert response.status_code == 500
    assert recorder.calls == []


def test_oidc_is_only_for_the_pubsub_route(oidc_client: Any, recorder: Recorder) -> None:
    response = oidc_client.post("/registry", data=b"{}", headers=auth(token()))
    assert response.status_code == 401
    assert recorder.calls == []


def test_without_an_audience_a_google_token_is_not_enough(client: Any, recorder: Recorder) -> None:
    response = client.post("/pubsub", data=_wake_push(), headers=auth(token()))
    assert response.status_code == 401
    assert recorder.calls == []


def test_the_wake_token_still_works_on_pubsub(oidc_client: Any, recorder: Recorder) -> None:
    response = oidc_client.post("/pubsub", data=_wake_push(), headers=auth(WAKE_TOKEN))
    assert response.status_code == 202
    assert len(recorder.calls) == 1


def test_the_registry_token_cannot_wake_over_pubsub(oidc_client: Any, recorder: Recorder) -> None:
    # Whoever reads the registry's config holds this token: pushes, nothing else.
    response = oidc_client.post("/pubsub", data=_wake_push(), headers=auth())
    assert response.status_code == 401
    assert recorder.calls == []


def test_certificate_fetch_failure_asks_for_redelivery(
    oidc_client: Any, recorder: Recorder, monkeypatch: pytest.MonkeyPatch
) -> None:
    from shared.errors import TransientError

    def unreachable(t: str, a: str) -> Any:
        raise TransientError("could not fetch Google's token certificates")

    monkeypatch.setattr(ingest, "verify_push_token", unreachable)
    response = oidc_client.post("/pubsub", data=_wake_push(), headers=auth(token()))
    assert response.status_code == 503
    assert recorder.calls == []


def test_an_empty_audience_is_never_verified() -> None:
    # google-auth skips the audience check for audience=None; we refuse instead.
    with pytest.raises(oidc.TokenRejected):
        oidc.verify_push_token(token(), audience="", certs=CERTS)
