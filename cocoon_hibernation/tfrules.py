"""The Terraform module's variable validations, as `deploy-check` evaluates them offline.

Each `validation { condition, error_message }` block of
terraform/modules/cocoon-hibernation/variables.tf (and the example's own, in
terraform/examples/gke/variables.tf) is one :class:`Rule` here: the same
regular expressions (Terraform's `regex()` is a search; RE2's `$` is the end of
the text, Python's `\\Z`), the same arithmetic, and the module's own error
message. The wheel does not ship the module, so the rules cannot be read from it
at run time; instead tests/deploy/test_deploy_check_rules.py holds this table to
the module: every validation block has its rule with the same message, and
`terraform console` evaluates the module's own condition text on a table of
values that the rule must judge alike.

A null value is the module's default (the example passes unset inputs through as
null, and the module declares them `nullable = false`): it is not checked.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

Judge = Callable[[Any], bool]


class _TypeMismatch(Exception):
    """The value is not of the variable's type (Terraform refuses it before validating)."""


def _re(pattern: str) -> re.Pattern[str]:
    # RE2 (Terraform) reads `$` as the end of the text; Python's also matches before a
    # final newline. Both read `.` as "not a newline" and `\s` alike for ASCII text.
    return re.compile(pattern.replace("$", r"\Z"))


def _matches(pattern: str) -> Judge:
    rx = _re(pattern)

    def judge(value: Any) -> bool:
        return bool(rx.search(_string(value)))

    return judge


def _string(value: Any) -> str:
    if isinstance(value, bool) or not isinstance(value, str | int | float):
        raise _TypeMismatch("a string")
    # Terraform converts a number given for a string to its decimal text.
    return value if isinstance(value, str) else format(value, "g")


def _number(value: Any) -> float:
    if isinstance(value, bool):
        raise _TypeMismatch("a number")
    if isinstance(value, int | float):
        return float(value)
    if isinstance(value, str):
        try:
            return float(value)
        except ValueError:
            raise _TypeMismatch("a number") from None
    raise _TypeMismatch("a number")


def _strings(value: Any) -> list[str]:
    if not isinstance(value, list):
        raise _TypeMismatch("a list of strings")
    return [_string(v) for v in value]


def _each(pattern: str, *, lower: bool = False) -> Judge:
    rx = _re(pattern)

    def judge(value: Any) -> bool:
        return all(rx.search(v.lower() if lower else v) for v in _strings(value))

    return judge


def _field(name: str, judge: Judge) -> Judge:
    def inner(value: Any) -> bool:
        if not isinstance(value, Mapping) or name not in value:
            raise _TypeMismatch(f"an object with {name}")
        return judge(value[name])

    return inner


def _null_or(judge: Judge) -> Judge:
    return lambda value: value is None or judge(value)


def _between(low: float, high: float) -> Judge:
    return lambda value: low <= _number(value) <= high


def _whole_at_least(low: float) -> Judge:
    def judge(value: Any) -> bool:
        n = _number(value)
        return n >= low and math.floor(n) == n

    return judge


_DURATION = _matches("^([0-9]+(ms|s|m|h|d))+$")
_NONZERO = _matches("[1-9]")


def _duration(value: Any) -> bool:
    return _DURATION(value) and _NONZERO(value)


def _cron_fields(value: Any) -> bool:
    # length(split(" ", trimspace(v))) == 5: single spaces between five fields.
    return len(_string(value).strip().split(" ")) == 5


def _retention(value: Any) -> bool:
    text = _string(value)
    if not _re("^[0-9]+s$").search(text):
        return False
    return 600 <= float(text.removesuffix("s")) <= 2678400


def _audit_methods(value: Any) -> bool:
    methods = _strings(value)
    rx = _re(
        r"^(io\.cocoonstack\.cocoonset\.v1\.cocoonsets|io\.k8s\.core\.v1\.pods)"
        r"(\.status)?\.(create|update|patch|delete)$"
    )
    return len(methods) > 0 and all(rx.search(m) for m in methods)


def _seconds_between(low: float, high: float) -> Judge:
    rx = _re("^[0-9]+s$")

    def judge(value: Any) -> bool:
        text = _string(value)
        return bool(rx.search(text)) and low <= float(text[:-1]) <= high

    return judge


@dataclass(frozen=True, slots=True)
class Rule:
    variable: str
    index: int  # which validation block of the variable (0-based, in file order)
    check: str  # the finding's name: the variable, or variable.attribute
    judge: Judge
    message: str  # the module's error_message, verbatim
    example_only: bool = False  # declared by terraform/examples/gke, not the module


