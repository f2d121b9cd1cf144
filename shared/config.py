"""Configuration from the environment, parsed once per process; an error names the variable.
The doors' credentials are one bearer secret per door, each at least `MIN_TOKEN_LENGTH`
characters, no two equal."""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import timedelta
from enum import StrEnum
from functools import partial
from typing import Any, TypeVar

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
    """Whether a cocoon-operator manages the same sets (`COCOON_OPERATOR`): if `present`, the
    functions leave it every generation it has not observed yet (docs/operator.md)."""

    PRESENT = "present"
    ABSENT = "absent"


E = TypeVar("E", bound=StrEnum)
# (variable, raw value or "") -> the field's value; raises ConfigError naming the variable.
Parser = Callable[[str, str], Any]


def _enum(kind: type[E], default: E, var: str, raw: str) -> E:
    value = raw.strip().lower()
    if not value:
        return default
    try:
        return kind(value)
    except ValueError:
        allowed = ", ".join(m.value for m in kind)
        raise ConfigError(f"{var}={value!r} is not one of: {allowed}") from None


def _bool(var: str, raw: str) -> bool:
    value = raw.strip().lower()
    if value in ("1", "true", "yes", "on"):
        return True
    if value in ("0", "false", "no", "off", ""):
        return False
    raise ConfigError(f"{var}={value!r} is not a boolean (true/false)")


def _text(var: str, raw: str) -> str | None:
    return raw or None


def _duration(
    default: str, off: Mapping[str, timedelta | None] | None, var: str, raw: str
) -> timedelta | None:
    """A duration (`default` when unset); `off` maps the words that switch it off."""
    value = (raw or default).strip()
    if off is not None and value in off:
        return off[value]
    try:
        return parse_duration(value)
    except ValueError as err:
        raise ConfigError(f"{var}: {err}{' (or `off`)' if off is not None else ''}") from None


def _listed(
    ok: Callable[[str], object], problem: str, var: str, raw: str, fold: bool = True
) -> frozenset[str]:
    """A comma-separated list (lower-cased when `fold`) whose every entry must be `ok`."""
    parts = [p.strip().lower() if fold else p.strip() for p in raw.split(",") if p.strip()]
    bad = [p for p in parts if not ok(p)]
    if bad:
        raise ConfigError(f"{var} {problem}: {', '.join(bad)}")
    return frozenset(parts)


# A Google service account's email: user-managed (`x@P.iam.gserviceaccount.com`)
# and Google-managed (`service-N@gcp-sa-*.iam.gserviceaccount.com`,
# `N-compute@developer.gserviceaccount.com`) alike. A person's account is
# refused: a push subscription signs as a service account, never as a user.
_SERVICE_ACCOUNT = re.compile(r"[a-z0-9][a-z0-9._+-]*@[a-z0-9][a-z0-9.-]*\.gserviceaccount\.com")
_REALM = re.compile(r"[a-z0-9.-]+(:[0-9]+)?")
_BAD_NAMESPACES = "has invalid namespace(s)"


def _namespaces(var: str, raw: str) -> frozenset[str] | None:
    parts = _listed(is_dns1123_label, _BAD_NAMESPACES, var, raw, fold=False)
    return parts if raw.strip() else None


def _whole_number(var: str, raw: str) -> int:
    value = raw.strip() or "50"
    if not value.isdigit():
        raise ConfigError(f"{var}={value!r} is not a whole number")
    return int(value)


def _either(words: tuple[str, str], yes: str, var: str, raw: str) -> bool:
    """One of two words (the first when unset): whether it is `yes`."""
    value = raw.strip() or words[0]
    if value not in words:
        raise ConfigError(f"{var}={value!r} must be `{words[0]}` or `{words[1]}`")
    return value == yes


def _registry_base(var: str, raw: str) -> RegistryBase | None:
    return parse_registry_base(raw) if raw.strip() else None


# A bearer secret shorter than this is refused at load: 32 characters of
# `openssl rand -hex 16` are 128 bits, out of reach of guessing over HTTP.
MIN_TOKEN_LENGTH = 32


def _token(var: str, raw: str) -> str | None:
    value = raw.strip()
    if value:
        _check_token(var, value)
    return value or None


