"""Type-specific strategies of built-in resources (what kube-apiserver's registry does).

Pods: create-time defaults (the API defaulters plus the DefaultTolerationSeconds
admission plugin), status reset to Pending with a QoS class, spec immutability
on update, QoS. Events: the events.k8s.io/v1 view of core Events (one storage,
two shapes, as upstream). Namespaces: the `kubernetes` finalizer and name label.
"""

from __future__ import annotations

import base64
import copy
import json
import re
from typing import Any

from devstack.kubeapi.errors import Cause, bad_request
from shared.names import is_dns1123_label

_DEFAULT_TOLERATIONS = (
    {
        "key": "node.kubernetes.io/not-ready",
        "operator": "Exists",
        "effect": "NoExecute",
        "tolerationSeconds": 300,
    },
    {
        "key": "node.kubernetes.io/unreachable",
        "operator": "Exists",
        "effect": "NoExecute",
        "tolerationSeconds": 300,
    },
)


def _image_pull_policy(image: str) -> str:
    tail = image.rsplit("/", 1)[-1]
    if "@" in tail:
        return "IfNotPresent"
    if ":" not in tail or tail.endswith(":latest"):
        return "Always"
    return "IfNotPresent"


def _default_container(c: dict[str, Any]) -> None:
    c.setdefault("terminationMessagePath", "/dev/termination-log")
    c.setdefault("terminationMessagePolicy", "File")
    if isinstance(c.get("image"), str):
        c.setdefault("imagePullPolicy", _image_pull_policy(c["image"]))
    res = c.setdefault("resources", {})
    # SetDefaults_Pod: a resource with a limit and no request is requested at its limit
    # (the operator's drift check compares requests, so a missing default is drift).
    limits = res.get("limits") if isinstance(res, dict) else None
    if isinstance(limits, dict) and limits:
        requests = res.setdefault("requests", {})
        if isinstance(requests, dict):
            for name, value in limits.items():
                requests.setdefault(name, value)
    for p in c.get("ports") or []:
        if isinstance(p, dict):
            p.setdefault("protocol", "TCP")


def default_pod(pod: dict[str, Any]) -> None:
    spec = pod.setdefault("spec", {})
    if not isinstance(spec, dict):
        return
    for field in ("containers", "initContainers"):
        for c in spec.get(field) or []:
            if isinstance(c, dict):
                _default_container(c)
    spec.setdefault("restartPolicy", "Always")
    spec.setdefault("terminationGracePeriodSeconds", 30)
    spec.setdefault("dnsPolicy", "ClusterFirst")
    spec.setdefault("securityContext", {})
    spec.setdefault("schedulerName", "default-scheduler")
    spec.setdefault("enableServiceLinks", True)
    spec.setdefault("preemptionPolicy", "PreemptLowerPriority")
    spec.setdefault("priority", 0)
    tolerations = spec.setdefault("tolerations", [])
    if isinstance(tolerations, list):
        for t in _DEFAULT_TOLERATIONS:
            if not any(
                isinstance(x, dict) and x.get("key") == t["key"] and x.get("effect") == t["effect"]
                for x in tolerations
            ):
                tolerations.append(dict(t))


def qos_class(pod: dict[str, Any]) -> str:
    containers = [
        c
        for f in ("containers", "initContainers")
        for c in (pod.get("spec", {}).get(f) or [])
        if isinstance(c, dict)
    ]
    any_set = False
    guaranteed = True
    for c in containers:
        res = c.get("resources") or {}
        req, lim = res.get("requests") or {}, res.get("limits") or {}
        if req or lim:
            any_set = True
        for r in ("cpu", "memory"):
            if r not in lim or req.get(r, lim[r]) != lim[r]:
                guaranteed = False
    if not any_set:
        return "BestEffort"
    return "Guaranteed" if guaranteed else "Burstable"


# apimachinery validation.IsQualifiedName, message for message (scheduling gate names).
_QUALIFIED_NAME = re.compile(r"([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]")
_DNS1123_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
_QUALIFIED_NAME_MSG = (
    "must consist of alphanumeric characters, '-', '_' or '.', and must start and end with "
    "an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for "
    "validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')"
)
_DNS1123_SUBDOMAIN_MSG = (
    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' "
    "or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex "
    "used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"
)


