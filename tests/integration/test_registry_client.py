"""The registry client against a real CNCF Distribution server (Debian docker-registry 2.8).

Every test pushes real images with `devstack.registry.push_image` and asks the client the
questions release and wake ask: is `:hibernate` there, and drop it.
"""

from __future__ import annotations

import dataclasses
import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
import requests

from devstack.processes import free_port
from devstack.registry import (
    DistributionServer,
    TokenServer,
    push_image,
    tag_manifest,
)
from shared import constants
from shared.clients.registry import ManifestInfo, RegistryClient
from shared.config import RegistryAuth, Settings, parse_registry_base
from shared.errors import ConfigError, InvalidName, RegistryAuthError, RegistryError
from tests.fixtures.registry import needs_registry_binary, require_registry_binary

pytestmark = pytest.mark.needs_registry

PREFIX = "snapshots"


def settings_for(
    host: str,
    *,
    auth: RegistryAuth = RegistryAuth.NONE,
    user: str | None = None,
    password: str | None = None,
) -> Settings:
    return Settings(
        registry_base=parse_registry_base(f"{host}/{PREFIX}"),
        registry_insecure=True,
        registry_auth=auth,
        registry_username=user,
        registry_password=password,
    )


@pytest.fixture
def vm(registry_repo: str) -> str:
    """A VM name whose repository (`snapshots/<vm>`) no other test uses."""
    return registry_repo.split("/", 1)[1]


@pytest.fixture
def client(registry: DistributionServer) -> Iterator[RegistryClient]:
    c = RegistryClient(settings_for(registry.host))
    yield c
    c.close()


# --------------------------------------------------------------------------- presence


def test_pushed_snapshot_is_present_with_its_digest(
    registry: DistributionServer, client: RegistryClient, vm: str
) -> None:
    repo = f"{PREFIX}/{vm}"
    digest = push_image(registry.url, repo, constants.TAG_HIBERNATE, payload=b"memory image")

    info = client.head_manifest(repo, constants.TAG_HIBERNATE)

    assert info == ManifestInfo(
        repository=repo,
        reference="hibernate",
        digest=digest,
        media_type="application/vnd.oci.image.manifest.v1+json",
        size=info.size if info else None,
    )
    assert info is not None and info.size and info.size > 0
    assert client.snapshot_present(vm) is True
    assert client.resolve_digest(repo, "hibernate") == digest
    # Asking by digest answers the same manifest.
    by_digest = client.head_manifest(repo, digest)
    assert by_digest is not None and by_digest.digest == digest


def test_absent_tag_and_absent_repository_are_none_not_errors(
    registry: DistributionServer, client: RegistryClient, vm: str
) -> None:
    repo = f"{PREFIX}/{vm}"
    assert client.snapshot_present(vm) is False  # repository does not exist
    push_image(registry.url, repo, "latest")
    assert client.head_manifest(repo, constants.TAG_HIBERNATE) is None  # tag does not exist
    assert client.resolve_digest(repo, constants.TAG_HIBERNATE) is None


def test_invalid_names_never_reach_the_registry(client: RegistryClient) -> None:
    for repo, ref in [
        ("Upper/case", "hibernate"),
        ("a/../b", "hibernate"),
        ("snapshots/vm", "bad tag"),
        ("snapshots/vm", "sha256:not/hex"),
        ("snapshots/vm?x=1", "hibernate"),
    ]:
        with pytest.raises(InvalidName):
            client.head_manifest(repo, ref)
    with pytest.raises(InvalidName):
        client.delete_tag("snapshots/vm", "../x")
    assert client.requests_made == 0


# --------------------------------------------------------------------------- delete


def test_drop_snapshot_removes_the_only_tag(
    registry: DistributionServer, client: RegistryClient, vm: str
) -> None:
    repo = f"{PREFIX}/{vm}"
    push_image(registry.url, repo, constants.TAG_HIBERNATE)

    assert client.drop_snapshot(vm) is True

    assert client.snapshot_present(vm) is False
    listed = requests.get(f"{registry.url}/v2/{repo}/tags/list", timeout=5).json()
    assert not listed.get("tags")