def _check_token(var: str, value: str) -> None:
    # Never quote the value: it is a secret, and this message reaches the logs.
    if len(value) < MIN_TOKEN_LENGTH:
        raise ConfigError(
            f"{var} is {len(value)} characters, under the minimum {MIN_TOKEN_LENGTH} "
            "(e.g. `openssl rand -hex 24`)"
        )
    if any(ch.isspace() or ord(ch) < 0x21 for ch in value):
        raise ConfigError(f"{var} contains whitespace or control characters")


@dataclass(frozen=True, slots=True)
class WakeCredential:
    """A bearer secret that may wake sets: in every allowed namespace, or only in `namespaces`."""

    token: str = field(repr=False)
    namespaces: frozenset[str] | None = None  # None = every namespace COCOON_NAMESPACES allows
    name: str = "COCOON_WAKE_TOKEN"  # how logs and refusals name it, never the secret


def _scoped_wake_tokens(env: Mapping[str, str], var: str) -> tuple[WakeCredential, ...]:
    """`ns1,ns2=TOKEN` entries separated by `;` or whitespace (one per line in a Secret);
    namespaces first: a namespace never contains `=`, a token (base64) may."""
    out: list[WakeCredential] = []
    entries = [e for e in re.split(r"[;\s]+", env.get(var, "")) if e]
    for index, entry in enumerate(entries, start=1):
        spaces, eq, token = entry.partition("=")
        where = f"{var} entry {index}"
        if not eq or not spaces or not token:
            raise ConfigError(f"{where} is not `namespace[,namespace...]=TOKEN`")
        namespaces = _listed(is_dns1123_label, _BAD_NAMESPACES, where, spaces, fold=False)
        if not namespaces:
            raise ConfigError(f"{where} {_BAD_NAMESPACES}: (none)")
        _check_token(where, token)
        out.append(WakeCredential(token, namespaces, f"{var}[{index}]"))
    return tuple(out)


CLUSTER_CALLER_DOORS = ("registry", "audit", "wake", "sweep")


def _cluster_auth(env: Mapping[str, str]) -> tuple[str | None, tuple[tuple[str, str], ...]]:
    """In-cluster callers (functions.doors): a bearer token the API server authenticates by
    TokenReview for COCOON_CLUSTER_AUDIENCE, accepted for a COCOON_CLUSTER_CALLERS username."""
    audience = env.get("COCOON_CLUSTER_AUDIENCE", "").strip() or None
    callers: list[tuple[str, str]] = []
    raw = env.get("COCOON_CLUSTER_CALLERS", "")
    for entry in filter(None, (p.strip() for p in raw.split(","))):
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
    return audience, tuple(callers)


@dataclass(frozen=True, slots=True)
class RegistryBase:
    """`COCOON_REGISTRY_BASE` split into host and repository prefix."""

    host: str
    prefix: str  # "" or "proj/snapshots" (no leading/trailing slash)

    def repository(self, vm: str) -> str:
        return f"{self.prefix}/{vm}" if self.prefix else vm

    def vm_of(self, repository: str) -> str | None:
        """The VM name of a repository under this base, else None."""
        head = f"{self.prefix}/" if self.prefix else ""
        rest = repository[len(head) :] if repository.startswith(head) else ""
        return rest if rest and "/" not in rest else None

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
    cluster_audience: str | None = None
    cluster_callers: tuple[tuple[str, str], ...] = ()  # (username, door)
    # The per-target processes check the doors' credentials themselves (else the platform's IAM).
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
        v: dict[str, Any] = {f: parse(var, e.get(var, "")) for f, (var, parse) in _FROM_ENV.items()}
        if v["kube_auth"] is KubeAuth.GOOGLE and not v["kube_server"]:
            raise ConfigError("COCOON_KUBE_SERVER is required when COCOON_KUBE_AUTH=google")
        server, topic = v["kube_server"], v["events_topic"]
        if server and not server.startswith("https://"):
            raise ConfigError(f"COCOON_KUBE_SERVER={server!r} must be an https:// URL")
        if v["registry_auth"] is RegistryAuth.BASIC and not (
            v["registry_username"] and v["registry_password"]
        ):
            raise ConfigError(
                "COCOON_REGISTRY_USERNAME and COCOON_REGISTRY_PASSWORD are required "
                "when COCOON_REGISTRY_AUTH=basic"
            )
        if topic and not (topic.startswith("projects/") and "/topics/" in topic):
            raise ConfigError(f"COCOON_EVENTS_TOPIC={topic!r} must be projects/P/topics/T")
        if v["push_audience"] and not v["push_service_accounts"]:
            raise ConfigError(
                "COCOON_PUSH_SERVICE_ACCOUNTS is required when COCOON_PUSH_AUDIENCE is set: "
                "any Google account can mint a token for the audience alone"
            )
        if v["push_service_accounts"] and not v["push_audience"]:
            raise ConfigError(
                "COCOON_PUSH_SERVICE_ACCOUNTS has no effect without COCOON_PUSH_AUDIENCE"
            )
        wake_all = _token("COCOON_WAKE_TOKEN", e.get("COCOON_WAKE_TOKEN", ""))
        v["wake_credentials"] = ((WakeCredential(wake_all),) if wake_all else ()) + (
            _scoped_wake_tokens(e, "COCOON_WAKE_TOKENS")
        )
        doors = [(var, v[f]) for f, (var, _) in _FROM_ENV.items() if f.endswith("_token") and v[f]]
        seen: dict[str, str] = {}
        for var, value in [*doors, *((w.name, w.token) for w in v["wake_credentials"])]:
            if value in seen:
                # One secret for two doors is the hole these separate doors close.
                raise ConfigError(f"{var} equals {seen[value]}: every door needs its own token")
            seen[value] = var
        if v["report_wait"] > timedelta(minutes=5):
            raise ConfigError(
                f"COCOON_REPORT_WAIT={(e.get('COCOON_REPORT_WAIT') or '4s').strip()!r} is over "
                "5m: an invocation must answer well inside its platform timeout"
            )
        v["cluster_audience"], v["cluster_callers"] = _cluster_auth(e)
        return cls(**v)


