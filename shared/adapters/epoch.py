"""epoch's bucket events -> `SnapshotPushed` (docs/epoch.md).

epoch (cocoonstack's registry, the one vk-cocoon pushes to) sends no
notifications of its own, but it is an OCI Distribution-shaped server over an
object store, and it stores each tag as one object. Its manifest push
(`registry/registry.go` `PushManifestJSON`) writes, in order:

    <prefix>manifests/<repo>/_digests/sha256-<hex>.json   the manifest by digest
    <prefix>manifests/<repo>/<tag>.json                   the tag (now served)
    <prefix>catalog.json                                  the catalog

and blobs land under `<prefix>blobs/sha256/...` before all of that; the prefix
is its `EPOCH_S3_PREFIX` (`COCOON_EPOCH_PREFIX` here, default `epoch/`). The
bucket tells us when an object is created: a GCS object-finalize CloudEvent
(Eventarc, to `release`), an S3 event notification (`{"Records": [...]}`, as
AWS S3, Ceph RGW and SeaweedFS post it) or EventBridge's "Object Created"
(both to `ingest /registry`). Only the tag object `<prefix>manifests/<repo>/
hibernate.json` can matter; everything else is dropped here with its reason,
before any client exists (a push creates a dozen objects).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any
from urllib.parse import unquote_plus

from shared.adapters.push_events import snapshot_pushed
from shared.adapters.result import (
    DropReason,
    Parsed,
    as_list,
    as_object,
    event_id_of,
    guarded,
    opt_str,
    show,
)
from shared.config import Settings
from shared.errors import MalformedEvent
from shared.triggers import Source

MANIFESTS = "manifests/"
DIGESTS = "_digests"
CATALOG = "catalog.json"
BLOBS = "blobs/"
TAG_SUFFIX = ".json"
S3_CREATED = "ObjectCreated:"
EVENTBRIDGE_CREATED = "Object Created"
EVENTBRIDGE_S3 = "aws.s3"


def object_pushed(
    out: Parsed,
    key: str | None,
    *,
    source: Source,
    settings: Settings,
    event_id: str | None,
) -> None:
    """One created object: a `SnapshotPushed` for `<prefix>manifests/<repo>/hibernate.json`."""
    if not key:
        raise MalformedEvent("bucket event without an object name")
    prefix = settings.epoch_prefix
    if not key.startswith(prefix):
        out.drop(DropReason.OBJECT_PREFIX, f"{key} (prefix {prefix!r})", event_id)
        return
    rest = key[len(prefix) :]
    if rest == CATALOG:
        out.drop(DropReason.CATALOG, key, event_id)
        return
    if rest.startswith(BLOBS):
        out.drop(DropReason.BLOB, key, event_id)
        return
    if not rest.startswith(MANIFESTS) or not rest.endswith(TAG_SUFFIX):
        out.drop(DropReason.NOT_A_TAG_OBJECT, key, event_id)
        return
    repository, _, leaf = rest[len(MANIFESTS) : -len(TAG_SUFFIX)].rpartition("/")
    if not repository or not leaf:
        out.drop(DropReason.NOT_A_TAG_OBJECT, key, event_id)
        return
    if repository.endswith("/" + DIGESTS) or repository == DIGESTS:
        out.drop(DropReason.DIGEST_OBJECT, key, event_id)
        return
    # The tag object's content is the manifest, but its digest is not in the event
    # (GCS's md5/crc32c and S3's ETag hash the object, not sha256): the gate asks.
    snapshot_pushed(
        out,
        repository=repository,
        tag=leaf,
        digest=None,
        source=source,
        settings=settings,
        event_id=event_id,
    )


# --- GCS (Eventarc `google.cloud.storage.object.v1.finalized` to `release`) -------------


def parse_gcs_finalized(
    data: Mapping[str, Any], settings: Settings, event_id: str | None
) -> Parsed:
    """StorageObjectData: `name` is the object key (never URL-encoded), `bucket` its bucket."""
    out = Parsed(kind="epoch-gcs", event_id=event_id)
    object_pushed(
        out, opt_str(data, "name"), source=Source.EPOCH_GCS, settings=settings, event_id=event_id
    )
    return out


# --- S3 event notification (`{"Records": [...]}`) to `ingest /registry` ---------------------


def parse_s3_records(envelope: Mapping[str, Any], settings: Settings) -> Parsed:
    out = Parsed(kind="epoch-s3")
    records = as_list(envelope.get("Records"), what="Records")
    for raw in records:
        event_id = _s3_record_id(raw)
        guarded(out, event_id, _s3_one, raw, settings)
    if records:
        out.event_id = _s3_record_id(records[0])
    return out


def _s3_record_id(raw: object) -> str | None:
    if not isinstance(raw, Mapping):
        return None
    elements = raw.get("responseElements")
    if isinstance(elements, Mapping):
        return event_id_of(elements, "x-amz-request-id")
    return None


def _s3_one(out: Parsed, raw: object, event_id: str | None, settings: Settings) -> None:
    record = as_object(raw, what="Records[]")
    name = opt_str(record, "eventName") or ""
    # AWS writes `ObjectCreated:Put`; some S3-compatible stores prefix `s3:`.
    if not name.removeprefix("s3:").startswith(S3_CREATED):
        out.drop(DropReason.NOT_PUSH, f"eventName={show(record.get('eventName'))}", event_id)
        return
    s3 = as_object(record.get("s3"), what="s3")
    obj = as_object(s3.get("object"), what="s3.object")
    key = opt_str(obj, "key")
    # The key of an S3 notification is URL-encoded (spaces as `+`).
    object_pushed(
        out,
        unquote_plus(key) if key else None,
        source=Source.EPOCH_S3,
        settings=settings,
        event_id=event_id,
    )


# --- EventBridge "Object Created" (an API destination) to `ingest /registry` ---------------


def is_eventbridge_s3(envelope: Mapping[str, Any]) -> bool:
    return envelope.get("source") == EVENTBRIDGE_S3


def parse_eventbridge_s3(envelope: Mapping[str, Any], settings: Settings) -> Parsed:
    event_id = event_id_of(envelope, "id")
    out = Parsed(kind="epoch-eventbridge", event_id=event_id)
    detail_type = envelope.get("detail-type")
    if detail_type != EVENTBRIDGE_CREATED:
        out.drop(DropReason.NOT_PUSH, f"detail-type={show(detail_type)}")
        return out
    detail = as_object(envelope.get("detail"), what="detail")
    obj = as_object(detail.get("object"), what="detail.object")
    object_pushed(
        out, opt_str(obj, "key"), source=Source.EPOCH_S3, settings=settings, event_id=event_id
    )
    return out
