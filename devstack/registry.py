"""A real CNCF Distribution server for tests, benchmarks and the demo, and a tiny pusher.

`DistributionServer` runs `docker-registry serve CONFIG` (Debian's build of
distribution 2.8.2; a `registry` binary from distribution/distribution on PATH works
too) on 127.0.0.1 with a free port and a throw-away storage directory. It never touches
the system service. Options mirror what production deployments configure:

- notifications to an endpoint (`Authorization: [Bearer TOKEN]`), with the media-type
  workaround (docs/design.md#ignore-actions) switchable (`ignore_blob_events`): off by default so
  tests see blob pushes; on, it drops blob events (and pulls) as a production config would;
- htpasswd basic auth (bcrypt, as Distribution requires);
- token auth, against :class:`TokenServer`: a small JWT issuer signing RS256 with a
  self-signed certificate that the registry trusts through `rootcertbundle`.

`push_image` pushes a real, tiny OCI image (one uncompressed tar layer, a config, an
OCI image manifest) through the HTTP API: it is what the simulated vk-cocoon uses to
push `<vm>:hibernate`, so it reuses connections and answers bearer challenges itself.

Invariants: `stop()` leaves no process and no directory behind; the child is also
told to die with its parent (Linux `PR_SET_PDEATHSIG`) so a killed test run leaves
no orphan registry listening.
"""

from __future__ import annotations

import base64
import hashlib
import io
import json
import os
import secrets
import shutil
import socket
import subprocess
import tarfile
import tempfile
import threading
import time
import urllib.parse
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import TracebackType
from typing import Any

import requests
import yaml

from devstack.processes import die_with_parent, free_port
from shared.clients.registry_auth import parse_challenge, token_of

OCI_MANIFEST = "application/vnd.oci.image.manifest.v1+json"
OCI_CONFIG = "application/vnd.oci.image.config.v1+json"
OCI_LAYER_TAR = "application/vnd.oci.image.layer.v1.tar"

_BINARIES = ("docker-registry", "registry")
_DEBIAN_PATH = "/usr/bin/docker-registry"


class RegistryBinaryMissing(RuntimeError):
    """No Distribution binary on this machine."""


class RegistryStartError(RuntimeError):
    """The Distribution process did not come up."""


def find_registry_binary() -> str | None:
    """Path of a Distribution server binary: `docker-registry` (Debian), else `registry`."""
    for name in _BINARIES:
        found = shutil.which(name)
        if found:
            return found
    return _DEBIAN_PATH if os.access(_DEBIAN_PATH, os.X_OK) else None


# --------------------------------------------------------------------------- token auth


@dataclass(frozen=True, slots=True)
class TokenAuthConfig:
    """The registry's `auth.token` section."""

    realm: str
    service: str
    issuer: str
    rootcertbundle: Path


@dataclass(slots=True)
class TokenRequest:
    """One request the token server received (tests count and inspect them)."""

    scopes: list[str]
    service: str | None
    account: str | None
    authorized: bool


def _b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


