"""The doors' credentials as the environment gives them (shared.config, docs/security.md)."""

from __future__ import annotations

import pytest

from shared.config import MIN_TOKEN_LENGTH, Settings
from shared.errors import ConfigError

A = "a" * MIN_TOKEN_LENGTH
B = "b" * MIN_TOKEN_LENGTH + "=="  # base64 padding: a token may contain `=`
C = "c" * 40


def test_every_door_reads_its_own_token() -> None:
    s = Settings.from_env(
        {
            "COCOON_INGEST_TOKEN": A,
            "COCOON_AUDIT_TOKEN": C,
            "COCOON_WAKE_TOKENS": f"team-a,team-b={B}\n team-c={C}x ",
        }
    )
    assert (s.ingest_token, s.audit_token, s.sweep_token) == (A, C, None)
    scoped = [(w.name, w.namespaces, w.token) for w in s.wake_credentials]
    assert scoped == [
        ("COCOON_WAKE_TOKENS[1]", frozenset({"team-a", "team-b"}), B),
        ("COCOON_WAKE_TOKENS[2]", frozenset({"team-c"}), C + "x"),
    ]
    assert B not in repr(s)  # secrets stay out of reprs and logs


@pytest.mark.parametrize(
    ("env", "message"),
    [
        pytest.param(
            {"COCOON_INGEST_TOKEN": "short"}, "COCOON_INGEST_TOKEN is 5 characters", id="short"
        ),
        pytest.param({"COCOON_SWEEP_TOKEN": "x" * 31}, "under the minimum 32", id="31"),
        pytest.param(
            {"COCOON_INGEST_TOKEN": A, "COCOON_AUDIT_TOKEN": A},
            "every door needs its own",
            id="shared",
        ),
        pytest.param(
            {"COCOON_WAKE_TOKEN": A, "COCOON_WAKE_TOKENS": f"team-a={A}"},
            "every door",
            id="wake-twice",
        ),
        pytest.param({"COCOON_WAKE_TOKENS": A}, "entry 1 is not `namespace", id="no-scope"),
        pytest.param(
            {"COCOON_WAKE_TOKENS": f"Team_A={A}"}, "invalid namespace(s): Team_A", id="bad-ns"
        ),
        pytest.param(
            {"COCOON_WAKE_TOKENS": "team-a=short"}, "entry 1 is 5 characters", id="short-scoped"
        ),
        pytest.param(
            {"COCOON_REGISTRY_TOKEN_REALMS": "https://x/t"}, "host or host:port", id="realm-url"
        ),
    ],
)
def test_a_weak_or_shared_credential_is_refused_in_one_line_without_the_secret(
    env: dict[str, str], message: str
) -> None:
    with pytest.raises(ConfigError, match=None) as err:
        Settings.from_env(env)
    text = str(err.value)
    assert message in text
    assert "\n" not in text
    assert A not in text and "short" not in text.replace("is 5 characters", "")
