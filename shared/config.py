"""Configuration from the environment, parsed once per process; an error names the variable.

The doors' credentials are one bearer secret per door (docs/security.md), each at least
`MIN_TOKEN_LENGTH` characters, no two equal. `COCOON_PUSH_AUDIENCE` needs
`COCOON_PUSH_SERVICE_ACCOUNTS`: the audience alone is a predictable URL any Google account
can mint a token for.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import timedelta
from enum import StrEnum
from typing import TypeVar

from shared.durations import parse_duration
from shared.errors import ConfigError
from shared.names import is_dns1123_label


class KubeAuth(StrEnum):
    KUBECONFIG = "kubeconfig"
    GOOGLE = "google"


class RegistryAuth(StrEnum):
    NONE = "none"
    BASIC = "basic"
    BEARER = "bearer"
    GOOGLE = "google"
    ECR = "ecr"


class LogFormat(StrEnum):
    JSON = "json"
    TEXT = "text"


class OperatorMode(StrEnum):
    """Whether a cocoon-operator manages the same sets (`COCOON_OPERATOR`, docs/operator.md).

    `present`: the functions never delete a pod, create a restore pod, request
    hibernation or write a phase for a set generation the operator has not yet
    observed (its `status.observedGeneration`), and leave that field to it.
    `absent`: the functions act alone and write the whole status themselves.
    """

    PRESENT = "present"
    ABSENT = "absent"


E = TypeVar("E", bound=StrEnum)

_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off", ""}


def _enum(env: Mapping[str, str], var: str, kind: type[E], default: E) -> E:
    raw = env.get(var, "").strip().lower()
    if not raw:
        return default
    try:
        return kind(raw)
    except ValueError:
        allowed = ", ".join(m.value for m in kind)
        raise ConfigError(f"{var}={raw!r} is not one of: {allowed}") from None


def _bool(env: Mapping[str, str], var: str) -> bool:
    raw = env.get(var, "").strip().lower()
    if raw in _TRUE:
        return True
    if raw in _FALSE:
        return False
    raise ConfigError(f"{var}={raw!r} is not a boolean (true/false)")


# A Google service account's email: user-managed (`x@P.iam.gserviceaccount.com`)
# and Google-managed (`service-N@gcp-sa-*.iam.gserviceaccount.com`,
# `N-compute@developer.gserviceaccount.com`) alike. A person's account is
# refused: a push subscription signs as a service account, never as a user.
_SERVICE_ACCOUNT = re.compile(r"[a-z0-9][a-z0-9._+-]*@[a-z0-9][a-z0-9.-]*\.gserviceaccount\.com")


def _service_accounts(env: Mapping[str, str], var: str) -> frozenset[str]:
    parts = [p.strip().lower() for p in env.get(var, "").split(",") if p.strip()]
    bad = [p for p in parts if not _SERVICE_ACCOUNT.fullmatch(p)]
    if bad:
        listed = ", ".join(bad)
        raise ConfigError(f"{var} has entries that are not service-account emails: {listed}")
    return frozenset(parts)


# A bearer secret shorter than this is refused at load: 32 characters of
# `openssl rand -hex 16` are 128 bits, out of reach of guessing over HTTP.
MIN_TOKEN_LENGTH = 32


def _token(env: Mapping[str, str], var: str) -> str | None:
    raw = env.get(var, "")
    value = raw.strip()
    if not value:
        return None
    _check_token(var, value)
    return value


def _check_token(var: str, value: str) -> None:
    # Never quote the value: it is a secret, and this message reaches the logs.
    if len(value) < MIN_TOKEN_LENGTH:
        raise ConfigError(
            f"{var} is {len(value)} characters, under the minimum {MIN_TOKEN_LENGTH} "
            "(e.g. `openssl rand -hex 24`)"
        )
    if any(ch.isspace() or ord(ch) < 0x21 for ch in value):
        raise ConfigError(f"{var} contains whitespace or control characters")


def _realms(env: Mapping[str, str], var: str) -> frozenset[str]:
    parts = [p.strip().lower() for p in env.get(var, "").split(",") if p.strip()]
    bad = [p for p in parts if not re.fullmatch(r"[a-z0-9.-]+(:[0-9]+)?", p)]
    if bad:
        raise ConfigError(f"{var} entries must be host or host:port: {', '.join(bad)}")
    return frozenset(parts)


@dataclass(frozen=True, slots=True)
class WakeCredential:
    """A bearer secret that may wake sets: in every allowed namespace, or only in `namespaces`."""

    token: str = field(repr=False)
    namespaces: frozenset[str] | None = None  # None = every namespace COCOON_NAMESPACES allows
    name: str = "COCOON_WAKE_TOKEN"  # how logs and refusals name it, never the secret

    def covers(self, namespace: str) -> bool:
        return self.namespaces is None or namespace in self.namespaces


def _scoped_wake_tokens(env: Mapping[str, str], var: str) -> tuple[WakeCredential, ...]:
    """`ns1,ns2=TOKEN` entries separated by `;` or whitespace (one per line in a Secret).

    The namespaces come first: a namespace never contains `=`, a token (base64) may.
    """
    out: list[WakeCredential] = []
    entries = [e for e in re.split(r"[;\s]+", env.get(var, "")) if e]
    for index, entry in enumerate(entries, start=1):
        spaces, eq, token = entry.partition("=")
        where = f"{var} entry {index}"
        if not eq or not spaces or not token:
            raise ConfigError(f"{where} is not `namespace[,namespace...]=TOKEN`")
        namespaces = [n for n in spaces.split(",") if n]
        bad = [n for n in namespaces if not is_dns1123_label(n)]
        if bad or not namespaces:
            raise ConfigError(f"{where} has invalid namespace(s): {', '.join(bad) or '(none)'}")
        _check_token(where, token)
        out.append(WakeCredential(token, frozenset(namespaces), f"{var}[{index}]"))
    return tuple(out)


# In-cluster callers (functions.doors): a bearer token the API server authenticates by
# TokenReview for COCOON_CLUSTER_AUDIENCE, accepted only for a username listed in
# COCOON_CLUSTER_CALLERS (`username=door,...`); COCOON_TARGET_AUTH=doors makes the
# per-target processes check credentials themselves (default `platform`: Cloud Run's IAM).
CLUSTER_CALLER_DOORS = ("registry", "audit", "wake", "sweep")


def _cluster_auth(env: Mapping[str, str]) -> tuple[str | None, tuple[tuple[str, str], ...], bool]:
    audience = env.get("COCOON_CLUSTER_AUDIENCE", "").strip() or None
    callers: list[tuple[str, str]] = []
    for entry in filter(
        None, (p.strip() for p in env.get("COCOON_CLUSTER_CALLERS", "").split(","))
    ):
        user, _, door = entry.rpartition("=")
        if not user or door not in CLUSTER_CALLER_DOORS:
            doors = ", ".join(CLUSTER_CALLER_DOORS)
            raise ConfigError(f"COCOON_CLUSTER_CALLERS entry {entry!r} is not username=({doors})")
        callers.append((user, door))
    if bool(audience) != bool(callers):
        raise ConfigError(
            "COCOON_CLUSTER_AUDIENCE and COCOON_CLUSTER_CALLERS go together: any pod can "
            "mint a token for the audience alone"
        )
    mode = env.get("COCOON_TARGET_AUTH", "").strip() or "platform"
    if mode not in ("platform", "doors"):
        raise ConfigError(f"COCOON_TARGET_AUTH={mode!r} must be `platform` or `doors`")
    return audience, tuple(callers), mode == "doors"


@dataclass(frozen=True, slots=True)
class RegistryBase:
    """`COCOON_REGISTRY_BASE` split into host and repository prefix."""

    host: str
    prefix: str  # "" or "proj/snapshots" (no leading/trailing slash)

    def repository(self, vm: str) -> str:
        return f"{self.prefix}/{vm}" if self.prefix else vm

    def vm_of(self, repository: str) -> str | None:
        """The VM name of a repository under this base, else None."""
        if not self.prefix:
            return repository if "/" not in repository else None
        head = self.prefix + "/"
        if repository.startswith(head):
            rest = repository[len(head) :]
            return rest if rest and "/" not in rest else None
        return None

    def __str__(self) -> str:
        return f"{self.host}/{self.prefix}" if self.prefix else self.host


def parse_registry_base(raw: str) -> RegistryBase:
    value = raw.strip()
    if "://" in value:
        raise ConfigError(
            f"COCOON_REGISTRY_BASE={raw!r} must be host[/prefix] without a scheme "
            "(use COCOON_REGISTRY_INSECURE=true for plain HTTP)"
        )
    host, _, prefix = value.strip("/").partition("/")
    if not host:
        raise ConfigError("COCOON_REGISTRY_BASE is empty")
    return RegistryBase(host=host, prefix=prefix.strip("/"))


@dataclass(frozen=True, slots=True)
class Settings:
    kube_auth: KubeAuth = KubeAuth.KUBECONFIG
    kubeconfig: str | None = None
    # A kubeconfig context other than the current one (the CLI's --context; no variable).
    kube_context: str | None = None
    kube_server: str | None = None
    kube_ca: str | None = None
    registry_base: RegistryBase | None = None
    registry_insecure: bool = False
    registry_auth: RegistryAuth = RegistryAuth.NONE
    registry_username: str | None = None
    registry_password: str | None = field(default=None, repr=False)
    # Token realms (host or host:port, lower-case) besides the registry's own host
    # that may receive registry credentials (shared.clients.registry_auth.realm_allowed).
    registry_token_realms: frozenset[str] = frozenset()
    namespaces: frozenset[str] | None = None  # None = all
    # Registry notifications (`ingest /registry`, serve `/release`): pushes only.
    ingest_token: str | None = field(default=None, repr=False)
    # The audit webhook and the cluster's event sources: set changes only.
    audit_token: str | None = field(default=None, repr=False)
    # Wake requests; each credential in every allowed namespace or in its own.
    wake_credentials: tuple[WakeCredential, ...] = ()
    # Sweep ticks.
    sweep_token: str | None = field(default=None, repr=False)
    push_audience: str | None = None
    push_service_accounts: frozenset[str] = frozenset()  # lower-case emails
    events_topic: str | None = None
    wake_deadline: timedelta = timedelta(minutes=10)
    sweep_max_suspends: int = 50
    # How long a wake must be unschedulable before it reclaims an idle seat; None = off.
    seat_reclaim_grace: timedelta | None = timedelta(seconds=30)
    # Fair order among waiting wakes by a scheduling gate (shared.seats.line); False = off.
    seat_order: bool = True
    log_format: LogFormat = LogFormat.JSON
    # How long a push-event invocation waits for vk-cocoon's `hibernated` report when the
    # push beat it (docs/triggers.md); zero = never wait.
    report_wait: timedelta = timedelta(seconds=4)
    # Beside a cocoon-operator (the default: cocoonstack always runs one, and acting
    # ahead of it can cost a VM its snapshot; docs/operator.md); ABSENT = alone.
    operator: OperatorMode = OperatorMode.PRESENT
    # In-cluster callers by TokenReview (the audience; (username, door) pairs), and
    # whether the per-target processes check the doors' credentials themselves.
    cluster_audience: str | None = None
    cluster_callers: tuple[tuple[str, str], ...] = ()
    target_auth: bool = False

    @property
    def operator_present(self) -> bool:
        return self.operator is OperatorMode.PRESENT

    def namespace_allowed(self, namespace: str) -> bool:
        return self.namespaces is None or namespace in self.namespaces

    @property
    def scopes(self) -> list[str | None]:
        """What a cluster-wide read lists: every namespace (None), or each allowed one."""
        return [None] if self.namespaces is None else [*sorted(self.namespaces)]

    def require_registry(self) -> RegistryBase:
        if self.registry_base is None:
            raise ConfigError("COCOON_REGISTRY_BASE is not set: refusing to release or wake")
        return self.registry_base

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> Settings:
        e = os.environ if env is None else env
        kube_auth = _enum(e, "COCOON_KUBE_AUTH", KubeAuth, KubeAuth.KUBECONFIG)
        server = e.get("COCOON_KUBE_SERVER") or None
        ca = e.get("COCOON_KUBE_CA") or None
        if kube_auth is KubeAuth.GOOGLE and not server:
            raise ConfigError("COCOON_KUBE_SERVER is required when COCOON_KUBE_AUTH=google")
        if server and not server.startswith("https://"):
            raise ConfigError(f"COCOON_KUBE_SERVER={server!r} must be an https:// URL")

        base_raw = e.get("COCOON_REGISTRY_BASE", "").strip()
        base = parse_registry_base(base_raw) if base_raw else None
        reg_auth = _enum(e, "COCOON_REGISTRY_AUTH", RegistryAuth, RegistryAuth.NONE)
        user = e.get("COCOON_REGISTRY_USERNAME") or None
        password = e.get("COCOON_REGISTRY_PASSWORD") or None
        if reg_auth is RegistryAuth.BASIC and not (user and password):
            raise ConfigError(
                "COCOON_REGISTRY_USERNAME and COCOON_REGISTRY_PASSWORD are required "
                "when COCOON_REGISTRY_AUTH=basic"
            )

        ns_raw = e.get("COCOON_NAMESPACES", "").strip()
        namespaces: frozenset[str] | None = None
        if ns_raw:
            parts = [p.strip() for p in ns_raw.split(",") if p.strip()]
            bad = [p for p in parts if not is_dns1123_label(p)]
            if bad:
                raise ConfigError(f"COCOON_NAMESPACES has invalid namespace(s): {', '.join(bad)}")
            namespaces = frozenset(parts)

        try:
            deadline = parse_duration(e.get("COCOON_WAKE_DEADLINE", "10m") or "10m")
        except ValueError as err:
            raise ConfigError(f"COCOON_WAKE_DEADLINE: {err}") from None
        max_raw = e.get("COCOON_SWEEP_MAX_SUSPENDS", "50").strip() or "50"
        if not max_raw.isdigit():
            raise ConfigError(f"COCOON_SWEEP_MAX_SUSPENDS={max_raw!r} is not a whole number")
        grace_raw = (e.get("COCOON_SEAT_RECLAIM_GRACE", "30s") or "30s").strip()
        grace: timedelta | None = None
        if grace_raw != "off":
            try:
                grace = parse_duration(grace_raw)
            except ValueError as err:
                raise ConfigError(f"COCOON_SEAT_RECLAIM_GRACE: {err} (or `off`)") from None
        order_raw = (e.get("COCOON_SEAT_ORDER", "gate") or "gate").strip()
        if order_raw not in ("gate", "off"):
            raise ConfigError(f"COCOON_SEAT_ORDER={order_raw!r} must be `gate` or `off`")
        topic = e.get("COCOON_EVENTS_TOPIC") or None
        if topic and not (topic.startswith("projects/") and "/topics/" in topic):
            raise ConfigError(f"COCOON_EVENTS_TOPIC={topic!r} must be projects/P/topics/T")

        audience = e.get("COCOON_PUSH_AUDIENCE") or None
        push_accounts = _service_accounts(e, "COCOON_PUSH_SERVICE_ACCOUNTS")
        if audience and not push_accounts:
            raise ConfigError(
                "COCOON_PUSH_SERVICE_ACCOUNTS is required when COCOON_PUSH_AUDIENCE is set: "
                "any Google account can mint a token for the audience alone"
            )
        if push_accounts and not audience:
            raise ConfigError(
                "COCOON_PUSH_SERVICE_ACCOUNTS has no effect without COCOON_PUSH_AUDIENCE"
            )

        ingest_token = _token(e, "COCOON_INGEST_TOKEN")
        audit_token = _token(e, "COCOON_AUDIT_TOKEN")
        sweep_token = _token(e, "COCOON_SWEEP_TOKEN")
        wake_all = _token(e, "COCOON_WAKE_TOKEN")
        wake = ((WakeCredential(wake_all),) if wake_all else ()) + _scoped_wake_tokens(
            e, "COCOON_WAKE_TOKENS"
        )
        doors = [
            ("COCOON_INGEST_TOKEN", ingest_token),
            ("COCOON_AUDIT_TOKEN", audit_token),
            ("COCOON_SWEEP_TOKEN", sweep_token),
            *((w.name, w.token) for w in wake),
        ]
        seen: dict[str, str] = {}
        for var, value in doors:
            if value is None:
                continue
            if value in seen:
                # One secret for two doors is the hole these separate doors close.
                raise ConfigError(f"{var} equals {seen[value]}: every door needs its own token")
            seen[value] = var

        wait_raw = (e.get("COCOON_REPORT_WAIT", "4s") or "4s").strip()
        try:
            report_wait = timedelta(0) if wait_raw in ("0", "off") else parse_duration(wait_raw)
        except ValueError as err:
            raise ConfigError(f"COCOON_REPORT_WAIT: {err} (or `off`)") from None
        if report_wait > timedelta(minutes=5):
            raise ConfigError(
                f"COCOON_REPORT_WAIT={wait_raw!r} is over 5m: an invocation must answer "
                "well inside its platform timeout"
            )
        cluster_audience, cluster_callers, target_auth = _cluster_auth(e)
        return cls(
            kube_auth=kube_auth,
            kubeconfig=e.get("KUBECONFIG") or None,
            kube_server=server,
            kube_ca=ca,
            registry_base=base,
            registry_insecure=_bool(e, "COCOON_REGISTRY_INSECURE"),
            registry_auth=reg_auth,
            registry_username=user,
            registry_password=password,
            registry_token_realms=_realms(e, "COCOON_REGISTRY_TOKEN_REALMS"),
            namespaces=namespaces,
            ingest_token=ingest_token,
            audit_token=audit_token,
            wake_credentials=wake,
            sweep_token=sweep_token,
            push_audience=audience,
            push_service_accounts=push_accounts,
            events_topic=topic,
            wake_deadline=deadline,
            sweep_max_suspends=int(max_raw),
            seat_reclaim_grace=grace,
            seat_order=order_raw == "gate",
            log_format=_enum(e, "COCOON_LOG_FORMAT", LogFormat, LogFormat.JSON),
            report_wait=report_wait,
            operator=_enum(e, "COCOON_OPERATOR", OperatorMode, OperatorMode.PRESENT),
            cluster_audience=cluster_audience,
            cluster_callers=cluster_callers,
            target_auth=target_auth,
        )
