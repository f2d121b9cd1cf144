"""Hostile input against every door of `serve` (and ingest's `/pubsub`), on the local stack.

What a tenant, or any pod that can reach the Service, can try (docs/security.md):
no credential, a wrong one, another door's; a body too large, endless or
nested past the parser; one notification that names a thousand ambiguous VMs.
Each request goes through the real `serve` router and functions-framework apps
against the embedded API (and the real kube-apiserver where it runs), and the
assertions are what a tenant would see: the answer, whether a byte of the body
was read, whether the cluster changed, how many API requests it cost. The last
part sends the same to the per-target processes (`functions-framework --target`).
"""

from __future__ import annotations

import base64
import contextlib
import io
import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import functions_framework
import pytest
from cloudevents.http import CloudEvent, to_binary, to_structured

from functions import process
from functions.doors import MAX_BODY
from functions.serve import create_app
from shared import constants as k
from shared.adapters.budget import MAX_SETS_PER_REQUEST
from shared.names import vm_name
from tests.conftest import REPO_ROOT
from tests.e2e.test_wake_e2e import released_set, wake_event
from tests.fixtures.cocoon_objects import NS, SET, set_manifest
from tests.fixtures.ingest import AUDIT_TOKEN, SWEEP_TOKEN, TOKEN, WAKE_TOKEN
from tests.fixtures.reconcile_world import World

pytestmark = pytest.mark.e2e

OTHER_NS = "team-b"
# A wake credential for team-b only (COCOON_WAKE_TOKENS), beside the all-namespace one.
TEAM_B_TOKEN = "s3cr3t-team-b-wake-token-0123456789ab"

DOOR_ENV = {
    "COCOON_INGEST_TOKEN": TOKEN,
    "COCOON_AUDIT_TOKEN": AUDIT_TOKEN,
    "COCOON_WAKE_TOKEN": WAKE_TOKEN,
    "COCOON_WAKE_TOKENS": f"{OTHER_NS}={TEAM_B_TOKEN}",
    "COCOON_SWEEP_TOKEN": SWEEP_TOKEN,
}

# Every route, the credential its everyday caller holds, and the credentials of
# other doors that must not open it.
ROUTES = {
    "/release": (AUDIT_TOKEN, [WAKE_TOKEN, SWEEP_TOKEN, TEAM_B_TOKEN]),
    "/wake": (WAKE_TOKEN, [TOKEN, SWEEP_TOKEN]),
    "/sweep": (SWEEP_TOKEN, [TOKEN, AUDIT_TOKEN, WAKE_TOKEN, TEAM_B_TOKEN]),
    "/registry": (TOKEN, [AUDIT_TOKEN, WAKE_TOKEN, SWEEP_TOKEN]),
    "/kubernetes/audit": (AUDIT_TOKEN, [TOKEN, WAKE_TOKEN, SWEEP_TOKEN]),
    "/pubsub": (WAKE_TOKEN, [TOKEN, AUDIT_TOKEN]),
}


def _bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


class Tripwire(io.RawIOBase):
    """A request body that counts every read: a refusal before the body reads nothing."""

    def __init__(self, data: bytes) -> None:
        self._data = io.BytesIO(data)
        self.reads = 0

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True  # the test client measures the stream; seeking reads no byte

    def seek(self, offset: int, whence: int = 0) -> int:
        return self._data.seek(offset, whence)

    def tell(self) -> int:
        return self._data.tell()

    def readinto(self, buffer: Any) -> int:
        self.reads += 1
        return self._data.readinto(buffer)


@pytest.fixture
def apps(world: World, monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, Any]]:
    """`serve`'s router and the ingest target (for `/pubsub`), with this world's env."""
    for key in list(os.environ):
        if key.startswith("COCOON_"):
            monkeypatch.delenv(key)
    for key, value in {**world.env, **DOOR_ENV}.items():
        monkeypatch.setenv(key, value)
    process.reset()
    ingest = functions_framework.create_app(target="ingest", source=str(REPO_ROOT / "main.py"))
    yield {"serve": create_app().test_client(), "ingest": ingest.test_client()}
    process.reset()


def _counted(world: World) -> bool:
    """Whether this backend keeps a request log (the embedded API; a real server has none)."""
    return hasattr(world.kube, "reset_requests")


def _reset_log(world: World) -> None:
    if _counted(world):
        world.reset_log()


def _client(apps: dict[str, Any], route: str) -> Any:
    return apps["ingest" if route == "/pubsub" else "serve"]