def test_a_manifest_shared_with_latest_is_never_deleted(
    registry: DistributionServer, client: RegistryClient, vm: str
) -> None:
    repo = f"{PREFIX}/{vm}"
    digest = push_image(registry.url, repo, constants.TAG_HIBERNATE)
    tag_manifest(registry.url, repo, digest, constants.TAG_LATEST)

    assert client.drop_snapshot(vm) is False

    # Both tags still resolve to the same manifest: nothing was removed.
    assert client.resolve_digest(repo, constants.TAG_LATEST) == digest
    assert client.resolve_digest(repo, constants.TAG_HIBERNATE) == digest


def test_other_tags_on_other_manifests_do_not_block_the_delete(
    registry: DistributionServer, client: RegistryClient, vm: str
) -> None:
    repo = f"{PREFIX}/{vm}"
    latest = push_image(registry.url, repo, constants.TAG_LATEST, payload=b"base image")
    push_image(registry.url, repo, constants.TAG_HIBERNATE, payload=b"memory image")

    assert client.delete_tag(repo, constants.TAG_HIBERNATE) is True

    assert client.resolve_digest(repo, constants.TAG_HIBERNATE) is None
    assert client.resolve_digest(repo, constants.TAG_LATEST) == latest


def test_deleting_an_already_deleted_tag_is_success(
    registry: DistributionServer, client: RegistryClient, vm: str
) -> None:
    repo = f"{PREFIX}/{vm}"
    push_image(registry.url, repo, constants.TAG_HIBERNATE)
    assert client.drop_snapshot(vm) is True
    assert client.drop_snapshot(vm) is True  # redelivered wake completion
    assert client.drop_snapshot("vk-never-pushed-cs-0") is True  # repository never existed


def test_a_delete_racing_another_delete_is_success(
    registry: DistributionServer, client: RegistryClient, vm: str
) -> None:
    """The manifest vanishes between our lookup and our DELETE (two wake completions)."""
    repo = f"{PREFIX}/{vm}"
    digest = push_image(registry.url, repo, constants.TAG_HIBERNATE)
    gone = requests.delete(f"{registry.url}/v2/{repo}/manifests/{digest}", timeout=5)
    assert gone.status_code == 202
    # The DELETE by digest itself answers 404 now: still "gone".
    resp = client._http("DELETE", repo, f"manifests/{digest}")
    assert resp.status_code == 404
    assert client.delete_tag(repo, constants.TAG_HIBERNATE) is True


