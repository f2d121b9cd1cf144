"""In-cluster callers by TokenReview (functions.doors): who is asked, what is kept, what opens.

The API server is a fake here; tests/e2e/test_cluster_callers_real.py asks a real one.
"""

from __future__ import annotations

import base64
import json
import time
from collections.abc import Iterator
from typing import Any

import pytest

from functions import doors, process
from functions.doors import Door
from shared.config import Settings
from shared.errors import ConfigError, TransientError

SOURCE = "system:serviceaccount:cocoon-system:cocoon-wake-oidc-sources.knative.dev-apiserversource"
PING = "system:serviceaccount:cocoon-system:cocoon-sweep-oidc-sources.knative.dev-pingsource"
ENV = {
    "COCOON_CLUSTER_AUDIENCE": "cocoon-hibernation",
    "COCOON_CLUSTER_CALLERS": f"{SOURCE}=audit, {PING}=sweep",
}


def _jwt(sub: str, **claims: Any) -> str:
    body = base64.urlsafe_b64encode(json.dumps({"sub": sub, **claims}).encode()).decode()
    return f"eyJhbGciOiJSUzI1NiJ9.{body.rstrip('=')}.c2ln"


class FakeApi:
    def __init__(self) -> None:
        self.reviews: list[tuple[str, str]] = []
        self.valid: set[str] = set()
        self.down = False

    def review_token(self, token: str, audience: str) -> str | None:
        self.reviews.append((token, audience))
        if self.down:
            raise TransientError("CREATE tokenreview: connection refused")
        return (
            json.loads(base64.urlsafe_b64decode(token.split(".")[1] + "=="))["sub"]
            if (token in self.valid)
            else None
        )


@pytest.fixture
def api(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeApi]:
    fake = FakeApi()
    monkeypatch.setattr(process, "kube_client", lambda _settings: fake)
    doors._reviews.clear()
    yield fake
    doors._reviews.clear()


def test_settings_read_the_callers_and_refuse_half_a_configuration() -> None:
    s = Settings.from_env(ENV | {"COCOON_TARGET_AUTH": "doors"})
    assert s.cluster_callers == ((SOURCE, "audit"), (PING, "sweep"))
    assert (s.cluster_audience, s.target_auth) == ("cocoon-hibernation", True)
    assert Settings.from_env({}).target_auth is False
    for env, message in [
        ({"COCOON_CLUSTER_AUDIENCE": "x"}, "go together"),
        ({"COCOON_CLUSTER_CALLERS": f"{SOURCE}=audit"}, "go together"),
        (ENV | {"COCOON_CLUSTER_CALLERS": f"{SOURCE}=admin"}, "is not username="),
        (ENV | {"COCOON_CLUSTER_CALLERS": "=wake"}, "is not username="),
        ({"COCOON_TARGET_AUTH": "none"}, "`platform` or `doors`"),
    ]:
        with pytest.raises(ConfigError, match=message):
            Settings.from_env(env)


def test_a_listed_account_opens_only_its_own_door_and_is_asked_once(api: FakeApi) -> None:
    config = Settings.from_env(ENV)
    token = _jwt(SOURCE, exp=time.time() + 600)
    api.valid.add(token)
    assert doors.configured((Door.AUDIT,), config) and not doors.configured((Door.WAKE,), config)
    caller = doors.authenticate(token, (Door.WAKE, Door.AUDIT), config)
    assert caller == doors.Caller(Door.AUDIT, SOURCE)
    assert doors.authenticate(token, (Door.WAKE, Door.AUDIT), config) == caller
    assert api.reviews == [(token, "cocoon-hibernation")]  # the second answer was kept
    # The same account at a door it is not listed for: refused, and not asked again.
    assert doors.authenticate(token, (Door.SWEEP,), config) is None
    assert len(api.reviews) == 1


def test_what_names_no_listed_account_costs_no_review(api: FakeApi) -> None:
    config = Settings.from_env(ENV)
    unhashable = _jwt("x").replace(_jwt("x").split(".")[1], "W10")  # a payload of `[]`
    listy = "e30." + base64.urlsafe_b64encode(b'{"sub": []}').decode() + ".c2ln"
    tokens = ("x" * 40, _jwt("system:serviceaccount:team-a:default"), "a.b.c", "a.!!.c")
    for token in (*tokens, unhashable, listy):
        assert doors.authenticate(token, (Door.AUDIT,), config) is None
    assert api.reviews == []


def test_refusals_are_never_kept_and_an_expiring_token_not_past_its_exp(api: FakeApi) -> None:
    config = Settings.from_env(ENV)
    forged = _jwt(SOURCE)
    assert doors.authenticate(forged, (Door.AUDIT,), config) is None
    assert doors.authenticate(forged, (Door.AUDIT,), config) is None
    assert len(api.reviews) == 2
    expiring = _jwt(SOURCE, exp=time.time() - 1)  # the server's clock says it is still valid
    api.valid.add(expiring)
    assert doors.authenticate(expiring, (Door.AUDIT,), config) is not None
    assert doors.authenticate(expiring, (Door.AUDIT,), config) is not None
    assert len(api.reviews) == 4  # kept for no time at all


def test_an_unreachable_api_server_is_a_transient_error(api: FakeApi) -> None:
    api.down = True
    with pytest.raises(TransientError):
        doors.authenticate(_jwt(PING), (Door.SWEEP,), Settings.from_env(ENV))
