"""`validate`'s checks beyond the CRD: cocoon-webhook's rules, unknown fields (the server
prunes them silently), unknown `cocoonset.cocoonstack.io/*` keys, and values of this project's
annotations the functions cannot parse (the sweep would ignore them)."""

from __future__ import annotations

import difflib
import json
from collections.abc import Callable, Iterator, Mapping
from typing import Any

from shared import admission
from shared import constants as k
from shared.crd import cocoonset_schema
from shared.durations import parse_duration, parse_rfc3339
from shared.models import ObjectMeta
from shared.seats.activity import cpu_nanocores
from shared.seats.schedule import parse_schedule
from shared.validation import Violation

# The project's annotations a user writes, and how the functions read them.
ANNOTATION_PARSERS: dict[str, tuple[Callable[[str], object], str]] = {
    k.ANN_IDLE_TIMEOUT: (parse_duration, "a duration such as 30m or 2h"),
    k.ANN_RECLAIMABLE_AFTER: (parse_duration, "a duration such as 30m or 2h"),
    k.ANN_SLEEP_SCHEDULE: (parse_schedule, "a schedule"),
    k.ANN_WAKE_SCHEDULE: (parse_schedule, "a schedule"),
    k.ANN_IDLE_CPU_BELOW: (cpu_nanocores, "a CPU quantity such as 50m"),
    k.ANN_LAST_ACTIVITY: (parse_rfc3339, "an RFC 3339 time"),
    k.ANN_IDLE_EXEMPT_UNTIL: (parse_rfc3339, "an RFC 3339 time"),
}
PROJECT_PREFIX = f"{k.GROUP}/"
# Every `cocoonset.cocoonstack.io/*` key anyone reads or writes: shared/constants.py's (the
# set's, the pods', the seat economy's) and cocoon-operator's `hibernate-reclaim`. A key under
# the prefix that is none of these is a typo the functions would silently ignore.
KNOWN_ANNOTATION_KEYS: frozenset[str] = frozenset(
    value
    for name, value in vars(k).items()
    if name.startswith(("ANN_", "LABEL_", "GATE"))
    and isinstance(value, str)
    and value.startswith(PROJECT_PREFIX)
) | {PROJECT_PREFIX + "hibernate-reclaim"}
# ObjectMeta's fields (k8s.io/apimachinery meta/v1): an `annotation:` typo would drop
# every annotation, idle-timeout included, without a word from the server.
_OBJECT_META = frozenset(
    {field.alias or name for name, field in ObjectMeta.model_fields.items()}
    | {"generateName", "selfLink", "deletionGracePeriodSeconds", "managedFields"}
)


def unknown_fields(obj: Mapping[str, Any]) -> list[Violation]:
    """Every field the CRD's schema does not declare (the server would drop it), and in
    `metadata` every field ObjectMeta lacks (the schema leaves it opaque)."""
    schema = cocoonset_schema()
    schema["properties"]["metadata"]["properties"] = {key: {} for key in _OBJECT_META}
    return list(_walk(schema, obj, ""))


def _walk(schema: Mapping[str, Any], value: object, path: str) -> Iterator[Violation]:
    if schema.get("x-kubernetes-preserve-unknown-fields"):
        return
    kind = schema.get("type")
    if kind == "object" and isinstance(value, Mapping):
        properties: Mapping[str, Any] = schema.get("properties") or {}
        extra = schema.get("additionalProperties")
        for key, item in value.items():
            child = f"{path}.{key}" if path else str(key)
            if key in properties:
                yield from _walk(properties[key], item, child)
            elif isinstance(extra, Mapping):
                yield from _walk(extra, item, f"{path}[{key}]")
            elif not properties and extra is None:
                continue  # an opaque object (no declared fields): the server keeps it
            else:
                yield Violation(child, f'unknown field "{child}"')
    elif kind == "array" and isinstance(value, list) and isinstance(schema.get("items"), Mapping):
        for i, item in enumerate(value):
            yield from _walk(schema["items"], item, f"{path}[{i}]")


def annotation_violations(obj: Mapping[str, Any]) -> list[Violation]:
    """The project's annotations whose values the functions cannot parse."""
    meta = obj.get("metadata")
    annotations = meta.get("annotations") if isinstance(meta, Mapping) else None
    if not isinstance(annotations, Mapping):
        return []
    out: list[Violation] = []
    for key in annotations:
        if (
            isinstance(key, str)
            and key.startswith(PROJECT_PREFIX)
            and key not in KNOWN_ANNOTATION_KEYS
        ):
            out.append(Violation(f"metadata.annotations[{key}]", _unknown_key(key)))
    for key, (parse, want) in ANNOTATION_PARSERS.items():
        raw = annotations.get(key)
        if raw is None:
            continue
        path = f"metadata.annotations[{key}]"
        if not isinstance(raw, str):
            out.append(Violation(path, f"Invalid value: {json.dumps(raw)}: must be {want}"))
            continue
        try:
            parse(raw)
        except ValueError as e:
            out.append(Violation(path, f"Invalid value: {json.dumps(raw)}: {e}"))
    return out


def _unknown_key(key: str) -> str:
    # Compared without the shared prefix (it would make every key look close). The
    # user-facing opt-ins are tried first, so a typo of `idle-timeout` is not answered
    # with a record the functions write.
    suffix = key.removeprefix(PROJECT_PREFIX)
    near: list[str] = []
    for pool in (ANNOTATION_PARSERS, KNOWN_ANNOTATION_KEYS):
        suffixes = sorted(name.removeprefix(PROJECT_PREFIX) for name in pool)
        near = near or difflib.get_close_matches(suffix, suffixes, n=1, cutoff=0.75)
    hint = f" (did you mean {json.dumps(PROJECT_PREFIX + near[0])}?)" if near else ""
    return f"unknown annotation key {json.dumps(key)}: the functions ignore it{hint}"


def cluster_violations(obj: Mapping[str, Any]) -> list[Violation]:
    """Everything beyond the CRD: the webhook's rules, unknown fields, bad annotations."""
    webhook = [Violation("cocoon-webhook", msg) for msg in admission.cocoonset_errors(obj)]
    return webhook + unknown_fields(obj) + annotation_violations(obj)