MODULE_RULES: Final[tuple[Rule, ...]] = (
    Rule(
        "project_id",
        0,
        "project_id",
        _matches("^[a-z][a-z0-9-]{4,28}[a-z0-9]$"),
        "project_id must be a Google Cloud project ID (6-30 lowercase letters, digits, hyphens).",
    ),
    Rule(
        "region",
        0,
        "region",
        _matches("^[a-z]+-[a-z]+[0-9]+$"),
        "region must be a Google Cloud region such as europe-west1.",
    ),
    Rule(
        "name_prefix",
        0,
        "name_prefix",
        _matches("^[a-z][a-z0-9-]{1,11}[a-z0-9]$"),
        "name_prefix must be 3-13 characters: lowercase letters, digits and hyphens, starting "
        "with a letter (service account IDs are limited to 30 characters).",
    ),
    Rule(
        "gke_cluster",
        0,
        "gke_cluster.name",
        _field("name", _matches("^[a-z]([-a-z0-9]{0,38}[a-z0-9])?$")),
        "gke_cluster.name must be a GKE cluster name (lowercase letters, digits, hyphens; at "
        "most 40 characters).",
    ),
    Rule(
        "gke_cluster",
        1,
        "gke_cluster.location",
        _field("location", _matches("^[a-z]+-[a-z]+[0-9]+(-[a-z])?$")),
        "gke_cluster.location must be a region (europe-west1) or a zone (europe-west1-b).",
    ),
    Rule(
        "kube_server_override",
        0,
        "kube_server_override",
        _null_or(_matches("^https://[^\\s/]+(/.*)?$")),
        "kube_server_override must be an https:// URL (the functions refuse plain HTTP to the "
        "API server).",
    ),
    Rule(
        "vpc_connector",
        0,
        "vpc_connector",
        _null_or(_matches("^projects/[^/]+/locations/[^/]+/connectors/[^/]+$")),
        "vpc_connector must look like projects/P/locations/R/connectors/C.",
    ),
    Rule(
        "namespaces",
        0,
        "namespaces",
        _each("^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$"),
        "namespaces must be DNS-1123 labels.",
    ),
    Rule(
        "audit_methods",
        0,
        "audit_methods",
        _audit_methods,
        "audit_methods must be write methods on cocoonsets or pods, optionally their status "
        "(io.cocoonstack.cocoonset.v1.cocoonsets[.status].VERB, "
        "io.k8s.core.v1.pods[.status].VERB).",
    ),
    Rule(
        "pod_status_audit_methods",
        0,
        "pod_status_audit_methods",
        _each(r"^io\.k8s\.core\.v1\.pods\.status\.(update|patch)$"),
        "pod_status_audit_methods may hold io.k8s.core.v1.pods.status.patch and "
        "io.k8s.core.v1.pods.status.update only.",
    ),
    Rule(
        "eventarc_agent_wait",
        0,
        "eventarc_agent_wait",
        _matches("^[0-9]+(s|m)$"),
        "eventarc_agent_wait must be a whole number of seconds or minutes, like 120s or 3m.",
    ),
    Rule(
        "log_metric_wait",
        0,
        "log_metric_wait",
        _matches("^[0-9]+(s|m)$"),
        "log_metric_wait must be a whole number of seconds or minutes, like 300s or 10m.",
    ),
    Rule(
        "artifact_registry",
        0,
        "artifact_registry.location",
        _field("location", _matches("^(us|europe|asia|[a-z]+-[a-z]+[0-9]+)$")),
        "artifact_registry.location must be a region (asia-east1) or multi-region (asia, "
        "europe, us).",
    ),
    Rule(
        "artifact_registry",
        1,
        "artifact_registry.repository_id",
        _field("repository_id", _matches("^[a-z]([a-z0-9-]{0,61}[a-z0-9])?$")),
        "artifact_registry.repository_id must be a repository ID (lowercase letters, digits, "
        "hyphens).",
    ),
    Rule(
        "sweep_schedule",
        0,
        "sweep_schedule",
        _cron_fields,
        "sweep_schedule must be a 5-field unix-cron expression.",
    ),
    Rule(
        "wake_deadline",
        0,
        "wake_deadline",
        _duration,
        "wake_deadline must be a positive duration of whole numbers with units ms, s, m, h or "
        "d, like 90s, 10m, 1h30m or 2d (no decimals: write 1h30m, not 1.5h).",
    ),
    Rule(
        "seat_reclaim_grace",
        0,
        "seat_reclaim_grace",
        lambda v: v == "off" or _duration(v),
        "seat_reclaim_grace must be off or a positive duration of whole numbers with units ms, "
        "s, m, h or d, like 30s or 2m.",
    ),
    Rule(
        "cocoon_operator",
        0,
        "cocoon_operator",
        lambda v: _string(v) in ("present", "absent"),
        "cocoon_operator must be present or absent.",
    ),
    Rule(
        "seat_order",
        0,
        "seat_order",
        lambda v: _string(v) in ("gate", "off"),
        "seat_order must be gate or off.",
    ),
    Rule(
        "sweep_max_suspends",
        0,
        "sweep_max_suspends",
        _whole_at_least(0),
        "sweep_max_suspends must be a whole number >= 0.",
    ),
    Rule(
        "max_instances",
        0,
        "max_instances",
        _between(1, 100),
        "max_instances must be between 1 and 100.",
    ),
    Rule(
        "dead_letter_retention",
        0,
        "dead_letter_retention",
        _retention,
        "dead_letter_retention must be between 600s and 2678400s (31 days), written in seconds "
        "like 604800s.",
    ),
    Rule(
        "dead_letter_max_delivery_attempts",
        0,
        "dead_letter_max_delivery_attempts",
        _between(5, 100),
        "dead_letter_max_delivery_attempts must be between 5 and 100 (the Pub/Sub limits).",
    ),
    Rule(
        "ingest_ingress",
        0,
        "ingest_ingress",
        lambda v: _string(v) in ("ALLOW_INTERNAL_ONLY", "ALLOW_INTERNAL_AND_GCLB", "ALLOW_ALL"),
        "ingest_ingress must be ALLOW_INTERNAL_ONLY, ALLOW_INTERNAL_AND_GCLB or ALLOW_ALL.",
    ),
    Rule(
        "ingest_invoker_members",
        0,
        "ingest_invoker_members",
        _each("^(serviceAccount|user|group|domain|principal|principalSet):.+$"),
        "ingest_invoker_members must be IAM principals like serviceAccount:..., user:..., "
        "group:...; allUsers and allAuthenticatedUsers are not allowed.",
    ),
    Rule(
        "wake_publishers",
        0,
        "wake_publishers",
        _each("^(serviceAccount|user|group|domain|principal|principalSet):.+$"),
        "wake_publishers must be IAM principals like serviceAccount:..., group:...; "
        "allUsers and allAuthenticatedUsers are not allowed.",
    ),
    Rule(
        "ingest_push_service_accounts",
        0,
        "ingest_push_service_accounts",
        _each(r"^[a-z0-9][a-z0-9._+-]*@[a-z0-9][a-z0-9.-]*\.gserviceaccount\.com$", lower=True),
        "ingest_push_service_accounts must be service-account emails (…@….gserviceaccount.com), "
        "never a person's account.",
    ),
    Rule(
        "alert_notification_channels",
        0,
        "alert_notification_channels",
        _each("^projects/[^/]+/notificationChannels/[^/]+$"),
        "alert_notification_channels must be full channel IDs: projects/P/notificationChannels/N.",
    ),
    Rule(
        "rbac_namespaces",
        0,
        "rbac_namespaces",
        _each("^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$"),
        "rbac_namespaces must be DNS-1123 labels.",
    ),
    Rule(
        "alert_stuck_suspending_after",
        0,
        "alert_stuck_suspending_after",
        _seconds_between(600, 86400),
        "alert_stuck_suspending_after must be between 600s and 86400s, written in seconds "
        "like 1800s.",
    ),
    Rule(
        "alert_function_errors",
        0,
        "alert_function_errors",
        _whole_at_least(0),
        "alert_function_errors must be a whole number >= 0.",
    ),
    Rule(
        "environment",
        0,
        "environment",
        _matches("^[a-z0-9-]{1,63}$"),
        "environment must be a label value (lowercase letters, digits, hyphens).",
        example_only=True,
    ),
)


@dataclass(frozen=True, slots=True)
class Verdict:
    rule: Rule
    ok: bool
    detail: str  # the module's message (or the type Terraform expects) when not ok


def judge(rule: Rule, value: Any) -> Verdict:
    """One rule on one value, as Terraform's plan would judge it."""
    try:
        ok = bool(rule.judge(value))
    except _TypeMismatch as err:
        return Verdict(rule, False, f"{rule.variable} must be {err}")
    return Verdict(rule, ok, "" if ok else rule.message)


def evaluate(values: Mapping[str, Any], rules: Sequence[Rule] = MODULE_RULES) -> list[Verdict]:
    """Every rule whose variable the tfvars set (to something other than null)."""
    return [judge(r, values[r.variable]) for r in rules if values.get(r.variable) is not None]
