"""WWW-Authenticate challenge parsing and token expiry (pure)."""

from __future__ import annotations

import pytest

from shared.clients.registry_auth import (
    DEFAULT_TOKEN_TTL,
    EXPIRY_MARGIN,
    Challenge,
    parse_challenge,
    realm_allowed,
    token_expiry,
    token_of,
)


@pytest.mark.parametrize(
    ("header", "expected"),
    [
        pytest.param(
            'Bearer realm="https://auth.docker.io/token",service="registry.docker.io",'
            'scope="repository:samalba/my-app:pull,push"',
            Challenge(
                "bearer",
                {
                    "realm": "https://auth.docker.io/token",
                    "service": "registry.docker.io",
                    "scope": "repository:samalba/my-app:pull,push",
                },
            ),
            id="docker-hub-comma-inside-quotes",
        ),
        pytest.param(
            'Bearer realm="http://127.0.0.1:5001/token",service="cocoon-registry",'
            'scope="repository:snapshots/vk-a-b-0:delete"',
            Challenge(
                "bearer",
                {
                    "realm": "http://127.0.0.1:5001/token",
                    "service": "cocoon-registry",
                    "scope": "repository:snapshots/vk-a-b-0:delete",
                },
            ),
            id="distribution-delete-scope",
        ),
        pytest.param(
            'bearer  realm = "https://r/token" , service=reg, scope="a b"',
            Challenge("bearer", {"realm": "https://r/token", "service": "reg", "scope": "a b"}),
            id="spaces-and-unquoted-token",
        ),
        pytest.param(
            'Basic realm="cocoon-registry"',
            Challenge("basic", {"realm": "cocoon-registry"}),
            id="basic",
        ),
        pytest.param(
            r'Bearer realm="https://r/t",error="invalid_token",error_description="say \"hi\""',
            Challenge(
                "bearer",
                {"realm": "https://r/t", "error": "invalid_token", "error_description": 'say "hi"'},
            ),
            id="escaped-quote",
        ),
        pytest.param(
            'Bearer Realm="https://r/t",SERVICE="s"',
            Challenge("bearer", {"realm": "https://r/t", "service": "s"}),
            id="case-insensitive-keys",
        ),
        pytest.param("Bearer", Challenge("bearer", {}), id="scheme-only"),
        pytest.param("", None, id="empty"),
        pytest.param(None, None, id="absent"),
        pytest.param('="x"', None, id="no-scheme"),
    ],
)
def test_parse_challenge(header: str | None, expected: Challenge | None) -> None:
    assert parse_challenge(header) == expected


def test_challenge_accessors() -> None:
    c = parse_challenge('Bearer realm="https://r/t",service="s",scope="repository:x:pull"')
    assert c is not None
    assert (c.realm, c.service, c.scope) == ("https://r/t", "s", "repository:x:pull")
    assert parse_challenge('Bearer realm="x"') == Challenge("bearer", {"realm": "x"})
    none = parse_challenge("Bearer")
    assert none is not None and none.scope is None


NOW = 1_800_000_000.0  # 2027-01-15T08:00:00Z


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        pytest.param({"expires_in": 300}, NOW + 300 - EXPIRY_MARGIN, id="expires-in"),
        pytest.param({}, NOW + DEFAULT_TOKEN_TTL - EXPIRY_MARGIN, id="default-60s"),
        pytest.param({"expires_in": 0}, NOW + DEFAULT_TOKEN_TTL - EXPIRY_MARGIN, id="zero"),
        pytest.param({"expires_in": "300"}, NOW + DEFAULT_TOKEN_TTL - EXPIRY_MARGIN, id="str"),
        pytest.param({"expires_in": True}, NOW + DEFAULT_TOKEN_TTL - EXPIRY_MARGIN, id="bool"),
        pytest.param(
            {"expires_in": 300, "issued_at": "2027-01-15T07:58:00Z"},
            NOW - 120 + 300 - EXPIRY_MARGIN,
            id="issued-two-minutes-ago",
        ),
        pytest.param(
            {"expires_in": 300, "issued_at": "2027-01-15T07:58:00.123456789Z"},
            NOW - 120 + 0.123456 + 300 - EXPIRY_MARGIN,
            id="go-nanoseconds",
        ),
        pytest.param(
            {"expires_in": 300, "issued_at": "2027-01-15T08:02:00+00:00"},
            NOW + 300 - EXPIRY_MARGIN,
            id="issued-in-the-future-uses-our-clock",
        ),
        pytest.param(
            {"expires_in": 60, "issued_at": "2020-01-01T00:00:00Z"},
            NOW + 60 - EXPIRY_MARGIN,
            id="skewed-clock-ignored",
        ),
        pytest.param(
            {"expires_in": 300, "issued_at": "not a time"},
            NOW + 300 - EXPIRY_MARGIN,
            id="unparseable-issued-at",
        ),
        pytest.param(
            {"expires_in": 300, "issued_at": "2027-01-15T07:58:00"},
            NOW + 300 - EXPIRY_MARGIN,
            id="naive-issued-at-ignored",
        ),
        pytest.param({"expires_in": 2}, NOW + 1.0, id="tiny-ttl-still-usable-once"),
    ],
)
def test_token_expiry(body: dict[str, object], expected: float) -> None:
    assert token_expiry(body, now=NOW) == pytest.approx(expected)


@pytest.mark.parametrize(
    ("body", "token"),
    [
        pytest.param({"token": "a", "access_token": "b"}, "a", id="token-first"),
        pytest.param({"access_token": "b"}, "b", id="oauth2-access-token"),
        pytest.param({"token": ""}, None, id="empty"),
        pytest.param({"token": 1}, None, id="not-a-string"),
        pytest.param({}, None, id="missing"),
    ],
)
def test_token_of(body: dict[str, object], token: str | None) -> None:
    assert token_of(body) == token


@pytest.mark.parametrize(
    ("realm", "allowed", "ok"),
    [
        pytest.param("https://reg.example.com/token", frozenset(), True, id="same-host"),
        pytest.param("https://reg.example.com:5001/token", frozenset(), True, id="same-host-port"),
        pytest.param("https://REG.example.com/token", frozenset(), True, id="case"),
        pytest.param("https://evil.example/token", frozenset(), False, id="elsewhere"),
        pytest.param("https://reg.example.com.evil/t", frozenset(), False, id="suffix-trick"),
        pytest.param("https://reg.example.com@evil/t", frozenset(), False, id="userinfo-trick"),
        pytest.param(
            "https://auth.docker.io/token", frozenset({"auth.docker.io"}), True, id="listed"
        ),
        pytest.param("https://auth.x:8443/t", frozenset({"auth.x:8443"}), True, id="listed-port"),
        pytest.param("https://auth.x:9999/t", frozenset({"auth.x:8443"}), False, id="other-port"),
        pytest.param("not a url", frozenset(), False, id="no-host"),
    ],
)
def test_a_token_realm_must_be_the_registrys_host_or_listed(
    realm: str, allowed: frozenset[str], ok: bool
) -> None:
    assert realm_allowed(realm, "reg.example.com:443", allowed) is ok