def test_tags_list_follows_pagination(
    registry: DistributionServer, client: RegistryClient, vm: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    repo = f"{PREFIX}/{vm}"
    digest = push_image(registry.url, repo, "a")
    for tag in ("b", "c", "d", constants.TAG_HIBERNATE):
        tag_manifest(registry.url, repo, digest, tag)
    monkeypatch.setattr("shared.clients.registry.TAGS_PAGE", 2)  # Distribution honours ?n=

    assert sorted(client.list_tags(repo)) == sorted(["a", "b", "c", "d", "hibernate"])
    # The shared-manifest check sees a tag on the last page too.
    assert client.delete_tag(repo, "a") is False


# --------------------------------------------------------------------------- errors


@needs_registry_binary
def test_a_stopped_registry_is_a_transient_error_not_absent(vm: str) -> None:
    with DistributionServer() as srv:
        host = srv.host
        client = RegistryClient(settings_for(host))
        assert client.snapshot_present(vm) is False
    # Same client (a warm instance), the registry is gone: connection refused.
    with pytest.raises(RegistryError):
        client.snapshot_present(vm)
    with pytest.raises(RegistryError):
        client.drop_snapshot(vm)


def test_a_port_nobody_listens_on_raises_registry_error(vm: str) -> None:
    client = RegistryClient(settings_for(f"127.0.0.1:{free_port()}"))
    with pytest.raises(RegistryError) as err:
        client.snapshot_present(vm)
    assert not isinstance(err.value, RegistryAuthError)
    assert isinstance(err.value.__cause__, requests.ConnectionError)


class _Answer(BaseHTTPRequestHandler):
    """A registry stand-in answering every request with one fixed status."""

    status = 500
    host = ""
    seen: list[tuple[str, str, str | None]]

    def log_message(self, format: str, *args: object) -> None:
        return

    def _answer(self) -> None:
        self.seen.append((self.command, self.path, self.headers.get("Authorization")))
        self.send_response(self.status)
        self.send_header("Content-Length", "0")
        self.end_headers()

    do_GET = do_HEAD = do_DELETE = _answer


@pytest.fixture
def answering() -> Iterator[type[_Answer]]:
    """A local HTTP server on 127.0.0.1 whose status a test sets (no real registry answers 500)."""

    class Handler(_Answer):
        seen: list[tuple[str, str, str | None]] = []  # noqa: RUF012

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(
        target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
    )
    thread.start()
    Handler.host = f"127.0.0.1:{server.server_address[1]}"
    yield Handler
    server.shutdown()
    server.server_close()


@pytest.mark.parametrize(
    ("status", "error"),
    [
        pytest.param(500, RegistryError, id="500-transient"),
        pytest.param(503, RegistryError, id="503-transient"),
        pytest.param(429, RegistryError, id="429-transient"),
        pytest.param(401, RegistryAuthError, id="401-auth"),
        pytest.param(403, RegistryAuthError, id="403-auth"),
    ],
)
def test_error_statuses_raise_typed_errors_never_absent(
    answering: type[_Answer], status: int, error: type[Exception], vm: str
) -> None:
    answering.status = status
    client = RegistryClient(settings_for(answering.host))
    with pytest.raises(error):
        client.snapshot_present(vm)
    with pytest.raises(error):
        client.drop_snapshot(vm)
    if error is RegistryAuthError:
        assert issubclass(error, ConfigError)  # reported loudly, never read as absent


# --------------------------------------------------------------------------- basic auth


@needs_registry_binary
def test_basic_auth_good_and_bad_credentials(vm: str) -> None:
    with DistributionServer(htpasswd={"cocoon": "s3cret"}) as srv:
        repo = f"{PREFIX}/{vm}"
        digest = push_image(srv.url, repo, constants.TAG_HIBERNATE, auth=("cocoon", "s3cret"))

        good = RegistryClient(
            settings_for(srv.host, auth=RegistryAuth.BASIC, user="cocoon", password="s3cret")
        )
        assert good.resolve_digest(repo, constants.TAG_HIBERNATE) == digest
        assert good.drop_snapshot(vm) is True
        assert good.snapshot_present(vm) is False

        bad = RegistryClient(
            settings_for(srv.host, auth=RegistryAuth.BASIC, user="cocoon", password="wrong")
        )
        with pytest.raises(RegistryAuthError):
            bad.snapshot_present(vm)

        anonymous = RegistryClient(settings_for(srv.host))
        with pytest.raises(RegistryAuthError, match="COCOON_REGISTRY_AUTH=none"):
            anonymous.snapshot_present(vm)


# --------------------------------------------------------------------------- bearer


@pytest.fixture
def token_registry() -> Iterator[tuple[TokenServer, DistributionServer]]:
    require_registry_binary()
    with (
        TokenServer(users={"cocoon": "s3cret"}, expires_in=300) as tokens,
        DistributionServer(token_auth=tokens.auth_config()) as srv,
    ):
        yield tokens, srv


class FakeClock:
    def __init__(self) -> None:
        self.now = 1_900_000_000.0

    def __call__(self) -> float:
        return self.now


def test_bearer_token_flow_caches_the_token_per_scope(
    token_registry: tuple[TokenServer, DistributionServer], vm: str
) -> None:
    tokens, srv = token_registry
    repo = f"{PREFIX}/{vm}"
    digest = push_image(srv.url, repo, constants.TAG_HIBERNATE, auth=("cocoon", "s3cret"))
    tokens.requests.clear()
    clock = FakeClock()
    client = RegistryClient(
        settings_for(srv.host, auth=RegistryAuth.BEARER, user="cocoon", password="s3cret"),
        clock=clock,
    )

    for _ in range(4):
        assert client.resolve_digest(repo, constants.TAG_HIBERNATE) == digest
    assert client.snapshot_present(vm) is True

    # One token for five calls: the first call met the challenge, the rest reused it.
    assert len(tokens.requests) == 1
    assert tokens.requests[0].scopes == [f"repository:{repo}:pull"]
    assert tokens.requests[0].authorized is True
    assert tokens.requests[0].service == tokens.service
    assert client.requests_made == 1 + 1 + 1 + 4  # 401, token, retry, then four direct


def test_bearer_token_is_fetched_again_after_expiry(
    token_registry: tuple[TokenServer, DistributionServer], vm: str
) -> None:
    tokens, srv = token_registry
    repo = f"{PREFIX}/{vm}"
    push_image(srv.url, repo, constants.TAG_HIBERNATE, auth=("cocoon", "s3cret"))
    tokens.requests.clear()
    clock = FakeClock()
    client = RegistryClient(
        settings_for(srv.host, auth=RegistryAuth.BEARER, user="cocoon", password="s3cret"),
        clock=clock,
    )
    assert client.snapshot_present(vm) is True
    assert len(tokens.requests) == 1

    clock.now += tokens.expires_in  # past expires_in: the cached token is stale
    made = client.requests_made
    assert client.snapshot_present(vm) is True

    assert len(tokens.requests) == 2
    # The scope was known: the new token was fetched up front, no 401 round trip.
    assert client.requests_made == made + 2


def test_bearer_delete_asks_for_the_delete_scope_and_removes_the_tag(
    token_registry: tuple[TokenServer, DistributionServer], vm: str
) -> None:
    tokens, srv = token_registry
    repo = f"{PREFIX}/{vm}"
    push_image(srv.url, repo, constants.TAG_HIBERNATE, auth=("cocoon", "s3cret"))
    client = RegistryClient(
        settings_for(srv.host, auth=RegistryAuth.BEARER, user="cocoon", password="s3cret")
    )
    assert client.drop_snapshot(vm) is True
    assert client.snapshot_present(vm) is False
    assert any(any(s.endswith(":delete") for s in r.scopes) for r in tokens.requests)


def test_credentials_never_go_to_a_token_realm_on_another_host(
    token_registry: tuple[TokenServer, DistributionServer], vm: str
) -> None:
    # The same registry reached as `localhost`: its challenge names a realm on
    # 127.0.0.1, another host as far as the client can tell.
    tokens, srv = token_registry
    repo = f"{PREFIX}/{vm}"
    push_image(srv.url, repo, constants.TAG_HIBERNATE, auth=("cocoon", "s3cret"))
    tokens.requests.clear()
    port = srv.host.rpartition(":")[2]
    settings = settings_for(
        f"localhost:{port}", auth=RegistryAuth.BEARER, user="cocoon", password="s3cret"
    )
    with pytest.raises(RegistryAuthError, match="COCOON_REGISTRY_TOKEN_REALMS"):
        RegistryClient(settings).snapshot_present(vm)
    assert tokens.requests == []  # the password went nowhere

    listed = dataclasses.replace(settings, registry_token_realms=frozenset({"127.0.0.1"}))
    assert RegistryClient(listed).snapshot_present(vm) is True
    assert len(tokens.requests) == 1


def test_bearer_with_bad_credentials_is_an_auth_error(
    token_registry: tuple[TokenServer, DistributionServer], vm: str
) -> None:
    _tokens, srv = token_registry
    client = RegistryClient(
        settings_for(srv.host, auth=RegistryAuth.BEARER, user="cocoon", password="wrong")
    )
    with pytest.raises(RegistryAuthError, match="refused the credentials"):
        client.snapshot_present(vm)


# --------------------------------------------------------------------------- google


class FakeGoogleCredentials:
    """Stands in for google.auth's ADC credentials: no Google metadata server or key here.

    Starts expired (as ADC credentials do before their first refresh); each refresh
    mints the next access token.
    """

    def __init__(self) -> None:
        self.token: str | None = None
        self.valid = False
        self.refreshes = 0
        self.asked_scopes: list[object] = []

    def refresh(self, request: object) -> None:
        self.refreshes += 1
        self.token = f"ya29.fake-{self.refreshes}"
        self.valid = True


@pytest.fixture
def fake_adc(monkeypatch: pytest.MonkeyPatch) -> FakeGoogleCredentials:
    import google.auth

    creds = FakeGoogleCredentials()

    def default(scopes: list[str] | None = None, **_: object) -> tuple[FakeGoogleCredentials, str]:
        creds.asked_scopes.append(scopes)
        return creds, "fake-project"

    monkeypatch.setattr(google.auth, "default", default)
    return creds


def test_google_mode_sends_the_access_token_as_bearer(
    answering: type[_Answer], fake_adc: FakeGoogleCredentials, vm: str
) -> None:
    """Artifact Registry accepts the ADC access token directly as a bearer token."""
    answering.status = 200
    client = RegistryClient(settings_for(answering.host, auth=RegistryAuth.GOOGLE))

    assert client.snapshot_present(vm) is True
    assert client.snapshot_present(vm) is True

    assert (
        answering.seen
        == [
            ("HEAD", f"/v2/{PREFIX}/{vm}/manifests/hibernate", "Bearer ya29.fake-1"),
            ("GET", f"/v2/{PREFIX}/{vm}/manifests/hibernate", "Bearer ya29.fake-1"),
        ]
        * 2
    )  # (the stand-in sends no Docker-Content-Digest, so the client GETs the body)
    assert fake_adc.asked_scopes == [["https://www.googleapis.com/auth/cloud-platform"]]
    assert fake_adc.refreshes == 1  # refreshed once, then reused while valid

    fake_adc.valid = False  # expired
    client.snapshot_present(vm)
    assert answering.seen[-1][2] == "Bearer ya29.fake-2"


def test_google_mode_exchanges_the_token_when_challenged(
    fake_adc: FakeGoogleCredentials, vm: str
) -> None:
    """A gcr.io-style registry challenges; the token is exchanged as oauth2accesstoken."""
    require_registry_binary()
    with (
        TokenServer(users={"oauth2accesstoken": "ya29.fake-1"}) as tokens,
        DistributionServer(token_auth=tokens.auth_config()) as srv,
    ):
        repo = f"{PREFIX}/{vm}"
        digest = push_image(
            srv.url, repo, constants.TAG_HIBERNATE, auth=("oauth2accesstoken", "ya29.fake-1")
        )
        tokens.requests.clear()
        client = RegistryClient(settings_for(srv.host, auth=RegistryAuth.GOOGLE))
        assert client.resolve_digest(repo, constants.TAG_HIBERNATE) == digest
        assert client.resolve_digest(repo, constants.TAG_HIBERNATE) == digest
        assert len(tokens.requests) == 1
        assert tokens.requests[0].authorized is True


# ------------------------------------------------- registries that keep tags apart

MEDIA = "application/vnd.oci.image.manifest.v1+json"
DIGEST = "sha256:" + "ab" * 32


class _TagsApart(BaseHTTPRequestHandler):
    """A registry keeping each tag apart from its manifest (go-containerregistry's does,
    checked by hand): a DELETE removes only the reference it names, by digest or by tag.
    Distribution, which the other tests run, removes the tags with the manifest."""

    host = ""
    refs: dict[str, str]  # reference (tag or digest) -> digest
    untag = True  # whether a DELETE by tag is accepted

    def log_message(self, format: str, *args: object) -> None:
        return

    def _send(self, status: int, headers: dict[str, str], body: bytes = b"") -> None:
        self.send_response(status)
        for name, value in {**headers, "Content-Length": str(len(body))}.items():
            self.send_header(name, value)
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def do_HEAD(self) -> None:
        ref = self.path.rpartition("/manifests/")[2]
        if "/tags/list" in self.path:
            tags = [r for r in self.refs if not r.startswith("sha256:")]
            self._send(
                200, {"Content-Type": "application/json"}, json.dumps({"tags": tags}).encode()
            )
        elif ref in self.refs:
            self._send(200, {"Docker-Content-Digest": self.refs[ref], "Content-Type": MEDIA})
        else:
            self._send(404, {})

    do_GET = do_HEAD

    def do_DELETE(self) -> None:
        ref = self.path.rpartition("/manifests/")[2]
        if not ref.startswith("sha256:") and not self.untag:
            self._send(400, {})
        else:
            self._send(404 if self.refs.pop(ref, None) is None else 202, {})


@pytest.fixture
def tags_apart() -> Iterator[type[_TagsApart]]:
    class Handler(_TagsApart):
        refs: dict[str, str] = {constants.TAG_HIBERNATE: DIGEST, DIGEST: DIGEST}  # noqa: RUF012

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(
        target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
    )
    thread.start()
    Handler.host = f"127.0.0.1:{server.server_address[1]}"
    yield Handler
    server.shutdown()
    server.server_close()


@pytest.mark.parametrize("untag", [True, False], ids=["untags", "refuses-untag"])
def test_a_tag_kept_apart_from_its_manifest_is_deleted_or_reported_kept(
    tags_apart: type[_TagsApart], untag: bool, vm: str
) -> None:
    # Dropping `:hibernate` by digest alone left the tag on such a registry, and
    # vk-cocoon restores from a `:hibernate` it finds the next time the VM starts.
    tags_apart.untag = untag
    client = RegistryClient(settings_for(tags_apart.host))
    assert client.drop_snapshot(vm) is untag
    assert client.snapshot_present(vm) is not untag