class TokenServer:
    """A Docker-token-spec issuer on 127.0.0.1, for the registry's `auth.token` mode.

    Grants every requested action (it is a test double for the *issuer*, not for
    authorization policy) to callers with the right basic credentials, or to anyone
    when `users` is None. Answers carry `expires_in` (seconds) and `issued_at`.
    """

    def __init__(
        self,
        *,
        service: str = "cocoon-registry",
        issuer: str = "cocoon-test-issuer",
        users: Mapping[str, str] | None = None,
        expires_in: int = 300,
    ) -> None:
        self.service = service
        self.issuer = issuer
        self.users = dict(users) if users is not None else None
        self.expires_in = expires_in
        self.requests: list[TokenRequest] = []
        self._lock = threading.Lock()
        self._dir: Path | None = None
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None
        self._key: Any = None
        self._x5c = ""

    @property
    def realm(self) -> str:
        assert self._server is not None, "TokenServer is not started"
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}/token"

    def auth_config(self) -> TokenAuthConfig:
        assert self._dir is not None, "TokenServer is not started"
        return TokenAuthConfig(
            realm=self.realm,
            service=self.service,
            issuer=self.issuer,
            rootcertbundle=self._dir / "root.pem",
        )

    def _make_cert(self) -> None:
        # cryptography and bcrypt are dev dependencies: imported where used, so a
        # plain no-auth server works on an install without them.
        from cryptography.hazmat.primitives import serialization  # noqa: PLC0415
        from cryptography.hazmat.primitives.asymmetric import rsa  # noqa: PLC0415

        from devstack.certs import self_signed_ca  # noqa: PLC0415

        assert self._dir is not None
        key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        cert = self_signed_ca(key, self.issuer, valid=timedelta(days=7))
        (self._dir / "root.pem").write_bytes(cert.public_bytes(serialization.Encoding.PEM))
        self._key = key
        # The registry verifies the signing certificate (x5c, standard base64 DER)
        # against rootcertbundle; a self-signed leaf in the bundle is its own chain.
        self._x5c = base64.b64encode(cert.public_bytes(serialization.Encoding.DER)).decode()

    def issue(self, *, subject: str, scopes: list[str], now: float | None = None) -> str:
        """Sign a JWT granting every action of `scopes` (`repository:NAME:a,b` each)."""
        from cryptography.hazmat.primitives import hashes  # noqa: PLC0415
        from cryptography.hazmat.primitives.asymmetric import padding  # noqa: PLC0415

        issued = time.time() if now is None else now
        access: list[dict[str, object]] = []
        for scope in scopes:
            kind, _, rest = scope.partition(":")
            name, _, actions = rest.rpartition(":")
            if kind and name:
                access.append(
                    {"type": kind, "name": name, "actions": [a for a in actions.split(",") if a]}
                )
        header = {"typ": "JWT", "alg": "RS256", "x5c": [self._x5c]}
        claims = {
            "iss": self.issuer,
            "sub": subject,
            "aud": self.service,
            "iat": int(issued),
            "nbf": int(issued) - 5,
            "exp": int(issued) + self.expires_in,
            "jti": secrets.token_hex(8),
            "access": access,
        }
        signing_input = (
            _b64url(json.dumps(header, separators=(",", ":")).encode())
            + "."
            + _b64url(json.dumps(claims, separators=(",", ":")).encode())
        )
        signature = self._key.sign(signing_input.encode(), padding.PKCS1v15(), hashes.SHA256())
        return signing_input + "." + _b64url(signature)

    def _check_basic(self, header: str | None) -> tuple[bool, str | None]:
        if not header or not header.lower().startswith("basic "):
            return False, None
        try:
            user, _, password = base64.b64decode(header[6:].strip()).decode().partition(":")
        except (ValueError, UnicodeDecodeError):
            return False, None
        ok = self.users is not None and self.users.get(user) == password
        return ok, user

    def start(self) -> TokenServer:
        self._dir = Path(tempfile.mkdtemp(prefix="cocoon-token-"))
        self._make_cert()
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:
                return

            def do_GET(self) -> None:
                url = urllib.parse.urlsplit(self.path)
                if url.path != "/token":
                    self.send_error(404)
                    return
                query = urllib.parse.parse_qs(url.query)
                scopes = [s for value in query.get("scope", []) for s in value.split(" ") if s]
                authorized, user = outer._check_basic(self.headers.get("Authorization"))
                with outer._lock:
                    outer.requests.append(
                        TokenRequest(
                            scopes=scopes,
                            service=next(iter(query.get("service", [])), None),
                            account=next(iter(query.get("account", [])), None),
                            authorized=authorized,
                        )
                    )
                if outer.users is not None and not authorized:
                    self.send_response(401)
                    self.send_header("WWW-Authenticate", 'Basic realm="token"')
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                now = time.time()
                token = outer.issue(subject=user or "anonymous", scopes=scopes, now=now)
                body = json.dumps(
                    {
                        "token": token,
                        "access_token": token,
                        "expires_in": outer.expires_in,
                        "issued_at": datetime.fromtimestamp(now, UTC).isoformat(),
                    }
                ).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
        if self._dir is not None:
            shutil.rmtree(self._dir, ignore_errors=True)
            self._dir = None

    def __enter__(self) -> TokenServer:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()


# --------------------------------------------------------------------------- the server