# Settings' fields read from one variable each, in the order they are checked.
_FROM_ENV: dict[str, tuple[str, Parser]] = {
    "kube_auth": ("COCOON_KUBE_AUTH", partial(_enum, KubeAuth, KubeAuth.KUBECONFIG)),
    "kube_server": ("COCOON_KUBE_SERVER", _text),
    "kube_ca": ("COCOON_KUBE_CA", _text),
    "kubeconfig": ("KUBECONFIG", _text),
    "registry_base": ("COCOON_REGISTRY_BASE", _registry_base),
    "registry_auth": ("COCOON_REGISTRY_AUTH", partial(_enum, RegistryAuth, RegistryAuth.NONE)),
    "registry_username": ("COCOON_REGISTRY_USERNAME", _text),
    "registry_password": ("COCOON_REGISTRY_PASSWORD", _text),
    "namespaces": ("COCOON_NAMESPACES", _namespaces),
    "wake_deadline": ("COCOON_WAKE_DEADLINE", partial(_duration, "10m", None)),
    "sweep_max_suspends": ("COCOON_SWEEP_MAX_SUSPENDS", _whole_number),
    "seat_reclaim_grace": ("COCOON_SEAT_RECLAIM_GRACE", partial(_duration, "30s", {"off": None})),
    "seat_order": ("COCOON_SEAT_ORDER", partial(_either, ("gate", "off"), "gate")),
    "events_topic": ("COCOON_EVENTS_TOPIC", _text),
    "push_audience": ("COCOON_PUSH_AUDIENCE", _text),
    "push_service_accounts": (
        "COCOON_PUSH_SERVICE_ACCOUNTS",
        partial(
            _listed, _SERVICE_ACCOUNT.fullmatch, "has entries that are not service-account emails"
        ),
    ),
    "ingest_token": ("COCOON_INGEST_TOKEN", _token),
    "audit_token": ("COCOON_AUDIT_TOKEN", _token),
    "sweep_token": ("COCOON_SWEEP_TOKEN", _token),
    "report_wait": (
        "COCOON_REPORT_WAIT",
        partial(_duration, "4s", {"0": timedelta(0), "off": timedelta(0)}),
    ),
    "registry_insecure": ("COCOON_REGISTRY_INSECURE", _bool),
    "registry_token_realms": (
        "COCOON_REGISTRY_TOKEN_REALMS",
        partial(_listed, _REALM.fullmatch, "entries must be host or host:port"),
    ),
    "log_format": ("COCOON_LOG_FORMAT", partial(_enum, LogFormat, LogFormat.JSON)),
    "operator": ("COCOON_OPERATOR", partial(_enum, OperatorMode, OperatorMode.PRESENT)),
    "target_auth": ("COCOON_TARGET_AUTH", partial(_either, ("platform", "doors"), "doors")),
}