def _go_quote(value: str) -> str:
    """Go's %q for the printable strings field errors quote (non-ASCII kept as is)."""
    return json.dumps(value, ensure_ascii=False)


def qualified_name_errors(value: str) -> list[str]:
    """What IsQualifiedName says about `value` (empty: valid), in its order."""
    parts = value.split("/")
    if len(parts) > 2:
        return [
            f"a qualified name {_QUALIFIED_NAME_MSG} with an optional DNS subdomain prefix "
            "and '/' (e.g. 'example.com/MyName')"
        ]
    errs: list[str] = []
    name = parts[-1]
    if len(parts) == 2:
        prefix = parts[0]
        if not prefix:
            errs.append("prefix part must be non-empty")
        else:
            if len(prefix) > 253:
                errs.append("prefix part must be no more than 253 characters")
            if not _DNS1123_SUBDOMAIN.fullmatch(prefix):
                errs.append(f"prefix part {_DNS1123_SUBDOMAIN_MSG}")
    if not name:
        errs.append("name part must be non-empty")
    elif len(name) > 63:
        errs.append("name part must be no more than 63 characters")
    if not _QUALIFIED_NAME.fullmatch(name):
        errs.append(f"name part {_QUALIFIED_NAME_MSG}")
    return errs


def _validate_scheduling_gates(gates: Any) -> list[Cause]:
    """validateSchedulingGates: each name a qualified name, no name twice (create and update)."""
    causes: list[Cause] = []
    seen: set[str] = set()
    for i, gate in enumerate(gates if isinstance(gates, list) else []):
        name = str(gate.get("name") or "") if isinstance(gate, dict) else ""
        path = f"spec.schedulingGates[{i}]"
        causes += [
            Cause("FieldValueInvalid", f"Invalid value: {_go_quote(name)}: {msg}", path)
            for msg in qualified_name_errors(name)
        ]
        if name in seen:
            causes.append(Cause("FieldValueDuplicate", f"Duplicate value: {_go_quote(name)}", path))
        seen.add(name)
    return causes


def drop_empty_scheduling_gates(pod: dict[str, Any]) -> None:
    """`schedulingGates` is omitempty in the Go type: an empty list (or null) is stored as
    no field at all, so `[]` written by a client reads back absent."""
    spec = pod.get("spec")
    if isinstance(spec, dict) and "schedulingGates" in spec and not spec["schedulingGates"]:
        del spec["schedulingGates"]


SCHEDULING_GATED_MESSAGE = "Scheduling is blocked due to non-empty scheduling gates"


def apply_scheduling_gated_condition(pod: dict[str, Any], now: str) -> None:
    """The pod strategy's PrepareForCreate: a gated pod is stored with PodScheduled=False,
    reason SchedulingGated. The API server sets it at create only; removing the last gate
    later leaves it as it is (kube-scheduler rewrites it when it binds the pod)."""
    if not (pod.get("spec") or {}).get("schedulingGates"):
        return
    status = pod.setdefault("status", {})
    conditions = status.setdefault("conditions", [])
    if any(isinstance(c, dict) and c.get("type") == "PodScheduled" for c in conditions):
        return
    conditions.append(
        {
            "type": "PodScheduled",
            "status": "False",
            "lastProbeTime": None,
            "lastTransitionTime": now,
            "reason": "SchedulingGated",
            "message": SCHEDULING_GATED_MESSAGE,
        }
    )


def validate_pod_create(pod: dict[str, Any]) -> list[Cause]:
    """ValidatePodCreate's extra: a gated pod cannot name its node (update has the generic
    immutability error for nodeName instead)."""
    spec = pod.get("spec")
    if isinstance(spec, dict) and spec.get("nodeName") and spec.get("schedulingGates"):
        return [
            Cause(
                "FieldValueForbidden",
                "Forbidden: cannot be set until all schedulingGates have been cleared",
                "spec.nodeName",
            )
        ]
    return []