def _wake_body(route: str, namespace: str = NS) -> tuple[dict[str, str], bytes]:
    """What each route would take as a wake of the set, in that route's own shape."""
    event = CloudEvent(
        {"type": k.CE_WAKE_REQUESTED, "source": "//tests/hostile", "id": "h-1"},
        {"namespace": namespace, "name": SET},
    )
    if route == "/pubsub":
        data = base64.b64encode(json.dumps({"namespace": namespace, "name": SET}).encode())
        body = json.dumps({"message": {"data": data.decode(), "messageId": "m-1"}}).encode()
        return {"Content-Type": "application/json"}, body
    if route in ("/registry", "/kubernetes/audit"):
        headers, body = to_structured(event)
        return dict(headers), body
    headers, body = to_binary(event)
    return dict(headers), body


def _suspended(world: World, namespace: str = NS) -> tuple[bool, str]:
    cs = world.get_set(namespace, SET)
    return cs["spec"]["suspend"], cs["metadata"]["resourceVersion"]


def _credentials() -> list[Any]:
    cases = []
    for route, (_, others) in ROUTES.items():
        cases.append(pytest.param(route, None, id=f"{route}-none"))
        cases.append(pytest.param(route, "x" * 40, id=f"{route}-wrong"))
        cases.extend(
            pytest.param(route, other, id=f"{route}-door{i}") for i, other in enumerate(others)
        )
    return cases


@pytest.mark.parametrize(("route", "token"), _credentials())
def test_no_door_opens_without_its_own_credential_and_nothing_is_read_or_changed(
    world: World, apps: dict[str, Any], route: str, token: str | None
) -> None:
    released_set(world)
    before = _suspended(world)
    headers, body = _wake_body(route)
    if token is not None:
        headers |= _bearer(token)
    stream = Tripwire(body)
    _reset_log(world)

    response = _client(apps, route).post(
        route, input_stream=stream, content_length=len(body), headers=headers
    )

    calls = world.api_requests() if _counted(world) else []
    assert response.status_code == 401
    assert stream.reads == 0  # refused on the headers alone
    assert calls == []  # not one API request
    assert _suspended(world) == before  # still asleep, not even re-written


def test_the_registry_token_cannot_wake_anywhere(world: World, apps: dict[str, Any]) -> None:
    released_set(world)
    for route in ("/wake", "/pubsub", "/release", "/registry"):
        headers, body = _wake_body(route)
        response = _client(apps, route).post(route, data=body, headers=headers | _bearer(TOKEN))
        # /wake and /pubsub refuse the token; /release and /registry take it, and a
        # wake request is not a push: dropped, acknowledged, never acted on.
        assert response.status_code in (401, 200, 202), route
    assert _suspended(world)[0] is True


def test_the_audit_token_opens_wake_for_set_changes_but_cannot_request_a_wake(
    world: World, apps: dict[str, Any]
) -> None:
    released_set(world)
    before = _suspended(world)
    headers, body = to_binary(wake_event())
    response = apps["serve"].post("/wake", data=body, headers=dict(headers) | _bearer(AUDIT_TOKEN))
    assert response.status_code == 403
    assert _suspended(world) == before


def test_a_namespace_scoped_token_wakes_its_namespace_and_no_other(
    world: World, apps: dict[str, Any]
) -> None:
    released_set(world)  # in team-a
    other_vm = vm_name(OTHER_NS, SET, 0)
    world.create_set(
        set_manifest(
            namespace=OTHER_NS,
            suspend=True,
            phase="Suspended",
            hint="node-a",
            annotations={k.ANN_DELETE_VM_NAMES: other_vm},
        )
    )
    world.push_snapshot(other_vm)
    before = _suspended(world)

    for route in ("/wake", "/pubsub"):
        headers, body = _wake_body(route, NS)
        _reset_log(world)
        refused = _client(apps, route).post(
            route, data=body, headers=headers | _bearer(TEAM_B_TOKEN)
        )
        calls = world.api_requests() if _counted(world) else []
        assert refused.status_code == 403, route
        assert calls == []  # refused before any API call
        assert _suspended(world) == before

    headers, body = _wake_body("/wake", OTHER_NS)
    woken = apps["serve"].post("/wake", data=body, headers=headers | _bearer(TEAM_B_TOKEN))
    assert woken.status_code == 200
    assert _suspended(world, OTHER_NS)[0] is False
    assert _suspended(world) == before
    # The set says who asked: the scoped credential's name, never the secret.
    (asked,) = [e for e in world.events(OTHER_NS) if e.reason == k.REASON_WAKE_REQUESTED]
    assert asked.message.startswith("Wake requested by wake:")
    assert TEAM_B_TOKEN not in asked.message
    recorded = world.get_set(OTHER_NS, SET)["metadata"]["annotations"]
    assert recorded[k.ANN_WAKE_REQUESTED_BY] == asked.message.removeprefix("Wake requested by ")


