"""Kubernetes change notifications (audit EventList, GKE audit log, ApiServerSource) -> SetChanged.

One question, answered without the network: a successful write to a CocoonSet, or to a
pod of one (by its set label, else its `<set>-<slot>` name), in an allowed namespace?
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from datetime import datetime
from functools import partial
from typing import Any

from shared.adapters.result import (
    DropReason,
    Parsed,
    as_list,
    as_object,
    dig,
    event_id_of,
    guarded,
    loads,
    opt_object,
    opt_str,
    show,
)
from shared.config import Settings
from shared.constants import ANN_LIFECYCLE_STATE, GROUP, LABEL_SET_NAME, PLURAL
from shared.durations import parse_rfc3339
from shared.enums import LifecycleState
from shared.errors import MalformedEvent
from shared.log import clip
from shared.names import SetRef, check_name, check_namespace, pod_set_candidates
from shared.ports import Report
from shared.triggers import SetChanged, Source, Trigger

WRITE_VERBS = frozenset({"create", "update", "patch", "delete", "deletecollection"})
READ_VERBS = frozenset({"get", "list", "watch"})
PODS = "pods"
# Status writes are how the operator moves a set to Suspended and vk-cocoon
# reports a pod; an eviction deletes the pod without a separate audit event of its own;
# other subresources (exec, log, binding, ...) change nothing the reconcile reads.
WATCHED_SUBRESOURCES = frozenset({"", "status", "eviction"})
# GKE spells the API group reversed in method names: `io.k8s.core.v1.pods.patch`,
# `io.cocoonstack.cocoonset.v1.cocoonsets.patch` (docs/design.md#gke-audit-methods).
_GKE_METHOD_PREFIXES = {"io.k8s.core.": "", ".".join(reversed(GROUP.split("."))) + ".": GROUP}
_VERSION = re.compile(r"^v[0-9]+(?:(?:alpha|beta)[0-9]+)?$")


def object_changed(
    out: Parsed,
    *,
    verb: str | None,
    resource: str | None,
    group: str | None,
    subresource: str | None,
    namespace: str | None,
    name: str | None,
    obj: Mapping[str, Any] | None,
    source: Source,
    settings: Settings,
    event_id: str | None,
    report_at: datetime | None = None,
) -> None:
    """The common filter: cheap structural checks first, then name validation.

    `report_at`: this pod write was vk-cocoon's `hibernated` report, received then.
    """
    if verb in READ_VERBS:
        out.drop(DropReason.READ, f"{resource}.{verb}", event_id)
        return
    if verb not in WRITE_VERBS:
        out.drop(DropReason.VERB, show(verb), event_id)
        return
    if (resource, group or "") not in ((PLURAL, GROUP), (PODS, "")):  # pods: the core group
        out.drop(DropReason.RESOURCE, clip(f"{group or 'core'}/{resource}"), event_id)
        return
    if (subresource or "") not in WATCHED_SUBRESOURCES:
        out.drop(DropReason.SUBRESOURCE, clip(f"{resource}/{subresource}"), event_id)
        return
    if namespace is None:
        out.drop(DropReason.NO_NAME, "no namespace", event_id)
        return
    ns = check_namespace(namespace)
    if not settings.namespace_allowed(ns):
        out.drop(DropReason.NAMESPACE, ns, event_id)
        return
    if name is None:
        # deletecollection / collection create: nothing names a set; the sweep converges.
        out.drop(DropReason.NO_NAME, f"{resource}.{verb} in {ns}", event_id)
        return
    why = f"{resource}.{verb}" if not subresource else f"{resource}.{subresource}.{verb}"
    if resource == PLURAL:
        out.add(SetChanged(SetRef(ns, check_name(name)), why, source, event_id=event_id))
        return
    pod = check_name(name, what="pod name")
    if obj is None:
        sets = pod_set_candidates(pod)
    else:
        owner = dig(obj, "metadata", "labels", LABEL_SET_NAME)
        sets = [check_name(owner, what="cocoonset name")] if owner is not None else []
    if not sets:
        out.drop(DropReason.NOT_COCOONSET_POD, f"{ns}/{pod}", event_id)
        return
    report = None if report_at is None else Report(ns, pod, report_at, "audit")
    for set_name in sets:
        out.add(SetChanged(SetRef(ns, set_name), why, source, event_id=event_id, report=report))


# --- kube-apiserver audit webhook -------------------------------------------------


def parse_audit_eventlist(body: bytes | str, settings: Settings) -> Parsed:
    """An `audit.k8s.io/v1` `EventList` as the audit webhook POSTs it."""
    envelope = as_object(loads(body, what="audit EventList"), what="audit EventList")
    kind = envelope.get("kind")
    if kind is not None and kind != "EventList":
        raise MalformedEvent(f"expected kind EventList, got {show(kind)!r}")
    out = Parsed(kind="k8s-audit")
    items = as_list(envelope.get("items"), what="items")
    for raw in items:
        event_id = event_id_of(raw, "auditID")
        guarded(out, event_id, partial(_audit_one, out, raw, event_id, settings))
    if items:
        out.event_id = event_id_of(items[0], "auditID")
    return out


def _audit_one(out: Parsed, raw: object, event_id: str | None, settings: Settings) -> None:
    event = as_object(raw, what="items[]")
    stage = event.get("stage")
    if stage != "ResponseComplete":
        out.drop(DropReason.STAGE, show(stage), event_id)
        return
    status = opt_object(event, "responseStatus") or {}
    code = status.get("code")
    if not isinstance(code, int) or isinstance(code, bool) or not 200 <= code < 300:
        out.drop(DropReason.REQUEST_FAILED, f"code={show(code)}", event_id)
        return
    ref = opt_object(event, "objectRef")
    if ref is None:
        out.drop(DropReason.RESOURCE, "non-resource request", event_id)
        return
    verb = opt_str(event, "verb")
    obj, name = _written(verb, opt_str(ref, "name"), event, "responseObject", "requestObject")
    object_changed(
        out,
        verb=verb,
        resource=opt_str(ref, "resource"),
        group=opt_str(ref, "apiGroup"),
        subresource=opt_str(ref, "subresource"),
        namespace=opt_str(ref, "namespace"),
        name=name,
        obj=obj,
        source=Source.K8S_AUDIT,
        settings=settings,
        event_id=event_id,
        report_at=report_time(event),
    )


def report_time(event: Mapping[str, Any]) -> datetime | None:
    """When the kube-apiserver received vk-cocoon's `hibernated` report, if this event is one:
    a pod patch setting the lifecycle annotation to `hibernated` (a PUT of the whole pod would
    show it without setting it). Anything else is None, never an error."""
    ref = event.get("objectRef")
    if not isinstance(ref, Mapping) or ref.get("resource") != "pods" or ref.get("apiGroup"):
        return None
    if event.get("verb") != "patch" or (ref.get("subresource") or "") not in ("", "status"):
        return None
    state = dig(event, "requestObject", "metadata", "annotations", ANN_LIFECYCLE_STATE)
    if state != LifecycleState.HIBERNATED.value:
        return None
    received = event.get("requestReceivedTimestamp")
    if not isinstance(received, str):
        return None
    try:
        return parse_rfc3339(received)
    except ValueError:
        return None


def _written(
    verb: str | None, name: str | None, event: Mapping[str, Any], response: str, request: str
) -> tuple[Mapping[str, Any] | None, str | None]:
    """The Pod or CocoonSet carried (the response, else a create's request) and its name."""
    obj = _full_object(opt_object(event, response))
    if obj is None and verb == "create":
        obj = _full_object(opt_object(event, request))
    if name is None and obj is not None:
        name = opt_str(as_object(obj.get("metadata"), what="metadata"), "name")
    return obj, name


def _full_object(obj: Mapping[str, Any] | None) -> Mapping[str, Any] | None:
    """A Pod or CocoonSet in the event (not a patch, not a `Status`), else None."""
    if obj is None or not isinstance(obj.get("metadata"), Mapping):
        return None
    at_type = obj.get("@type")
    typed = isinstance(at_type, str) and at_type.endswith(("/v1.Pod", "/v1.CocoonSet"))
    return obj if typed or obj.get("kind") in ("Pod", "CocoonSet") else None


# --- GKE audit logs via Eventarc ---------------------------------------------------


def parse_gke_method(method: str) -> tuple[str, str, str | None, str] | None:
    """`io.k8s.core.v1.pods.status.patch` -> (group, resource, subresource, verb); None for a
    group this project does not watch."""
    for prefix, group in _GKE_METHOD_PREFIXES.items():
        if not method.startswith(prefix):
            continue
        # `v1.pods.patch` or `v1.pods.status.patch`: version, resource, [subresource,] verb.
        parts = method[len(prefix) :].split(".")
        if len(parts) not in (3, 4) or not _VERSION.match(parts[0]):
            return None
        return group, parts[1], parts[2] if len(parts) == 4 else None, parts[-1]
    return None


def _gke_resource(resource_name: str) -> tuple[str | None, str | None]:
    """(namespace, name) from `core/v1/namespaces/NS/pods/NAME[/sub]`."""
    parts = resource_name.split("/")
    if "namespaces" not in parts:
        return None, None
    i = parts.index("namespaces")
    ns = parts[i + 1] if len(parts) > i + 1 else None
    name = parts[i + 3] if len(parts) > i + 3 else None
    return ns or None, name or None


def parse_gke_audit(
    entry: Mapping[str, Any],
    attributes: Mapping[str, Any],
    settings: Settings,
    event_id: str | None,
) -> Parsed:
    """A Cloud Logging LogEntry (`protoPayload` = AuditLog); the CloudEvent's extensions win."""
    payload = opt_object(entry, "protoPayload") or {}
    op = opt_object(entry, "operation") or {}
    event_id = event_id_of(op, "id") or event_id_of(entry, "insertId") or event_id
    out = Parsed(kind="gke-audit", event_id=event_id)

    def attr(ce_key: str, payload_key: str) -> str | None:
        return _str_attr(attributes, ce_key) or opt_str(payload, payload_key)

    service = attr("servicename", "serviceName")
    if service != "k8s.io":
        out.drop(DropReason.SERVICE, show(service))
        return out
    method = attr("methodname", "methodName")
    if method is None:
        raise MalformedEvent("audit log entry without a methodName")
    parsed = parse_gke_method(method)
    if parsed is None:
        verb = method.rpartition(".")[2]
        reason = DropReason.READ if verb in READ_VERBS else DropReason.RESOURCE
        out.drop(reason, clip(method))
        return out
    group, resource, subresource, verb = parsed
    status = opt_object(payload, "status") or {}
    grpc = status.get("code")
    response = opt_object(payload, "response")
    failed = grpc not in (None, 0)
    if response is not None and _is_status(response):
        code = response.get("code")
        failed = failed or (isinstance(code, int) and not 200 <= code < 300)
    if failed:
        out.drop(DropReason.REQUEST_FAILED, f"{method} status={show(grpc)}")
        return out
    ns, name = _gke_resource(attr("resourcename", "resourceName") or "")
    obj, name = _written(verb, name, payload, "response", "request")
    object_changed(
        out,
        verb=verb,
        resource=resource,
        group=group,
        subresource=subresource,
        namespace=ns,
        name=name,
        obj=obj,
        source=Source.GKE_AUDIT,
        settings=settings,
        event_id=event_id,
    )
    return out


def _is_status(obj: Mapping[str, Any]) -> bool:
    at_type = obj.get("@type")
    return obj.get("kind") == "Status" or (isinstance(at_type, str) and at_type.endswith(".Status"))


# --- Knative ApiServerSource --------------------------------------------------------

_KNATIVE_VERBS = {"add": "create", "update": "update", "delete": "delete"}


def parse_knative(
    ce_type: str, data: Any, attributes: Mapping[str, Any], settings: Settings, event_id: str | None
) -> Parsed:
    """`dev.knative.apiserver.{resource,ref}.{add,update,delete}`."""
    out = Parsed(kind="knative", event_id=event_id)
    mode, _, action = ce_type.removeprefix("dev.knative.apiserver.").partition(".")
    verb = _KNATIVE_VERBS.get(action)
    if mode not in ("resource", "ref") or verb is None:
        out.drop(DropReason.UNKNOWN_TYPE, clip(ce_type))
        return out
    body = as_object(data, what="data")
    if mode == "resource":
        meta = as_object(body.get("metadata"), what="metadata")
        namespace, name, obj = opt_str(meta, "namespace"), opt_str(meta, "name"), body
    else:
        namespace, name, obj = opt_str(body, "namespace"), opt_str(body, "name"), None
    kind = opt_str(body, "kind") or _str_attr(attributes, "kind")
    api_version = opt_str(body, "apiVersion") or _str_attr(attributes, "apiversion") or ""
    object_changed(
        out,
        verb=verb,
        resource={"Pod": PODS, "CocoonSet": PLURAL}.get(kind or "", show(kind)),
        group=api_version.rpartition("/")[0],
        subresource=None,
        namespace=namespace or _str_attr(attributes, "namespace"),
        name=name or _str_attr(attributes, "name"),
        obj=obj,
        source=Source.KNATIVE,
        settings=settings,
        event_id=event_id,
    )
    return out


def _str_attr(attributes: Mapping[str, Any], key: str) -> str | None:
    value = attributes.get(key)
    return value if isinstance(value, str) and value else None


# --- canonical io.cocoonstack.cocoonset.changed -------------------------------------


def set_event(
    out: Parsed, data: Any, settings: Settings, make: Callable[[SetRef], Trigger]
) -> Parsed:
    """`{"namespace", "name"}` of the canonical set events -> `make(ref)`, namespace allowed."""
    body = as_object(data, what="data")
    ref = SetRef(check_namespace(body.get("namespace")), check_name(body.get("name")))
    if settings.namespace_allowed(ref.namespace):
        out.add(make(ref))
    else:
        out.drop(DropReason.NAMESPACE, str(ref))
    return out


def parse_set_changed(data: Any, settings: Settings, event_id: str | None) -> Parsed:
    make = partial(SetChanged, why="cocoonset.changed", source=Source.CANONICAL, event_id=event_id)
    return set_event(Parsed(kind="set-changed", event_id=event_id), data, settings, make)
