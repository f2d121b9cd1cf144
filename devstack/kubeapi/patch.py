"""The three patch formats kube-apiserver accepts, applied to plain JSON values.

* JSON merge patch (RFC 7386): maps merge, `null` deletes, lists replace.
* JSON patch (RFC 6902): add/remove/replace/move/copy/test; a failed `test` or
  a missing path is reported by the server as 422 (see `errors.unprocessable`).
* Strategic merge patch (built-in types only, CRDs answer 415): lists carrying a
  `patchMergeKey` in the Go types merge element-wise by that key; other lists
  replace (pod `tolerations` has no patch strategy upstream, so it replaces);
  `$patch: delete|replace|merge`, `$deleteFromPrimitiveList/<f>` and
  `$setElementOrder/<f>` directives are understood (the last only to drop it).

All functions return new values and never mutate their inputs.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from devstack.kubeapi.errors import bad_request, unprocessable


def merge_patch(target: Any, patch: Any) -> Any:
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    out: dict[str, Any] = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            out.pop(key, None)
        else:
            out[key] = merge_patch(out.get(key), value)
    return out


# --- JSON patch ------------------------------------------------------------


def _unescape(token: str) -> str:
    return token.replace("~1", "/").replace("~0", "~")


def _split_pointer(path: str) -> list[str]:
    if path == "":
        return []
    if not path.startswith("/"):
        raise unprocessable(f"JSON pointer must start with '/': {path!r}")
    return [_unescape(t) for t in path[1:].split("/")]


def _resolve(doc: Any, tokens: list[str], path: str) -> Any:
    cur = doc
    for t in tokens:
        if isinstance(cur, dict):
            if t not in cur:
                raise unprocessable(f"doc is missing path: {path!r}: missing value")
            cur = cur[t]
        elif isinstance(cur, list):
            try:
                idx = int(t)
            except ValueError:
                raise unprocessable(f"invalid array index {t!r} in path {path!r}") from None
            if idx < 0 or idx >= len(cur):
                raise unprocessable(f"doc is missing path: {path!r}: missing value")
            cur = cur[idx]
        else:
            raise unprocessable(f"doc is missing path: {path!r}: missing value")
    return cur


def _add(doc: Any, tokens: list[str], value: Any, path: str) -> Any:
    if not tokens:
        return value
    parent = _resolve(doc, tokens[:-1], path)
    last = tokens[-1]
    if isinstance(parent, dict):
        parent[last] = value
    elif isinstance(parent, list):
        if last == "-":
            parent.append(value)
        else:
            try:
                idx = int(last)
            except ValueError:
                raise unprocessable(f"invalid array index {last!r}") from None
            if idx < 0 or idx > len(parent):
                raise unprocessable(f"add operation does not apply: doc is missing path: {path!r}")
            parent.insert(idx, value)
    else:
        raise unprocessable(f"add operation does not apply: doc is missing path: {path!r}")
    return doc


def _remove(doc: Any, tokens: list[str], path: str) -> Any:
    if not tokens:
        raise unprocessable("unable to remove the whole document")
    parent = _resolve(doc, tokens[:-1], path)
    last = tokens[-1]
    if isinstance(parent, dict):
        if last not in parent:
            raise unprocessable(f"remove operation does not apply: doc is missing path: {path!r}")
        return parent.pop(last)
    if isinstance(parent, list):
        try:
            idx = int(last)
        except ValueError:
            raise unprocessable(f"invalid array index {last!r}") from None
        if idx < 0 or idx >= len(parent):
            raise unprocessable(f"remove operation does not apply: doc is missing path: {path!r}")
        return parent.pop(idx)
    raise unprocessable(f"remove operation does not apply: doc is missing path: {path!r}")


def json_patch(target: Any, ops: Any) -> Any:
    if not isinstance(ops, list):
        raise bad_request("json: cannot unmarshal object into Go value of type jsonpatch.Patch")
    doc = copy.deepcopy(target)
    for op in ops:
        if not isinstance(op, dict) or "op" not in op:
            raise bad_request("invalid JSON patch operation")
        kind = op["op"]
        path = op.get("path")
        if not isinstance(path, str):
            raise unprocessable(f"operation {kind!r} is missing path")
        tokens = _split_pointer(path)
        if kind == "add":
            doc = _add(doc, tokens, copy.deepcopy(op.get("value")), path)
        elif kind == "remove":
            _remove(doc, tokens, path)
        elif kind == "replace":
            _resolve(doc, tokens, path)  # must exist
            if tokens:
                parent = _resolve(doc, tokens[:-1], path)
                last = tokens[-1]
                if isinstance(parent, list):
                    parent[int(last)] = copy.deepcopy(op.get("value"))
                else:
                    parent[last] = copy.deepcopy(op.get("value"))
            else:
                doc = copy.deepcopy(op.get("value"))
        elif kind in ("move", "copy"):
            src = op.get("from")
            if not isinstance(src, str):
                raise unprocessable(f"operation {kind!r} is missing from")
            src_tokens = _split_pointer(src)
            value = copy.deepcopy(_resolve(doc, src_tokens, src))
            if kind == "move":
                _remove(doc, src_tokens, src)
            doc = _add(doc, tokens, value, path)
        elif kind == "test":
            actual = _resolve(doc, tokens, path)
            if actual != op.get("value"):
                raise unprocessable(f"testing value {path} failed: test failed")
        else:
            raise bad_request(f"Unexpected kind: {kind}")
    return doc


# --- strategic merge patch -------------------------------------------------

# patchMergeKey of list fields in the core/v1 Go types (by field name; the
# same field name carries the same key everywhere in Pod/Node/Namespace).
# Lists absent here (tolerations, args, command, readinessGates, ...) replace.
MERGE_KEYS: Mapping[str, str] = {
    "containers": "name",
    "initContainers": "name",
    "ephemeralContainers": "name",
    "volumes": "name",
    "env": "name",
    "ports": "containerPort",
    "volumeMounts": "mountPath",
    "volumeDevices": "devicePath",
    "conditions": "type",
    "ownerReferences": "uid",
    "imagePullSecrets": "name",
    "hostAliases": "ip",
    "topologySpreadConstraints": "topologyKey",
    "resourceClaims": "name",
    "schedulingGates": "name",
    "taints": "key",
    "addresses": "type",
    "podIPs": "ip",
    "hostIPs": "ip",
    "images": "names",
}
# Primitive lists with patchStrategy "merge" (set union).
MERGE_PRIMITIVES = frozenset({"finalizers"})


def _smp_list(field: str, target: list[Any], patch: list[Any]) -> list[Any]:
    key = MERGE_KEYS.get(field)
    if key is None:
        if field in MERGE_PRIMITIVES:
            out = list(target)
            for v in patch:
                if v not in out:
                    out.append(v)
            return out
        return [_strip_directives(v) for v in patch]
    # `$patch: replace` anywhere in the patch list replaces the whole list.
    if any(isinstance(v, dict) and v.get("$patch") == "replace" for v in patch):
        return [
            _strip_directives(v) for v in patch if not (isinstance(v, dict) and v.get("$patch"))
        ]
    out = [copy.deepcopy(v) for v in target]
    for item in patch:
        if not isinstance(item, dict):
            raise bad_request(f"strategic merge patch: list {field} item is not a map")
        if key not in item:
            raise bad_request(f"map: {item} does not contain declared merge key: {key}")
        idx = next(
            (i for i, v in enumerate(out) if isinstance(v, dict) and v.get(key) == item[key]), None
        )
        if item.get("$patch") == "delete":
            if idx is not None:
                out.pop(idx)
            continue
        if idx is None:
            out.append(_strip_directives(item))
        else:
            out[idx] = strategic_merge_patch(out[idx], item)
    return out


def _strip_directives(value: Any) -> Any:
    if isinstance(value, dict):
        return {
            k: _strip_directives(v)
            for k, v in value.items()
            if not k.startswith("$") and v is not None
        }
    if isinstance(value, list):
        return [_strip_directives(v) for v in value]
    return value


def strategic_merge_patch(target: Any, patch: Any) -> Any:
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    directive = patch.get("$patch")
    if directive == "replace":
        return _strip_directives(patch)
    if directive == "delete":
        return None
    out: dict[str, Any] = dict(target) if isinstance(target, dict) else {}
    deletions: dict[str, list[Any]] = {}
    for k, v in patch.items():
        if k.startswith("$deleteFromPrimitiveList/"):
            deletions[k.split("/", 1)[1]] = list(v or [])
    for key, value in patch.items():
        if key.startswith("$"):
            continue
        if value is None:
            out.pop(key, None)
        elif isinstance(value, list):
            current = out.get(key)
            out[key] = _smp_list(key, current if isinstance(current, list) else [], value)
        elif isinstance(value, dict):
            merged = strategic_merge_patch(out.get(key), value)
            if merged is None:
                out.pop(key, None)
            else:
                out[key] = merged
        else:
            out[key] = value
    for field, values in deletions.items():
        if isinstance(out.get(field), list):
            out[field] = [v for v in out[field] if v not in values]
    return out