def validate_pod(pod: dict[str, Any]) -> list[Cause]:
    causes: list[Cause] = []
    spec = pod.get("spec")
    if not isinstance(spec, dict):
        return [Cause("FieldValueRequired", "Required value", "spec")]
    containers = spec.get("containers")
    if not containers:
        causes.append(Cause("FieldValueRequired", "Required value", "spec.containers"))
    for field in ("containers", "initContainers"):
        for i, c in enumerate(spec.get(field) or []):
            path = f"spec.{field}[{i}]"
            name = c.get("name") if isinstance(c, dict) else None
            if not name:
                causes.append(Cause("FieldValueRequired", "Required value", f"{path}.name"))
            elif not is_dns1123_label(str(name)):
                causes.append(
                    Cause(
                        "FieldValueInvalid",
                        f'Invalid value: "{name}": a lowercase RFC 1123 label must consist of '
                        "lower case "
                        "alphanumeric characters or '-', and must start and end with an "
                        "alphanumeric character",
                        f"{path}.name",
                    )
                )
            if isinstance(c, dict) and not c.get("image"):
                causes.append(Cause("FieldValueRequired", "Required value", f"{path}.image"))
    if spec.get("restartPolicy") not in ("Always", "OnFailure", "Never"):
        causes.append(
            Cause(
                "FieldValueNotSupported",
                f'Unsupported value: "{spec.get("restartPolicy")}": supported values: '
                '"Always", "OnFailure", "Never"',
                "spec.restartPolicy",
            )
        )
    causes += _validate_scheduling_gates(spec.get("schedulingGates"))
    return causes


_POD_UPDATE_FORBIDDEN = (
    "Forbidden: pod updates may not change fields other than `spec.containers[*].image`,"
    "`spec.initContainers[*].image`,`spec.activeDeadlineSeconds`,`spec.tolerations` "
    "(only additions to existing tolerations),`spec.terminationGracePeriodSeconds` "
    "(allow it to be set to 1 if it was previously negative)"
)


def validate_pod_update(new: dict[str, Any], old: dict[str, Any]) -> list[Cause]:
    """Pod spec is immutable but for images, deadlines, added tolerations, gates."""
    a = copy.deepcopy(new.get("spec") or {})
    b = old.get("spec") or {}
    for field in ("containers", "initContainers"):
        for ca, cb in zip(a.get(field) or [], b.get(field) or [], strict=False):
            if isinstance(ca, dict) and isinstance(cb, dict) and "image" in cb:
                ca["image"] = cb["image"]
    for field in ("activeDeadlineSeconds", "terminationGracePeriodSeconds"):
        if field in b:
            a[field] = b[field]
        else:
            a.pop(field, None)
    old_tol = b.get("tolerations") or []
    new_tol = a.get("tolerations") or []
    if all(t in new_tol for t in old_tol):
        if "tolerations" in b:
            a["tolerations"] = b["tolerations"]
        else:
            a.pop("tolerations", None)
    # Scheduling gates may only be removed (reordering is no addition): each new name is
    # its own cause at its index, and the gates are then left out of the generic check.
    causes: list[Cause] = []
    old_names = {g.get("name") for g in b.get("schedulingGates") or [] if isinstance(g, dict)}
    for i, g in enumerate(a.get("schedulingGates") or []):
        name = g.get("name") if isinstance(g, dict) else None
        if name not in old_names:
            causes.append(
                Cause(
                    "FieldValueForbidden",
                    "Forbidden: only deletion is allowed, but found new scheduling gate "
                    f"'{name or ''}'",
                    f"spec.schedulingGates[{i}].name",
                )
            )
    if "schedulingGates" in b:
        a["schedulingGates"] = b["schedulingGates"]
    else:
        a.pop("schedulingGates", None)
    if a != b:
        causes.append(Cause("FieldValueForbidden", _POD_UPDATE_FORBIDDEN, "spec"))
    return causes


# --- events.k8s.io/v1 <-> core/v1 Event --------------------------------------

# (events.k8s.io/v1 field, core/v1 field): one storage, renamed fields.
_EVENT_FIELDS = (
    ("regarding", "involvedObject"),
    ("note", "message"),
    ("reportingController", "reportingComponent"),
    ("deprecatedSource", "source"),
    ("deprecatedFirstTimestamp", "firstTimestamp"),
    ("deprecatedLastTimestamp", "lastTimestamp"),
    ("deprecatedCount", "count"),
)
_EVENT_SAME = ("reason", "type", "action", "related", "reportingInstance", "eventTime", "series")


