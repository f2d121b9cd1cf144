"""Registry push notifications (Distribution, Harbor, Artifact Registry, ECR) -> `SnapshotPushed`.

Only a `hibernate` tag on a repository directly under `COCOON_REGISTRY_BASE` named like a VM
of an allowed namespace matters, judged on the payload alone. A bad item of a batch drops alone.
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import partial
from typing import Any

from shared.adapters.result import (
    DropReason,
    Parsed,
    as_list,
    as_object,
    event_id_of,
    guarded,
    opt_str,
    opt_strs,
    show,
)
from shared.config import Settings
from shared.constants import TAG_HIBERNATE
from shared.errors import MalformedEvent
from shared.log import clip
from shared.names import check_digest, check_repository, check_tag, parse_vm_name
from shared.triggers import SnapshotPushed, Source


def snapshot_pushed(
    out: Parsed,
    repository: str | None,
    tag: str | None,
    digest: str | None,
    source: Source,
    settings: Settings,
    event_id: str | None,
) -> None:
    """The common filter; cheapest checks first (most pushes are not `:hibernate`)."""
    if tag is None:
        out.drop(DropReason.UNTAGGED, repository or "", event_id)
        return
    if tag != TAG_HIBERNATE:
        out.drop(DropReason.TAG, f"{repository}:{tag}", event_id)
        return
    base = settings.registry_base
    if base is None:
        out.drop(DropReason.NO_REGISTRY_BASE, "COCOON_REGISTRY_BASE is not set", event_id)
        return
    repo = check_repository(repository)
    check_tag(tag)
    if digest is not None:
        check_digest(digest)
    vm = base.vm_of(repo)
    if vm is None:
        out.drop(DropReason.OUTSIDE_BASE, f"{repo} is not under {base}", event_id)
        return
    candidates = parse_vm_name(vm)
    if not candidates:
        out.drop(DropReason.NOT_A_VM, vm, event_id)
        return
    sets = tuple(
        dict.fromkeys(c.ref for c in candidates if settings.namespace_allowed(c.namespace))
    )
    if not sets:
        out.drop(DropReason.NAMESPACE, vm, event_id)
        return
    out.add(SnapshotPushed(repo, tag, digest, source, vm, event_id=event_id, sets=sets))


# --- CNCF Distribution --------------------------------------------------------


def parse_distribution(envelope: Mapping[str, Any], settings: Settings) -> Parsed:
    """`{"events": [...]}` (media types events.v1+json in 2.8, events.v2+json in 3.x)."""
    out = Parsed(kind="distribution")
    events = as_list(envelope.get("events"), what="events")
    for raw in events:
        event_id = event_id_of(raw, "id")
        guarded(out, event_id, partial(_distribution_one, out, raw, event_id, settings))
    if events:
        out.event_id = event_id_of(events[0], "id")
    return out


def _distribution_one(out: Parsed, raw: object, event_id: str | None, settings: Settings) -> None:
    event = as_object(raw, what="events[]")
    action = event.get("action")
    if action != "push":
        out.drop(DropReason.NOT_PUSH, f"action={show(action)}", event_id)
        return
    target = as_object(event.get("target"), what="target")
    tag = opt_str(target, "tag")
    url = opt_str(target, "url") or ""
    if tag is None and (
        "/blobs/" in url or opt_str(target, "mediaType") == "application/octet-stream"
    ):
        # Each layer and the config are pushed (and notified) before the manifest.
        out.drop(DropReason.BLOB, opt_str(target, "repository") or "", event_id)
        return
    repository, digest = opt_strs(target, "repository", "digest")
    snapshot_pushed(out, repository, tag, digest, Source.DISTRIBUTION, settings, event_id)


# --- Harbor -------------------------------------------------------------------


def parse_harbor_default(payload: Mapping[str, Any], settings: Settings) -> Parsed:
    """Harbor's "Default" payload format: `{"type": "PUSH_ARTIFACT", "event_data": {...}}`."""
    out = Parsed(kind="harbor")
    kind = payload.get("type")
    if kind != "PUSH_ARTIFACT":
        out.drop(DropReason.NOT_PUSH, f"type={show(kind)}")
        return out
    harbor_event_data(out, as_object(payload.get("event_data"), what="event_data"), settings, None)
    return out