FIVE_MIB = 5 << 20


@pytest.mark.parametrize("route", list(ROUTES))
def test_a_five_mib_body_is_refused_unread_and_a_chunked_one_after_one_mib(
    world: World, apps: dict[str, Any], route: str
) -> None:
    token, _ = ROUTES[route]
    big = b"{" + b" " * (FIVE_MIB - 2) + b"}"
    declared = Tripwire(big)
    response = _client(apps, route).post(
        route,
        input_stream=declared,
        content_length=len(big),
        headers={"Content-Type": "application/json"} | _bearer(token),
    )
    assert response.status_code == 413
    assert declared.reads == 0

    # No Content-Length (a chunked body): read until past the limit, not further.
    endless = Tripwire(big)
    response = _client(apps, route).post(
        route,
        input_stream=endless,
        # What gunicorn sets for a chunked body: the stream ends where the body does.
        environ_overrides={"wsgi.input_terminated": True, "CONTENT_LENGTH": ""},
        headers={"Content-Type": "application/json", "Transfer-Encoding": "chunked"}
        | _bearer(token),
    )
    assert response.status_code == 413
    consumed = endless._data.tell()
    assert consumed <= MAX_BODY + 128 * 1024, consumed
    assert _client(apps, "/wake").get("/healthz").status_code in (200, 404)


@pytest.mark.parametrize("route", ["/release", "/wake", "/sweep"])
@pytest.mark.parametrize("mode", ["structured", "binary"])
def test_json_nested_past_the_parser_is_a_clean_400(
    world: World, apps: dict[str, Any], route: str, mode: str
) -> None:
    token, _ = ROUTES[route]
    deep = b"[" * 100_000 + b"]" * 100_000
    if mode == "structured":
        headers = {"Content-Type": "application/cloudevents+json"}
        body = b'{"specversion": "1.0", "type": "x", "source": "s", "id": "1", "data": ' + deep
        body += b"}"
    else:
        headers = {
            "Content-Type": "application/json",
            "ce-specversion": "1.0",
            "ce-type": k.CE_WAKE_REQUESTED,
            "ce-source": "//tests",
            "ce-id": "1",
        }
        body = deep
    response = apps["serve"].post(route, data=body, headers=headers | _bearer(token))
    assert response.status_code == 400


def _distribution(prefix: str, names: list[str]) -> bytes:
    events = [
        {
            "id": f"e{i}",
            "action": "push",
            "target": {
                "mediaType": "application/vnd.oci.image.manifest.v1+json",
                "repository": f"{prefix}/{name}",
                "tag": k.TAG_HIBERNATE,
                "digest": "sha256:" + "0" * 64,
            },
        }
        for i, name in enumerate(names)
    ]
    return json.dumps({"events": events}).encode()


@pytest.mark.embedded_only("counts requests in the emulator's request log")
def test_one_notification_of_a_thousand_ambiguous_names_costs_at_most_300_requests(
    world: World, apps: dict[str, Any], capsys: pytest.CaptureFixture[str]
) -> None:
    # Legacy names (no hash): `vk-a0-b-c-d-e-f-0` may be five (namespace, set) splits.
    names = [f"vk-a{i}-b-c-d-e-f-0" for i in range(1000)]
    body = _distribution(world.prefix, names)
    assert len(body) < MAX_BODY
    _reset_log(world)

    response = apps["serve"].post(
        "/registry", data=body, headers={"Content-Type": "application/json"} | _bearer(TOKEN)
    )

    requests = len(world.api_requests())
    answer = response.get_json()
    with capsys.disabled():
        print(f"\n1,000-push notification: {requests} API requests, answer {answer}")
    assert response.status_code == 202
    assert requests <= 300
    # The excess is deferred with a clear answer, never dropped in silence.
    assert answer["accepted"] == MAX_SETS_PER_REQUEST // 5
    assert answer["accepted"] + answer["deferred"] == 1000
    assert answer["limit_sets"] == MAX_SETS_PER_REQUEST
    assert "deferred work over the per-request budget" in capsys.readouterr().out