@dataclass
class DistributionServer:
    """One Distribution process on 127.0.0.1 (see the module docstring)."""

    notify_url: str | None = None
    notify_token: str | None = None
    ignore_blob_events: bool = False
    htpasswd: Mapping[str, str] | None = None
    token_auth: TokenAuthConfig | None = None
    notify_timeout: str = "2s"
    notify_threshold: int = 5
    notify_backoff: str = "1s"
    startup_timeout: float = 15.0
    binary: str | None = None
    port: int = 0
    _dir: Path | None = field(default=None, init=False, repr=False)
    _proc: subprocess.Popen[bytes] | None = field(default=None, init=False, repr=False)

    @property
    def host(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def url(self) -> str:
        return f"http://{self.host}"

    @property
    def storage_dir(self) -> Path:
        assert self._dir is not None, "DistributionServer is not started"
        return self._dir / "storage"

    @property
    def log_path(self) -> Path:
        assert self._dir is not None, "DistributionServer is not started"
        return self._dir / "registry.log"

    def config(self) -> dict[str, Any]:
        """The registry's config.yml as a dict (written on start)."""
        assert self._dir is not None
        cfg: dict[str, Any] = {
            "version": 0.1,
            "log": {"level": "warn", "accesslog": {"disabled": True}},
            "storage": {
                "filesystem": {"rootdirectory": str(self.storage_dir)},
                "delete": {"enabled": True},
                # No `cache` section on purpose: a cached blob descriptor can outlive
                # a delete. Upload purging is a background sweep tests do not need.
                "maintenance": {"uploadpurging": {"enabled": False}},
            },
            "http": {
                "addr": self.host,
                "secret": secrets.token_hex(16),
                "headers": {"X-Content-Type-Options": ["nosniff"]},
            },
        }
        if self.htpasswd is not None and self.token_auth is not None:
            raise ValueError("choose one of htpasswd and token_auth")
        if self.htpasswd is not None:
            import bcrypt  # noqa: PLC0415  (dev dependency, see _make_cert)

            lines = [
                f"{user}:{bcrypt.hashpw(pw.encode(), bcrypt.gensalt(rounds=4)).decode()}"
                for user, pw in self.htpasswd.items()
            ]
            path = self._dir / "htpasswd"
            path.write_text("\n".join(lines) + "\n")
            cfg["auth"] = {"htpasswd": {"realm": "cocoon-registry", "path": str(path)}}
        if self.token_auth is not None:
            t = self.token_auth
            cfg["auth"] = {
                "token": {
                    "realm": t.realm,
                    "service": t.service,
                    "issuer": t.issuer,
                    "rootcertbundle": str(t.rootcertbundle),
                }
            }
        if self.notify_url:
            endpoint: dict[str, Any] = {
                "name": "cocoon-hibernation",
                "disabled": False,
                "url": self.notify_url,
                "timeout": self.notify_timeout,
                "threshold": self.notify_threshold,
                "backoff": self.notify_backoff,
            }
            if self.notify_token:
                # Header values are lists in Distribution's config.
                endpoint["headers"] = {"Authorization": [f"Bearer {self.notify_token}"]}
            if self.ignore_blob_events:
                # 2.8 ignores `ignore.actions` unless a media type (docs/design.md#ignore-actions)
                # is listed too; this one also drops blob pushes (octet-stream).
                endpoint["ignoredmediatypes"] = ["application/octet-stream"]
                endpoint["ignore"] = {"mediatypes": [], "actions": ["pull"]}
            cfg["notifications"] = {
                "events": {"includereferences": True},
                "endpoints": [endpoint],
            }
        return cfg

    def start(self) -> DistributionServer:
        binary = self.binary or find_registry_binary()
        if binary is None:
            raise RegistryBinaryMissing(
                "no CNCF Distribution server: install the Debian package 'docker-registry' "
                "(/usr/bin/docker-registry) or put a 'registry' binary on PATH"
            )
        self.binary = binary
        self._dir = Path(tempfile.mkdtemp(prefix="cocoon-registry-"))
        self.storage_dir.mkdir()
        fixed_port = self.port != 0
        last_error = ""
        # A free port can be taken between our probe and the bind: try a few.
        for _ in range(1 if fixed_port else 4):
            if not fixed_port:
                self.port = free_port()
            cfg_path = self._dir / "config.yml"
            cfg_path.write_text(yaml.safe_dump(self.config(), sort_keys=False))
            with open(self.log_path, "wb") as log_file:
                self._proc = subprocess.Popen(
                    [binary, "serve", str(cfg_path)],
                    stdout=log_file,
                    stderr=subprocess.STDOUT,
                    stdin=subprocess.DEVNULL,
                    preexec_fn=die_with_parent,  # noqa: PLW1509
                )
            if self._wait_ready():
                return self
            last_error = self._log_tail()
            self._kill()
        self.stop()
        raise RegistryStartError(f"{binary} did not answer GET /v2/ on {self.host}:\n{last_error}")

    def _wait_ready(self) -> bool:
        assert self._proc is not None
        deadline = time.monotonic() + self.startup_timeout
        while time.monotonic() < deadline:
            if self._proc.poll() is not None:
                return False
            try:
                # Any HTTP answer (200, or 401 under auth) means it serves the API.
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.5) as s:
                    s.sendall(b"GET /v2/ HTTP/1.0\r\nHost: " + self.host.encode() + b"\r\n\r\n")
                    if s.recv(12).startswith(b"HTTP/"):
                        return True
            except OSError:
                pass
            time.sleep(0.02)
        return False

    def _log_tail(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-2000:]
        except OSError:
            return ""

    def _kill(self) -> None:
        proc, self._proc = self._proc, None
        if proc is None:
            return
        if proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=5)

    def stop(self) -> None:
        self._kill()
        if self._dir is not None:
            shutil.rmtree(self._dir, ignore_errors=True)
            self._dir = None

    @property
    def running(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    def __enter__(self) -> DistributionServer:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()


# --------------------------------------------------------------------------- push_image


class PushError(RuntimeError):
    """The registry refused a step of a push (the message names the step and status)."""


_local = threading.local()


def _session() -> requests.Session:
    # One session per thread: the simulator pushes from several threads, and a
    # Session's connection pool is reused across pushes (keep-alive).
    s: requests.Session | None = getattr(_local, "session", None)
    if s is None:
        s = requests.Session()
        _local.session = s
    return s


def _digest(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


def _layer_tar(payload: bytes) -> bytes:
    """A deterministic one-file tar: the same payload always gives the same digest."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.USTAR_FORMAT) as tar:
        info = tarfile.TarInfo("hibernate/snapshot.bin")
        info.size = len(payload)
        info.mtime = 0
        info.mode = 0o644
        tar.addfile(info, io.BytesIO(payload))
    return buf.getvalue()


@dataclass
class _Pusher:
    base_url: str
    repository: str
    auth: tuple[str, str] | None
    timeout: float
    token: str | None = None

    def request(
        self,
        method: str,
        url: str,
        *,
        params: dict[str, str] | None = None,
        data: bytes | None = None,
        headers: dict[str, str] | None = None,
    ) -> requests.Response:
        sess = _session()
        for attempt in range(2):
            hdrs = dict(headers or {})
            basic = self.auth
            if self.token is not None:
                hdrs["Authorization"] = f"Bearer {self.token}"
                basic = None
            resp = sess.request(
                method,
                url,
                params=params,
                data=data,
                headers=hdrs,
                auth=basic,
                timeout=self.timeout,
            )
            if resp.status_code != 401 or attempt:
                return resp
            challenge = parse_challenge(resp.headers.get("WWW-Authenticate"))
            if challenge is None or challenge.scheme != "bearer" or not challenge.realm:
                return resp
            # Ask for push and pull on the whole repository once: every later step is covered.
            query = {
                "scope": f"repository:{self.repository}:pull,push",
                "service": challenge.service or "",
            }
            tok = sess.get(challenge.realm, params=query, auth=self.auth, timeout=self.timeout)
            if tok.status_code != 200:
                raise PushError(f"token server {challenge.realm} answered {tok.status_code}")
            self.token = token_of(tok.json())
            if self.token is None:
                raise PushError(f"token server {challenge.realm} sent no token")
        raise AssertionError("unreachable")

    def upload_blob(self, data: bytes) -> tuple[str, int]:
        digest = _digest(data)
        start = self.request("POST", f"{self.base_url}/v2/{self.repository}/blobs/uploads/")
        if start.status_code != 202:
            raise PushError(f"start upload: {start.status_code} {start.text[:200]}")
        location = urllib.parse.urljoin(self.base_url + "/", start.headers["Location"])
        sep = "&" if "?" in location else "?"
        put = self.request(
            "PUT",
            f"{location}{sep}{urllib.parse.urlencode({'digest': digest})}",
            data=data,
            headers={"Content-Type": "application/octet-stream"},
        )
        if put.status_code != 201:
            raise PushError(f"finish upload of {digest}: {put.status_code} {put.text[:200]}")
        return digest, len(data)


def image_manifest(payload: bytes) -> tuple[bytes, list[bytes]]:
    """The OCI manifest of the tiny image for `payload`, and the blobs it references."""
    layer = _layer_tar(payload)
    layer_digest = _digest(layer)
    config = json.dumps(
        {
            "architecture": "amd64",
            "os": "linux",
            "config": {},
            "rootfs": {"type": "layers", "diff_ids": [layer_digest]},
        },
        sort_keys=True,
        separators=(",", ":"),
    ).encode()
    manifest = json.dumps(
        {
            "schemaVersion": 2,
            "mediaType": OCI_MANIFEST,
            "config": {"mediaType": OCI_CONFIG, "digest": _digest(config), "size": len(config)},
            "layers": [{"mediaType": OCI_LAYER_TAR, "digest": layer_digest, "size": len(layer)}],
        },
        sort_keys=True,
        separators=(",", ":"),
    ).encode()
    return manifest, [config, layer]


def push_image(
    base_url: str,
    repository: str,
    tag: str,
    *,
    payload: bytes = b"cocoon hibernate snapshot\n",
    auth: tuple[str, str] | None = None,
    timeout: float = 10.0,
) -> str:
    """Push a tiny real OCI image as `repository:tag`; return the manifest digest.

    Five requests: two blob uploads (POST then monolithic PUT each) and the manifest
    PUT. `auth` is basic credentials, used directly (htpasswd) or to fetch a bearer
    token when the registry challenges with one (token auth).
    """
    base = base_url.rstrip("/")
    pusher = _Pusher(base_url=base, repository=repository, auth=auth, timeout=timeout)
    manifest, blobs = image_manifest(payload)
    for blob in blobs:
        pusher.upload_blob(blob)
    put = pusher.request(
        "PUT",
        f"{base}/v2/{repository}/manifests/{tag}",
        data=manifest,
        headers={"Content-Type": OCI_MANIFEST},
    )
    if put.status_code != 201:
        raise PushError(f"put manifest {repository}:{tag}: {put.status_code} {put.text[:300]}")
    digest = put.headers.get("Docker-Content-Digest") or _digest(manifest)
    return digest


def tag_manifest(
    base_url: str,
    repository: str,
    digest: str,
    tag: str,
    *,
    auth: tuple[str, str] | None = None,
    timeout: float = 10.0,
) -> None:
    """Point another tag at an existing manifest (GET by digest, PUT under `tag`)."""
    base = base_url.rstrip("/")
    pusher = _Pusher(base_url=base, repository=repository, auth=auth, timeout=timeout)
    got = pusher.request(
        "GET", f"{base}/v2/{repository}/manifests/{digest}", headers={"Accept": OCI_MANIFEST}
    )
    if got.status_code != 200:
        raise PushError(f"get manifest {repository}@{digest}: {got.status_code}")
    put = pusher.request(
        "PUT",
        f"{base}/v2/{repository}/manifests/{tag}",
        data=got.content,
        headers={"Content-Type": got.headers.get("Content-Type", OCI_MANIFEST)},
    )
    if put.status_code != 201:
        raise PushError(f"tag {repository}:{tag}: {put.status_code} {put.text[:300]}")


def wait_until(check: Callable[[], bool], *, timeout: float = 5.0, interval: float = 0.02) -> bool:
    """Poll `check` until it is true or `timeout` passes (for event-delivery waits)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return True
        time.sleep(interval)
    return check()
