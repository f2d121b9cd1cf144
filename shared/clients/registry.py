"""The OCI registry client release and wake use: HEAD a manifest, resolve a tag, drop a tag. An
error is never read as "absent" nor "present" (401/403 RegistryAuthError, 429/5xx/timeouts
RegistryError); no library exception leaves, and the libraries load on first use (cold start)."""

from __future__ import annotations

import base64
import hashlib
import re
import threading
import time
import urllib.parse
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from shared import constants, log
from shared.clients.cache import ProcessCache
from shared.clients.registry_auth import (
    Challenge,
    parse_challenge,
    realm_allowed,
    token_expiry,
    token_of,
)
from shared.config import RegistryAuth, Settings
from shared.errors import ConfigError, RegistryAuthError, RegistryError
from shared.names import check_digest, check_repository, check_tag

if TYPE_CHECKING:
    import requests

# What a HEAD accepts: a snapshot is pushed as an OCI or Docker manifest, and a
# multi-arch push would make it an index/list; any of them means "present".
MANIFEST_ACCEPT = (
    "application/vnd.oci.image.manifest.v1+json, application/vnd.oci.image.index.v1+json, "
    "application/vnd.docker.distribution.manifest.v2+json, "
    "application/vnd.docker.distribution.manifest.list.v2+json"
)
CONNECT_TIMEOUT = 2.0
READ_TIMEOUT = 5.0
GOOGLE_SCOPE = "https://www.googleapis.com/auth/cloud-platform"
GOOGLE_BASIC_USER = "oauth2accesstoken"
# The page size asked of `tags/list`; Distribution may answer with fewer and a Link.
TAGS_PAGE = 100
_ECR_AUTH_CODES = frozenset(
    {"AccessDeniedException", "UnrecognizedClientException", "InvalidSignatureException"}
    | {"ExpiredTokenException", "InvalidClientTokenId"}
)
_ECR_HOST = re.compile(
    r"^(?P<account>\d{12})\.dkr\.ecr(?:-fips)?\.(?P<region>[a-z0-9-]+)\.amazonaws\.com(?:\.cn)?$"
)


@dataclass(frozen=True, slots=True)
class ManifestInfo:
    """A manifest the registry answered for `repository:reference`."""

    repository: str
    reference: str  # the tag or digest asked for
    digest: str
    media_type: str | None = None
    size: int | None = None