def core_event_to_v1(core: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {
        "kind": "Event",
        "apiVersion": "events.k8s.io/v1",
        "metadata": core.get("metadata", {}),
    }
    for new, old in _EVENT_FIELDS:
        if core.get(old) not in (None, "", {}):
            out[new] = core[old]
    for f in _EVENT_SAME:
        if core.get(f) not in (None, ""):
            out[f] = core[f]
    # events.k8s.io/v1 eventTime has no omitempty upstream: a core Event without
    # one reads back as `"eventTime": null`.
    out.setdefault("eventTime", None)
    return out


def v1_event_to_core(ev: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {"kind": "Event", "apiVersion": "v1", "metadata": ev.get("metadata", {})}
    for new, old in _EVENT_FIELDS:
        if ev.get(new) is not None:
            out[old] = ev[new]
    for f in _EVENT_SAME:
        if ev.get(f) is not None:
            out[f] = ev[f]
    out.setdefault("involvedObject", {})
    out.setdefault("source", {})
    out.setdefault("reportingInstance", "")
    out.setdefault("reportingComponent", "")
    return out


def validate_core_event(
    ev: dict[str, Any], *, controller_field: str = "reportingComponent"
) -> list[Cause]:
    """The legacy Event validation every Event passes (core/v1 stops here)."""
    causes: list[Cause] = []
    ns = str(ev.get("metadata", {}).get("namespace") or "")
    inv = ev.get("involvedObject") or {}
    inv_ns = str(inv.get("namespace") or "")
    mismatch = Cause(
        "FieldValueInvalid",
        f'Invalid value: "{inv_ns}": does not match event.namespace',
        "involvedObject.namespace",
    )
    if not ev.get("eventTime"):
        if (not inv_ns and ns not in ("", "default")) or (inv_ns and inv_ns != ns):
            causes.append(mismatch)
        return causes
    # "New" events (eventTime set) must say who reported what.
    if not inv_ns and ns not in ("default", "kube-system"):
        causes.append(mismatch)
    if not ev.get("reportingComponent"):
        causes.append(Cause("FieldValueRequired", "Required value", controller_field))
    for f, limit in (("reportingInstance", 128), ("action", 128), ("reason", 128)):
        value = str(ev.get(f) or "")
        if not value:
            causes.append(Cause("FieldValueRequired", "Required value", f))
        elif len(value) > limit:
            causes.append(
                Cause(
                    "FieldValueInvalid",
                    f'Invalid value: "": can have at most {limit} characters',
                    f,
                )
            )
    if len(str(ev.get("message") or "")) > 1024:
        causes.append(
            Cause(
                "FieldValueInvalid",
                'Invalid value: "": can have at most 1024 characters',
                "message",
            )
        )
    return causes


def validate_v1_event(ev: dict[str, Any]) -> list[Cause]:
    causes: list[Cause] = []
    for f in ("eventTime", "reportingController", "reportingInstance", "action", "reason"):
        if not ev.get(f):
            causes.append(Cause("FieldValueRequired", "Required value", f))
    if ev.get("type") not in ("Normal", "Warning"):
        causes.append(
            Cause(
                "FieldValueInvalid",
                f'Invalid value: "{ev.get("type", "")}": has invalid value: {ev.get("type", "")}',
                "type",
            )
        )
    if len(str(ev.get("note", ""))) > 1024:
        causes.append(Cause("FieldValueTooLong", "Too long: may not be longer than 1024", "note"))
    return causes


def fold_string_data(secret: dict[str, Any]) -> None:
    """Secrets: `stringData` is write-only, merged into base64 `data`; type defaults to Opaque."""
    string_data = secret.pop("stringData", None) or {}
    if string_data:
        data = secret.setdefault("data", {})
        for k, v in string_data.items():
            data[k] = base64.b64encode(str(v).encode()).decode()
    secret.setdefault("type", "Opaque")


# metav1.MicroTime's wire format: RFC 3339 with exactly six fractional digits.
_MICRO_TIME = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{6}(Z|[+-]\d{2}:\d{2})")


def check_micro_time(event: dict[str, Any], kind: str) -> None:
    """An Event's `eventTime` is a MicroTime: anything else fails decoding (400), as the
    Go decoder parses it with layout 2006-01-02T15:04:05.000000Z07:00."""
    value = event.get("eventTime")
    if value is None or (isinstance(value, str) and _MICRO_TIME.fullmatch(value)):
        return
    raise bad_request(
        f'{kind} in version "v1" cannot be handled as a {kind}: parsing time '
        f'"{value}" as "2006-01-02T15:04:05.000000Z07:00": cannot parse'
    )
