"""Just enough of Kubernetes' protobuf encoding to accept what kubectl sends as protobuf.

kubectl's typed generators (`kubectl create namespace|configmap|secret`) post
`application/vnd.kubernetes.protobuf`: the `k8s\\x00` magic, a runtime.Unknown
envelope, then the object in the field numbering of k8s.io/api's
generated.proto. Only those kinds are decoded here (into the JSON shape the
rest of the server uses); any other protobuf body is 415, and every response
is JSON, which clients accept (they send `Accept: ...protobuf,application/json`).
"""

from __future__ import annotations

import base64
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from devstack.kubeapi.errors import ApiError, bad_request

MAGIC = b"k8s\x00"
CONTENT_TYPE = "application/vnd.kubernetes.protobuf"

Fields = dict[int, list[Any]]


def _varint(buf: bytes, pos: int) -> tuple[int, int]:
    result = shift = 0
    while True:
        if pos >= len(buf):
            raise bad_request("protobuf: truncated varint")
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            return result, pos
        shift += 7


def parse(buf: bytes) -> Fields:
    """Wire format -> {field number: [varint ints or length-delimited bytes]}."""
    out: Fields = {}
    pos = 0
    while pos < len(buf):
        key, pos = _varint(buf, pos)
        field, wire = key >> 3, key & 7
        value: Any
        if wire == 0:
            value, pos = _varint(buf, pos)
        elif wire == 2:
            length, pos = _varint(buf, pos)
            value = buf[pos : pos + length]
            pos += length
        elif wire == 1:
            value, pos = buf[pos : pos + 8], pos + 8
        elif wire == 5:
            value, pos = buf[pos : pos + 4], pos + 4
        else:
            raise bad_request(f"protobuf: unsupported wire type {wire}")
        out.setdefault(field, []).append(value)
    return out


def _str(f: Fields, n: int) -> str:
    vals = f.get(n)
    return vals[-1].decode() if vals else ""


def _strs(f: Fields, n: int) -> list[str]:
    return [v.decode() for v in f.get(n, [])]


def _map(f: Fields, n: int, *, binary: bool = False) -> dict[str, str]:
    out: dict[str, str] = {}
    for entry in f.get(n, []):
        e = parse(entry)
        key = _str(e, 1)
        raw = e.get(2, [b""])[-1]
        out[key] = base64.b64encode(raw).decode() if binary else raw.decode()
    return out


def _time(f: Fields, n: int) -> str | None:
    vals = f.get(n)
    if not vals:
        return None
    seconds = parse(vals[-1]).get(1, [0])[-1]
    if not seconds:
        return None
    return datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _object_meta(buf: bytes) -> dict[str, Any]:
    f = parse(buf)
    meta: dict[str, Any] = {}
    for n, key in (
        (1, "name"),
        (2, "generateName"),
        (3, "namespace"),
        (5, "uid"),
        (6, "resourceVersion"),
    ):
        if _str(f, n):
            meta[key] = _str(f, n)
    if f.get(7):
        meta["generation"] = f[7][-1]
    if _time(f, 8):
        meta["creationTimestamp"] = _time(f, 8)
    for n, key in ((11, "labels"), (12, "annotations")):
        if f.get(n):
            meta[key] = _map(f, n)
    refs = []
    for raw in f.get(13, []):
        r = parse(raw)
        ref: dict[str, Any] = {
            "apiVersion": _str(r, 5),
            "kind": _str(r, 1),
            "name": _str(r, 3),
            "uid": _str(r, 4),
        }
        if r.get(6):
            ref["controller"] = bool(r[6][-1])
        if r.get(7):
            ref["blockOwnerDeletion"] = bool(r[7][-1])
        refs.append(ref)
    if refs:
        meta["ownerReferences"] = refs
    if f.get(14):
        meta["finalizers"] = _strs(f, 14)
    return meta


def _namespace(f: Fields) -> dict[str, Any]:
    obj: dict[str, Any] = {}
    if f.get(2):
        fins = _strs(parse(f[2][-1]), 1)
        if fins:
            obj["spec"] = {"finalizers": fins}
    return obj


def _configmap(f: Fields) -> dict[str, Any]:
    obj: dict[str, Any] = {}
    if f.get(2):
        obj["data"] = _map(f, 2)
    if f.get(3):
        obj["binaryData"] = _map(f, 3, binary=True)
    if f.get(4):
        obj["immutable"] = bool(f[4][-1])
    return obj


def _secret(f: Fields) -> dict[str, Any]:
    obj: dict[str, Any] = {}
    if f.get(2):
        obj["data"] = _map(f, 2, binary=True)
    if _str(f, 3):
        obj["type"] = _str(f, 3)
    if f.get(4):
        obj["stringData"] = _map(f, 4)
    if f.get(5):
        obj["immutable"] = bool(f[5][-1])
    return obj


_KINDS: dict[tuple[str, str], Callable[[Fields], dict[str, Any]]] = {
    ("v1", "Namespace"): _namespace,
    ("v1", "ConfigMap"): _configmap,
    ("v1", "Secret"): _secret,
}


def decode(raw: bytes) -> dict[str, Any]:
    """A protobuf-encoded object as its JSON form, or 415 for kinds not covered."""
    unsupported = ApiError(
        415,
        "UnsupportedMediaType",
        "the body of the request was in an unknown format - accepted media types include: "
        "application/json, application/yaml",
    )
    if not raw.startswith(MAGIC):
        raise unsupported
    envelope = parse(raw[len(MAGIC) :])
    type_meta = parse(envelope.get(1, [b""])[-1])
    api_version, kind = _str(type_meta, 1), _str(type_meta, 2)
    decoder = _KINDS.get((api_version, kind))
    if decoder is None:
        raise unsupported
    body = parse(envelope.get(2, [b""])[-1])
    obj: dict[str, Any] = {"apiVersion": api_version, "kind": kind}
    obj["metadata"] = _object_meta(body[1][-1]) if body.get(1) else {}
    obj.update(decoder(body))
    return obj