class RegistryClient:
    """One registry's client, one per process (:func:`get_client`); tests pass `ecr_client`
    and `clock`."""

    def __init__(
        self, settings: Settings, *, ecr_client: Any = None, clock: Callable[[], float] = time.time
    ) -> None:
        self.settings = settings
        self._session: requests.Session | None = None
        self._ecr = ecr_client
        self._clock = clock
        self._timeout = (CONNECT_TIMEOUT, READ_TIMEOUT)
        self._lock = threading.Lock()
        self._tokens: dict[tuple[str, str, str], tuple[str, float]] = {}  # token, expiry
        self._challenges: dict[tuple[str, str], Challenge] = {}
        self._google_creds: Any = None
        self.requests_made = 0  # HTTP requests and ECR API calls, token fetches included

    def head_manifest(self, repository: str, tag_or_digest: str) -> ManifestInfo | None:
        """The manifest `repository:tag_or_digest` names, or None when the registry says 404."""
        repo = check_repository(repository)
        ref = check_digest(tag_or_digest) if ":" in tag_or_digest else check_tag(tag_or_digest)
        if self.settings.registry_auth is RegistryAuth.ECR:
            return self._ecr_describe(repo, ref)
        resp = self._manifest("HEAD", repo, ref)
        if resp is None:
            return None
        digest = resp.headers.get("Docker-Content-Digest")
        if not digest:
            # Not every registry sends the header on HEAD: the digest is the body's hash.
            got = self._manifest("GET", repo, ref)
            if got is None:
                return None
            digest = got.headers.get("Docker-Content-Digest") or (
                "sha256:" + hashlib.sha256(got.content).hexdigest()
            )
        length = resp.headers.get("Content-Length")
        return ManifestInfo(
            repository=repo,
            reference=ref,
            digest=check_digest(digest),
            media_type=(resp.headers.get("Content-Type") or "").split(";")[0].strip() or None,
            size=int(length) if length and length.isdigit() else None,
        )

    def _manifest(self, method: str, repo: str, ref: str) -> requests.Response | None:
        """The manifest's answer, None on 404 (any other error raises)."""
        resp = self._http(method, repo, f"manifests/{ref}", headers={"Accept": MANIFEST_ACCEPT})
        if resp.status_code == 404:
            return None
        self._raise_for_status(resp, f"{method} {repo}:{ref}")
        return resp

    def resolve_digest(self, repository: str, tag: str) -> str | None:
        info = self.head_manifest(repository, check_tag(tag))
        return info.digest if info else None

    def list_tags(self, repository: str) -> list[str]:
        """Every tag of `repository` (all pages); [] when the repository does not exist."""
        repo = check_repository(repository)
        if self.settings.registry_auth is RegistryAuth.ECR:
            raise ConfigError("list_tags is not used with COCOON_REGISTRY_AUTH=ecr")
        tags: list[str] = []
        path = f"tags/list?n={TAGS_PAGE}"
        for _ in range(1000):  # a bound, not a limit anyone reaches
            resp = self._http("GET", repo, path)
            if resp.status_code == 404:
                return tags
            self._raise_for_status(resp, f"GET {repo} tags")
            try:
                body = resp.json()
            except ValueError as err:
                raise RegistryError(f"tags of {repo}: the registry sent invalid JSON") from err
            page = body.get("tags") if isinstance(body, dict) else None
            tags.extend(t for t in (page or []) if isinstance(t, str))
            nxt = resp.links.get("next", {}).get("url")
            if not nxt:
                return tags
            target = urllib.parse.urlsplit(nxt)
            prefix = f"/v2/{repo}/"
            if not target.path.startswith(prefix):
                raise RegistryError(f"tags of {repo}: unexpected pagination link {nxt!r}")
            path = target.path[len(prefix) :] + (f"?{target.query}" if target.query else "")
        raise RegistryError(f"tags of {repo}: too many pages")

    def delete_tag(self, repository: str, tag: str) -> bool:
        """Remove `repository:tag`: True when gone (or already); False (logged) when another
        tag names the manifest, since Distribution deletes manifests, not tags (a tag pushed
        between the check and the DELETE is a race the HTTP API cannot close)."""
        repo = check_repository(repository)
        check_tag(tag)
        if self.settings.registry_auth is RegistryAuth.ECR:
            return self._ecr_delete_tag(repo, tag)
        digest = self.resolve_digest(repo, tag)
        if digest is None:
            return True
        for other in self.list_tags(repo):
            if other != tag and self.resolve_digest(repo, other) == digest:
                log.warning(
                    "registry tag kept: its manifest is shared with another tag",
                    repository=repo,
                    tag=tag,
                    other_tag=other,
                    digest=digest,
                    why="Distribution deletes manifests, not tags; deleting would remove "
                    f"{repo}:{other} too",
                )
                return False
        resp = self._http("DELETE", repo, f"manifests/{digest}")
        if resp.status_code == 405:
            raise ConfigError(
                f"registry {self._host()} refuses manifest deletes (405): enable "
                "storage.delete in the registry's configuration"
            )
        if resp.status_code != 404:  # already gone
            self._raise_for_status(resp, f"DELETE {repo}@{digest}")
        if self.resolve_digest(repo, tag) is None:
            return True
        # A registry that keeps a tag apart from its manifest (OCI 1.1 lets a client
        # untag by name) still resolves it: delete the tag itself, then look again.
        resp = self._http("DELETE", repo, f"manifests/{tag}")
        if resp.status_code not in (400, 404, 405):
            self._raise_for_status(resp, f"DELETE {repo}:{tag}")
        if self.resolve_digest(repo, tag) is None:
            return True
        log.warning(
            "registry tag kept after its manifest was deleted",
            repository=repo,
            tag=tag,
            status=resp.status_code,
            why="the registry keeps tags apart from manifests and refused to delete the tag",
        )
        return False

    def snapshot_present(self, vm_name: str) -> bool:
        """Whether `<base>/<vm_name>:hibernate` exists (errors raise, never read as False)."""
        repo = self.settings.require_registry().repository(vm_name)
        return self.head_manifest(repo, constants.TAG_HIBERNATE) is not None

    def drop_snapshot(self, vm_name: str) -> bool:
        """Remove the `:hibernate` tag of `vm_name` (see :meth:`delete_tag`)."""
        repo = self.settings.require_registry().repository(vm_name)
        return self.delete_tag(repo, constants.TAG_HIBERNATE)

    def close(self) -> None:
        if self._session is not None:
            self._session.close()
            self._session = None

    def _host(self) -> str:
        return self.settings.require_registry().host

    def _sess(self) -> requests.Session:
        with self._lock:
            if self._session is not None:
                return self._session
            import requests  # noqa: PLC0415  (cold start: only loaded when the registry is used)
            from requests.adapters import HTTPAdapter  # noqa: PLC0415

            sess = requests.Session()
            # No urllib3 retries: a retry is the platform's redelivery, decided upstream.
            adapter = HTTPAdapter(pool_connections=2, pool_maxsize=8, max_retries=0)
            sess.mount("https://", adapter)
            sess.mount("http://", adapter)
            sess.headers["User-Agent"] = "cocoon-hibernation"
            self._session = sess
        return self._session

    def _send(
        self,
        method: str,
        url: str,
        *,
        headers: Mapping[str, str],
        params: Mapping[str, str] | None = None,
        auth: tuple[str, str] | None = None,
        what: str,
    ) -> requests.Response:
        import requests  # noqa: PLC0415  (already loaded by _sess; a dict lookup)

        sess = self._sess()
        with self._lock:
            self.requests_made += 1
        try:
            return sess.request(
                method,
                url,
                headers=dict(headers),
                params=params,
                auth=auth,
                timeout=self._timeout,
                allow_redirects=method in ("GET", "HEAD"),
            )
        except requests.Timeout as err:
            raise RegistryError(f"{what}: the registry timed out ({url})") from err
        except requests.ConnectionError as err:
            raise RegistryError(f"{what}: cannot reach {url}: {err}") from err
        except (requests.RequestException, OSError, ValueError) as err:
            raise RegistryError(f"{what}: request to {url} failed: {err}") from err

    def _http(
        self, method: str, repository: str, path: str, *, headers: Mapping[str, str] | None = None
    ) -> requests.Response:
        """One registry API call under `/v2/<repository>/`, authenticated per the mode."""
        scheme = "http" if self.settings.registry_insecure else "https"
        url = f"{scheme}://{self._host()}/v2/{repository}/{path}"
        what = f"{method} {repository}/{path.partition('?')[0]}"
        key = (repository, "delete" if method == "DELETE" else "pull")
        resp = self._send(method, url, headers=self._auth_headers(key, headers), what=what)
        if resp.status_code != 401:
            return resp
        challenge = parse_challenge(resp.headers.get("WWW-Authenticate"))
        bearer = self.settings.registry_auth in (RegistryAuth.BEARER, RegistryAuth.GOOGLE)
        if not bearer or challenge is None or challenge.scheme != "bearer" or not challenge.realm:
            raise self._auth_error(resp, what)
        with self._lock:
            self._challenges[key] = challenge
            # A rejected cached token must not be offered again.
            self._tokens.pop(self._token_key(challenge), None)
        token = self._fetch_token(challenge)
        hdrs = {**(headers or {}), "Authorization": f"Bearer {token}"}
        retry = self._send(method, url, headers=hdrs, what=what)
        if retry.status_code == 401:
            raise self._auth_error(retry, what)
        return retry

    def _auth_headers(
        self, key: tuple[str, str], extra: Mapping[str, str] | None
    ) -> dict[str, str]:
        hdrs, s = dict(extra or {}), self.settings
        mode = s.registry_auth
        if mode is RegistryAuth.BASIC:
            pair = f"{s.registry_username or ''}:{s.registry_password or ''}".encode()
            hdrs["Authorization"] = "Basic " + base64.b64encode(pair).decode()
        elif mode in (RegistryAuth.BEARER, RegistryAuth.GOOGLE):
            with self._lock:
                challenge = self._challenges.get(key)
            if challenge is not None:
                # The scope known from an earlier challenge: the cached token, or one fetched ahead.
                hdrs["Authorization"] = f"Bearer {self._fetch_token(challenge)}"
            elif mode is RegistryAuth.GOOGLE:
                hdrs["Authorization"] = f"Bearer {self._google_token()}"
        return hdrs

    @staticmethod
    def _token_key(challenge: Challenge) -> tuple[str, str, str]:
        return (challenge.realm or "", challenge.service or "", challenge.scope or "")

    def _fetch_token(self, challenge: Challenge) -> str:
        with self._lock:
            cached = self._tokens.get(self._token_key(challenge))
        if cached is not None and self._clock() < cached[1]:
            return cached[0]
        realm = challenge.realm or ""
        parts = urllib.parse.urlsplit(realm)
        if parts.scheme not in ("https", "http") or not parts.netloc:
            raise RegistryAuthError(f"registry token realm {realm!r} is not an http(s) URL")
        base = self.settings.require_registry()
        if not realm_allowed(realm, base.host, self.settings.registry_token_realms):
            # Checked before any credential is built: a Google access token included.
            raise RegistryAuthError(
                f"registry token realm {parts.netloc!r} is neither the registry's host "
                f"{base.host!r} nor listed in COCOON_REGISTRY_TOKEN_REALMS: refusing to "
                "send credentials there"
            )
        user, password = self.settings.registry_username, self.settings.registry_password
        creds = (user, password) if user and password else None
        if self.settings.registry_auth is RegistryAuth.GOOGLE:
            creds = (GOOGLE_BASIC_USER, self._google_token())
        if parts.scheme == "http" and creds is not None and not self.settings.registry_insecure:
            raise RegistryAuthError(
                f"refusing to send registry credentials to plain-http realm {realm}"
            )
        params = {k: v for k, v in challenge.params.items() if k in ("service", "scope") and v}
        if creds is not None and self.settings.registry_username:
            params["account"] = self.settings.registry_username
        what = f"token from {realm}"
        resp = self._send("GET", realm, headers={}, params=params, auth=creds, what=what)
        if resp.status_code in (401, 403):
            raise RegistryAuthError(
                f"token server {realm} refused the credentials ({resp.status_code})"
            )
        self._raise_for_status(resp, what)
        try:
            body = resp.json()
        except ValueError as err:
            raise RegistryError(f"token server {realm} sent invalid JSON") from err
        token = token_of(body) if isinstance(body, dict) else None
        if token is None:
            raise RegistryError(f"token server {realm} sent no token")
        expires = token_expiry(body, now=self._clock())
        with self._lock:
            self._tokens[self._token_key(challenge)] = (token, expires)
        return token

    def _google_token(self) -> str:
        import google.auth  # noqa: PLC0415  (cold start)
        import google.auth.exceptions  # noqa: PLC0415
        import google.auth.transport.requests  # noqa: PLC0415

        try:
            if self._google_creds is None:  # two threads racing here both get usable ones
                self._google_creds, _project = google.auth.default(scopes=[GOOGLE_SCOPE])
            creds = self._google_creds
            if not creds.valid or not creds.token:
                creds.refresh(google.auth.transport.requests.Request(session=self._sess()))
        except google.auth.exceptions.TransportError as err:
            raise RegistryError(f"Google token endpoint unreachable: {err}") from err
        except google.auth.exceptions.GoogleAuthError as err:
            # None found, a refused refresh, a malformed key file, a failed reauth or
            # impersonation...: a credentials problem, never an answer.
            raise RegistryAuthError(
                f"Google credentials failed ({type(err).__name__}): {err}"
            ) from err
        token = creds.token
        if not isinstance(token, str) or not token:
            raise RegistryAuthError("Google credentials produced no access token")
        return token

    def _auth_error(self, resp: requests.Response, what: str) -> RegistryAuthError:
        mode = self.settings.registry_auth.value
        return RegistryAuthError(
            f"{what}: the registry {self._host()} answered {resp.status_code} "
            f"(COCOON_REGISTRY_AUTH={mode}; check credentials and permissions)"
        )

    def _raise_for_status(self, resp: requests.Response, what: str) -> None:
        code = resp.status_code
        if 200 <= code < 300:
            return
        if code in (401, 403):
            raise self._auth_error(resp, what)
        if code == 429 or code >= 500:
            raise RegistryError(f"{what}: the registry {self._host()} answered {code}")
        raise RegistryError(f"{what}: unexpected status {code} from {self._host()}")

    def _ecr_client(self) -> Any:
        if self._ecr is None:
            import boto3  # noqa: PLC0415  (cold start)
            from botocore.config import Config  # noqa: PLC0415

            connect, read = self._timeout
            retries: Any = {"max_attempts": 2, "mode": "standard"}
            config = Config(connect_timeout=connect, read_timeout=read, retries=retries)
            region = self._ecr_host().group("region")
            self._ecr = boto3.client("ecr", region_name=region, config=config)
        return self._ecr

    def _ecr_host(self) -> re.Match[str]:
        host = self._host()
        m = _ECR_HOST.match(host)
        if not m:
            raise ConfigError(
                f"COCOON_REGISTRY_BASE host {host!r} is not an ECR registry "
                "(<account>.dkr.ecr.<region>.amazonaws.com)"
            )
        return m

    def _ecr_call(self, op: str, **kwargs: Any) -> dict[str, Any] | None:
        """Call an ECR operation; None when the repository or image does not exist."""
        import botocore.exceptions as bexc  # noqa: PLC0415  (cold start)

        client = self._ecr_client()
        ids = {"registryId": self._ecr_host().group("account")}
        with self._lock:
            self.requests_made += 1
        try:
            result: dict[str, Any] = getattr(client, op)(**ids, **kwargs)
            return result
        except bexc.ClientError as err:
            code = str(err.response.get("Error", {}).get("Code", ""))
            status = int(err.response.get("ResponseMetadata", {}).get("HTTPStatusCode", 0) or 0)
            if code in ("ImageNotFoundException", "RepositoryNotFoundException"):
                return None
            if code in _ECR_AUTH_CODES or status in (401, 403):
                raise RegistryAuthError(f"ECR {op}: {code or status}: {err}") from err
            raise RegistryError(f"ECR {op}: {code or status}: {err}") from err
        except (bexc.NoCredentialsError, bexc.PartialCredentialsError) as err:
            raise RegistryAuthError(f"ECR {op}: no AWS credentials: {err}") from err
        except bexc.BotoCoreError as err:
            raise RegistryError(f"ECR {op}: {err}") from err

    def _ecr_describe(self, repository: str, reference: str) -> ManifestInfo | None:
        image_id = {"imageDigest": reference} if ":" in reference else {"imageTag": reference}
        out = self._ecr_call("describe_images", repositoryName=repository, imageIds=[image_id])
        details = (out or {}).get("imageDetails") or []
        if not details:
            return None
        d = details[0]
        size = d.get("imageSizeInBytes")
        return ManifestInfo(
            repository=repository,
            reference=reference,
            digest=check_digest(d.get("imageDigest")),
            media_type=d.get("imageManifestMediaType"),
            size=size if isinstance(size, int) else None,
        )

    def _ecr_delete_tag(self, repository: str, tag: str) -> bool:
        out = self._ecr_call(
            "batch_delete_image", repositoryName=repository, imageIds=[{"imageTag": tag}]
        )
        for failure in (out or {}).get("failures") or []:
            code = failure.get("failureCode")
            if code == "ImageNotFound":
                continue  # already gone
            log.warning(
                "ECR refused to delete a tag",
                repository=repository,
                tag=tag,
                failure_code=code,
                failure_reason=failure.get("failureReason"),
            )
            return False
        return True


# The process's client per settings, reused by warm invocations; reset closes them (tests).
_clients: ProcessCache[Settings, RegistryClient] = ProcessCache(
    RegistryClient, close=RegistryClient.close
)
get_client = _clients.get
reset_clients = _clients.reset