def harbor_event_data(
    out: Parsed, data: Mapping[str, Any], settings: Settings, event_id: str | None
) -> None:
    """`event_data` (Default format) == `data` (CloudEvents format)."""
    repository = as_object(data.get("repository"), what="repository")
    full = opt_str(repository, "repo_full_name")
    if full is None:
        ns, name = opt_str(repository, "namespace"), opt_str(repository, "name")
        full = f"{ns}/{name}" if ns and name else None
    resources = as_list(data.get("resources"), what="resources")
    if not resources:
        out.drop(DropReason.UNTAGGED, full or "", event_id)
    for raw in resources:
        guarded(out, event_id, partial(_harbor_resource, out, raw, full, event_id, settings))


def _harbor_resource(
    out: Parsed, raw: object, repository: str | None, event_id: str | None, settings: Settings
) -> None:
    resource = as_object(raw, what="resources[]")
    tag = opt_str(resource, "tag")
    # Harbor writes the digest into `tag` for digest-only operations.
    if tag is not None and tag.startswith("sha256:"):
        tag = None
    digest = opt_str(resource, "digest")
    snapshot_pushed(out, repository, tag, digest, Source.HARBOR, settings, event_id)


# --- Google Artifact Registry (Pub/Sub topic `gcr`) -----------------------------


def split_qualified(ref: str, sep: str) -> tuple[str, str, str]:
    """`HOST[:PORT]/PATH<sep>REF` -> (host, path, ref), `sep` being `@` for a digest, `:` for a
    tag (a `:` followed by a `/` is the host's port)."""
    name, found, value = ref.rpartition(sep)
    if not found or not name or not value or "/" in value:
        raise MalformedEvent(f"not a fully qualified reference: {clip(ref)!r}")
    host, slash, path = name.partition("/")
    if not slash or not host or not path:
        raise MalformedEvent(f"reference without a registry host: {clip(ref)!r}")
    return host, path, value


def parse_artifact_registry(
    message: Mapping[str, Any], settings: Settings, event_id: str | None
) -> Parsed:
    """The decoded `message.data` of topic `gcr`: `{"action","digest"?,"tag"?}`, fully qualified."""
    out = Parsed(kind="artifact-registry", event_id=event_id)
    action = message.get("action")
    if action != "INSERT":
        out.drop(DropReason.NOT_PUSH, f"action={show(action)}")
        return out
    tag_ref = opt_str(message, "tag")
    digest_ref = opt_str(message, "digest")
    if tag_ref is None:
        # Untagged upload (multi-arch children) or a digest-only notification.
        out.drop(DropReason.UNTAGGED, digest_ref or "")
        return out
    host, repository, tag = split_qualified(tag_ref, ":")
    digest: str | None = None
    if digest_ref is not None:
        d_host, d_repo, d_value = split_qualified(digest_ref, "@")
        if (d_host, d_repo) == (host, repository):
            digest = d_value
    base = settings.registry_base
    if tag == TAG_HIBERNATE and base is not None and host.lower() != base.host.lower():
        out.drop(DropReason.OUTSIDE_BASE, f"{host} is not {base.host}")
        return out
    snapshot_pushed(out, repository, tag, digest, Source.ARTIFACT_REGISTRY, settings, event_id)
    return out


# --- AWS ECR via EventBridge ----------------------------------------------------


def parse_ecr(envelope: Mapping[str, Any], settings: Settings) -> Parsed:
    """EventBridge `{"detail-type": "ECR Image Action", "detail": {...}}`."""
    event_id = event_id_of(envelope, "id")
    out = Parsed(kind="ecr", event_id=event_id)
    detail_type = envelope.get("detail-type")
    if detail_type != "ECR Image Action":
        out.drop(DropReason.UNKNOWN_TYPE, f"detail-type={show(detail_type)}")
        return out
    detail = as_object(envelope.get("detail"), what="detail")
    action = detail.get("action-type")
    if action != "PUSH":
        out.drop(DropReason.NOT_PUSH, f"action-type={show(action)}")
        return out
    result = detail.get("result")
    if result != "SUCCESS":
        out.drop(DropReason.PUSH_FAILED, f"result={show(result)}")
        return out
    repository, tag, digest = opt_strs(detail, "repository-name", "image-tag", "image-digest")
    snapshot_pushed(out, repository, tag, digest, Source.ECR, settings, event_id)
    return out


# --- canonical io.cocoonstack.snapshot.pushed ------------------------------------


def parse_snapshot_pushed(
    data: Mapping[str, Any], settings: Settings, event_id: str | None
) -> Parsed:
    out = Parsed(kind="snapshot-pushed", event_id=event_id)
    repository, tag, digest = opt_strs(data, "repository", "tag", "digest")
    snapshot_pushed(out, repository, tag, digest, Source.CANONICAL, settings, event_id)
    return out