# --- the real server process ------------------------------------------------------------


def _group_rss_kib(pid: int) -> int:
    """Resident memory of `serve` and its gunicorn worker (the process group)."""
    total = 0
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if os.getpgid(int(entry.name)) != pid:
                continue
            status = (entry / "status").read_text()
        except (OSError, ProcessLookupError):
            continue
        for line in status.splitlines():
            if line.startswith("VmRSS:"):
                total += int(line.split()[1])
    return total


def _raw_post(port: int, head: str, body_chunks: Iterator[bytes]) -> str:
    """Send a request by hand; the status line, or what happened to the connection."""
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(head.encode())
        try:
            for chunk in body_chunks:
                sock.sendall(chunk)
        except OSError:
            pass  # the server answered and closed: expected once it refused
        try:
            answer = sock.recv(4096).decode(errors="replace")
        except ConnectionResetError:
            return "reset"
    return answer.split("\r\n", 1)[0]


@pytest.mark.embedded_only("a server process of its own; the API is never reached")
def test_serve_refuses_five_mib_bodies_and_stays_healthy_and_small(
    world: World, capsys: pytest.CaptureFixture[str]
) -> None:
    from devstack.processes import free_port

    port = free_port()
    cli = str(Path(sys.executable).parent / "cocoon-hibernation")
    env = {k_: v for k_, v in os.environ.items() if not k_.startswith("COCOON_")}
    proc = subprocess.Popen(
        [cli, "serve", "--host", "127.0.0.1"],
        env={**env, **world.env, **DOOR_ENV, "PORT": str(port)},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                if _raw_post(port, "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n", iter(())) == (
                    "HTTP/1.1 200 OK"
                ):
                    break
            except ConnectionRefusedError:
                pass
            assert time.monotonic() < deadline, "serve did not start"
            time.sleep(0.2)
        rss_before = _group_rss_kib(proc.pid)
        outcomes = []
        for route in ("/wake", "/release", "/sweep", "/registry"):
            token, _ = ROUTES[route]
            declared = (
                f"POST {route} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {token}\r\n"
                f"Content-Type: application/json\r\nContent-Length: {FIVE_MIB}\r\n\r\n"
            )
            # Headers only: the answer must come without a byte of the body.
            outcomes.append(_raw_post(port, declared, iter(())))
            chunked = (
                f"POST {route} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {token}\r\n"
                "Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n"
            )
            piece = b" " * 65536
            chunks = (b"%x\r\n%s\r\n" % (len(piece), piece) for _ in range(FIVE_MIB // 65536))
            outcomes.append(_raw_post(port, chunked, chunks))
            unauthenticated = declared.replace(f"Authorization: Bearer {token}\r\n", "")
            outcomes.append(_raw_post(port, unauthenticated, iter(())))
        health = _raw_post(port, "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n", iter(()))
        rss_after = _group_rss_kib(proc.pid)
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=30)
    with capsys.disabled():
        print(
            f"\nserve after 4 routes x (5 MiB declared, 5 MiB chunked, unauthenticated): "
            f"{outcomes}; health {health!r}; RSS {rss_before} -> {rss_after} KiB"
        )
    declared_answers = outcomes[0::3]
    chunked_answers = outcomes[1::3]
    unauthenticated_answers = outcomes[2::3]
    assert all(a.startswith("HTTP/1.1 413") for a in declared_answers), declared_answers
    # A chunked body is refused once past 1 MiB; the client may see the 413 or,
    # still sending, the reset of the closed connection.
    assert all(a.startswith("HTTP/1.1 413") or a == "reset" for a in chunked_answers)
    assert all(a.startswith("HTTP/1.1 401") for a in unauthenticated_answers)
    assert health == "HTTP/1.1 200 OK"
    assert rss_after - rss_before < 32 * 1024  # KiB: no 5 MiB copy per request kept


# --- the per-target processes, as Cloud Run runs them ---------------------------------
#
# `functions-framework --target T --source main.py`, one process per target. No API
# server is configured (KUBECONFIG names no file), so any request that built a client
# would answer 500: a 2xx or a refusal proves none was.

TARGETS = ("release", "wake", "sweep", "ingest")
INGEST_DOORS = ("/registry", "/kubernetes/audit", "/pubsub")


@contextlib.contextmanager
def _processes(
    names: tuple[str, ...], env_extra: dict[str, str], tmp: Path
) -> Iterator[dict[str, int]]:
    from devstack.processes import free_port

    cli = str(Path(sys.executable).parent / "functions-framework")
    env = {k_: v for k_, v in os.environ.items() if not k_.startswith("COCOON_")}
    env |= (
        DOOR_ENV
        | {
            "KUBECONFIG": str(tmp / "absent"),
            "COCOON_REGISTRY_BASE": "127.0.0.1:9/unused",
            "COCOON_NAMESPACES": NS,
            "COCOON_OPERATOR": "absent",
            "COCOON_LOG_FORMAT": "json",
        }
        | env_extra
    )
    ports = {t: free_port() for t in names}
    procs = [
        subprocess.Popen(
            [cli, "--target", t, "--source", str(REPO_ROOT / "main.py"), "--port", str(ports[t])],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        for t in names
    ]
    try:
        deadline = time.monotonic() + 60
        for port in ports.values():
            while True:
                try:
                    _raw_post(port, "GET / HTTP/1.1\r\nHost: x\r\n\r\n", iter(()))
                    break
                except ConnectionRefusedError:
                    assert time.monotonic() < deadline, "a target did not start"
                    time.sleep(0.2)
        yield ports
    finally:
        for proc in procs:
            os.killpg(proc.pid, signal.SIGTERM)
        for proc in procs:
            proc.wait(timeout=30)


@pytest.fixture(scope="module")
def targets(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, int]]:
    with _processes(TARGETS, {}, tmp_path_factory.mktemp("none")) as ports:
        yield ports


def _head(path: str, headers: dict[str, str], length: int) -> str:
    lines = "".join(f"{key}: {value}\r\n" for key, value in headers.items())
    return f"POST {path} HTTP/1.1\r\nHost: x\r\n{lines}Content-Length: {length}\r\n\r\n"


def _ingest_credentials() -> list[Any]:
    cases = []
    for door in INGEST_DOORS:
        _, others = ROUTES[door]
        for i, token in enumerate([None, "x" * 40, *others]):
            cases.append(pytest.param(door, token, id=f"{door}-{i}"))
    return cases


@pytest.mark.parametrize(("door", "token"), _ingest_credentials())
def test_ingest_process_refuses_a_missing_or_foreign_credential_before_the_body(
    targets: dict[str, int], door: str, token: str | None
) -> None:
    headers = {"Content-Type": "application/json"} | ({} if token is None else _bearer(token))
    # Headers only, 5 MiB announced: the answer comes without a byte of the body.
    answer = _raw_post(targets["ingest"], _head(door, headers, FIVE_MIB), iter(()))
    assert answer.startswith("HTTP/1.1 401"), answer


@pytest.mark.parametrize("door", INGEST_DOORS)
def test_ingest_process_refuses_five_mib_and_keeps_answering(
    targets: dict[str, int], door: str
) -> None:
    port = targets["ingest"]
    headers = {"Content-Type": "application/json"} | _bearer(ROUTES[door][0])
    assert _raw_post(port, _head(door, headers, FIVE_MIB), iter(())).startswith("HTTP/1.1 413")
    chunked = _head(door, headers | {"Transfer-Encoding": "chunked"}, 0).replace(
        "Content-Length: 0\r\n", ""
    )
    piece = b" " * 65536
    chunks = (b"%x\r\n%s\r\n" % (len(piece), piece) for _ in range(FIVE_MIB // 65536))
    answer = _raw_post(port, chunked, chunks)
    assert answer.startswith("HTTP/1.1 413") or answer == "reset", answer
    empty = json.dumps({"events": []}).encode()
    ok = _head("/registry", {"Content-Type": "application/json"} | _bearer(TOKEN), len(empty))
    assert _raw_post(port, ok, iter([empty])).startswith("HTTP/1.1 2")


def _event(event_type: str, namespace: str) -> tuple[str, bytes]:
    event = CloudEvent(
        {"type": event_type, "source": "//tests/hostile", "id": "t-1"},
        {"namespace": namespace, "name": SET},
    )
    headers, body = to_binary(event)
    return _head("/", dict(headers), len(body)), body


@pytest.mark.parametrize("target", ["release", "wake", "sweep"])
def test_a_target_drops_what_it_does_not_take_without_any_client(
    targets: dict[str, int], target: str
) -> None:
    """Another namespace than COCOON_NAMESPACES, or another target's event: acknowledged, inert."""
    port = targets[target]
    outside = _event(k.CE_WAKE_REQUESTED, OTHER_NS)
    foreign = _event(k.CE_SNAPSHOT_PUSHED if target != "release" else k.CE_SWEEP_REQUESTED, NS)
    for head, body in (outside, foreign):
        answer = _raw_post(port, head, iter([body]))
        assert answer.startswith("HTTP/1.1 2"), (target, answer)


@pytest.mark.parametrize("target", ["release", "wake", "sweep"])
def test_a_target_answers_a_nested_body_with_a_clean_400(
    targets: dict[str, int], target: str
) -> None:
    nested = b'{"a":' * 100_000 + b"1" + b"}" * 100_000
    head = _head("/", {"Content-Type": "application/cloudevents+json"}, len(nested))
    answer = _raw_post(targets[target], head, iter([nested]))
    assert answer.startswith("HTTP/1.1 400"), answer


@pytest.mark.parametrize("target", ["release", "wake", "sweep"])
def test_a_target_refuses_five_mib_before_reading_it(targets: dict[str, int], target: str) -> None:
    head = _head("/", {"Content-Type": "application/cloudevents+json"}, FIVE_MIB)
    assert _raw_post(targets[target], head, iter(())).startswith("HTTP/1.1 413")
    # Still answering: a real event after the refusal is acknowledged.
    ok_head, body = _event(k.CE_WAKE_REQUESTED, OTHER_NS)
    assert _raw_post(targets[target], ok_head, iter([body])).startswith("HTTP/1.1 2")


# --- the per-target processes checking credentials themselves (COCOON_TARGET_AUTH=doors) ---
#
# Default: the platform in front (Cloud Run IAM, Eventarc) and no credential here, as
# above. With the setting, each CloudEvent target takes its door's credentials as `serve`
# does; the cluster's callers are listed too, so a JWT naming no listed account is tried.

LISTED = "system:serviceaccount:cocoon-system:cocoon-wake-oidc-sources.knative.dev-apiserversource"


@pytest.fixture(scope="module")
def guarded_targets(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, int]]:
    extra = {
        "COCOON_TARGET_AUTH": "doors",
        "COCOON_CLUSTER_AUDIENCE": "cocoon-hibernation",
        "COCOON_CLUSTER_CALLERS": f"{LISTED}=wake",
    }
    with _processes(("release", "wake", "sweep"), extra, tmp_path_factory.mktemp("none")) as ports:
        yield ports


def _unlisted_jwt() -> str:
    claims = base64.urlsafe_b64encode(json.dumps({"sub": "system:serviceaccount:t:x"}).encode())
    return "eyJhbGciOiJSUzI1NiJ9." + claims.decode().rstrip("=") + ".c2ln"


def _target_credentials() -> list[Any]:
    cases = []
    for target in ("release", "wake", "sweep"):
        _, others = ROUTES[f"/{target}"]
        for i, token in enumerate([None, "x" * 40, _unlisted_jwt(), *others]):
            cases.append(pytest.param(target, token, id=f"{target}-{i}"))
    return cases


@pytest.mark.parametrize(("target", "token"), _target_credentials())
def test_with_target_auth_a_target_refuses_a_missing_or_foreign_credential_before_the_body(
    guarded_targets: dict[str, int], target: str, token: str | None
) -> None:
    head, _ = _event(k.CE_WAKE_REQUESTED, NS)
    auth = "" if token is None else f"Authorization: Bearer {token}\r\n"
    # 5 MiB announced and never sent: the answer comes on the headers alone, and with no
    # API server configured, nothing could have been changed.
    head = re.sub(r"Content-Length: \d+", f"{auth}Content-Length: {FIVE_MIB}", head)
    assert _raw_post(guarded_targets[target], head, iter(())).startswith("HTTP/1.1 401")
    as_extension = head.replace("Authorization: Bearer ", "ce-cocoonauth: ") if token else head
    assert _raw_post(guarded_targets[target], as_extension, iter(())).startswith("HTTP/1.1 401")


@pytest.mark.parametrize("target", ["release", "wake", "sweep"])
def test_with_target_auth_its_own_credential_opens_a_target(
    guarded_targets: dict[str, int], target: str
) -> None:
    head, body = _event(k.CE_WAKE_REQUESTED, OTHER_NS)  # outside COCOON_NAMESPACES: inert
    token, _ = ROUTES[f"/{target}"]
    head = head.replace("Content-Length", f"Authorization: Bearer {token}\r\nContent-Length")
    assert _raw_post(guarded_targets[target], head, iter([body])).startswith("HTTP/1.1 2")
