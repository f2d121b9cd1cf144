"""cocoon-webhook as this project meets it: the pod webhook's POD_CREATORS refusal, the
CocoonSet rules (the version read is `RULES_SOURCE`; an UPDATE leaving `spec` unchanged skips
them), and `parse_denial` for the API server's `admission webhook "<name>" denied` message.
Imported by the functions: the standard library, `shared.enums` and `shared.names` only."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from shared import names
from shared.enums import (
    AgentMode,
    Backend,
    ConnType,
    HibernatePolicy,
    OSType,
    SnapshotPolicy,
    ToolboxMode,
)

MUTATING_CONFIGURATION = "cocoon-webhook-mutate"
VALIDATING_CONFIGURATION = "cocoon-webhook-validate"
POD_WEBHOOK = "pods.mutate.cocoonstack.io"
COCOONSET_WEBHOOK = "cocoonsets.validate.cocoonstack.io"
DEFAULT_POD_CREATORS = "system:serviceaccount:cocoon-system:cocoon-operator"
TOLERATION_KEY = "virtual-kubelet.io/provider"
WEBHOOK_NAMESPACE = "cocoon-system"
WEBHOOK_DEPLOYMENT = "cocoon-webhook"
DOCS = "docs/cocoon-webhook.md"

MSG_BARE_POD = "cocoon pods must be managed by a CocoonSet"
MSG_SPEC_PREFIX = "cocoon-webhook: invalid CocoonSet spec: "

# k8s.io/apiserver/pkg/admission/plugin/webhook/errors: ToStatusErr.
_DENIED = re.compile(
    r'admission webhook "(?P<webhook>[^"]+)" denied the request(?::\s*(?P<msg>.*))?', re.S
)
_CREATOR_PREFIX = "cocoon pods must be created by the CocoonSet controller, got user "
_CREATOR = re.compile(re.escape(_CREATOR_PREFIX) + r'"(?P<user>[^"]*)"')


def creator_message(user: str) -> str:
    """The pod webhook's refusal of `user`."""
    return _CREATOR_PREFIX + go_quote(user)


@dataclass(frozen=True, slots=True)
class Denial:
    """A webhook's refusal as the API server reported it."""

    webhook: str
    message: str
    # The refused username, when the pod webhook named it.
    user: str = ""

    def fix(self) -> str:
        """What the operator of the cluster does about it, in one sentence."""
        if _CREATOR.search(self.message):
            user = self.user or "<the function's username>"
            return (
                f"add {user} to cocoon-webhook's POD_CREATORS (Deployment {WEBHOOK_NAMESPACE}/"
                f"{WEBHOOK_DEPLOYMENT}), keeping {DEFAULT_POD_CREATORS}: "
                f"POD_CREATORS={DEFAULT_POD_CREATORS},{user}, with every other function's "
                f"username too (terraform output cocoon_webhook_pod_creators; {DOCS})"
            )
        if self.webhook == COCOONSET_WEBHOOK:
            return (
                "the set's spec breaks cocoon-webhook's CocoonSet rules, so no spec write "
                "(spec.suspend included) is admitted until the spec is fixed; "
                "`cocoon-hibernation validate` lists every rule it breaks"
            )
        return f"the admission webhook {self.webhook!r} refuses this write; see {DOCS}"


def parse_denial(message: str) -> Denial | None:
    """The webhook refusal in an API server message, or None when it is not one."""
    m = _DENIED.search(message)
    if m is None:
        return None
    text = (m["msg"] or "").strip()
    c = _CREATOR.search(text)
    return Denial(webhook=m["webhook"], message=text, user=c["user"] if c else "")


# --- the pod rule -----------------------------------------------------------------------


def pod_refusal(pod: Mapping[str, Any], username: str, creators: list[str]) -> str | None:
    """The pod webhook's verdict on a pod CREATE by `username`: None admits it."""
    tolerations = _obj(pod.get("spec")).get("tolerations") or []
    if not any(isinstance(t, Mapping) and t.get("key") == TOLERATION_KEY for t in tolerations):
        return None  # not a cocoon pod
    owners = _obj(pod.get("metadata")).get("ownerReferences") or []
    if not any(isinstance(o, Mapping) and o.get("kind") == "CocoonSet" for o in owners):
        return MSG_BARE_POD
    if username not in creators:
        return creator_message(username)
    return None


def parse_creators(value: str) -> list[str]:
    """`POD_CREATORS` as the webhook reads it: split on commas, each entry trimmed."""
    return [part.strip() for part in value.split(",")]


# --- the CocoonSet rules: the webhook's order and wording (docs/compatibility.md) ----------
RULES_SOURCE = "cocoon-webhook's CocoonSet validator, search-index file version 68440069989"

# cocoon-common ociutil: a registry-relative `repo[:tag]` (no port, no digest).
_REL_REPO = re.compile(
    r"^[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*(?:/[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*)*\Z"
)
_REL_TAG = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9._-]{0,127}\Z")
_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")
_INT = re.compile(r"[+-]?[0-9]+")
LABEL_MSG = (
    "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', "
    "and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', "
    "regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')"
)


def cocoonset_errors(obj: Mapping[str, Any], old: Mapping[str, Any] | None = None) -> list[str]:
    """cocoon-webhook's CocoonSet verdict: its messages, empty when admitted. With `old` (an
    UPDATE) an unchanged `spec` skips the rules: a set older than them stays deletable."""
    spec = _obj(obj.get("spec"))
    if old is not None and _normal(_obj(old.get("spec"))) == _normal(spec):
        return []
    errs: list[str] = []
    meta = _obj(obj.get("metadata"))
    # The API server fills the namespace in before admission; a manifest without one
    # lands in `default` (as kubectl applies it).
    namespace = _s(meta.get("namespace")) or "default"
    set_name = _s(meta.get("name"))
    agent = _obj(spec.get("agent"))
    image = _s(agent.get("image"))
    replicas = agent.get("replicas")
    slots = replicas if isinstance(replicas, int) and not isinstance(replicas, bool) else 0
    # The highest slot's VM name is the longest the set derives (slot = replicas).
    errs += _vm_name_length(
        "spec.agent", names.vm_name(namespace, set_name, max(0, slots)), _s(agent.get("os"))
    )
    if not image:
        errs.append("spec.agent.image is required")
    if slots < 0:
        errs.append(f"spec.agent.replicas must be >= 0, got {replicas}")
    mode = _s(agent.get("mode"))
    errs += _one_of("spec.agent.mode", mode, AgentMode)
    errs += _vm_options("spec.agent", agent, image)
    agent_backend = _s(agent.get("backend")) or "cloud-hypervisor"
    errs += _mode_rules("spec.agent", agent_backend, mode or "clone", image)

    seen: set[str] = set()
    toolboxes = spec.get("toolboxes")
    for i, item in enumerate(toolboxes if isinstance(toolboxes, list) else []):
        tb = _obj(item)
        path = f"spec.toolboxes[{i}]"
        name = _s(tb.get("name"))
        if not name:
            errs.append(f"{path}.name is required")
            continue
        # k8s.io/apimachinery validation.IsDNS1123Label: the length, then the pattern.
        label_errs = ["must be no more than 63 characters"] if len(name) > 63 else []
        label_errs += [] if _LABEL.fullmatch(name) else [LABEL_MSG]
        if label_errs:
            errs.append(
                f"{path}.name {go_quote(name)} must match RFC 1123 label: {'; '.join(label_errs)}"
            )
        # Go's strconv.Atoi: an optional sign and decimal digits, within int64.
        if _INT.fullmatch(name) and -(2**63) <= int(name) < 2**63:
            errs.append(
                f"{path}.name {go_quote(name)} must not be purely numeric "
                "(conflicts with agent slot naming)"
            )
        if name in seen:
            errs.append(f"{path}.name {go_quote(name)} duplicates an earlier toolbox")
        seen.add(name)
        tb_mode = _s(tb.get("mode"))
        errs += _one_of(f"{path}.mode", tb_mode, ToolboxMode)
        if tb_mode == "static":
            if not _s(tb.get("staticIP")):
                errs.append(f"{path}.staticIP is required when mode=static")
            if not _s(tb.get("staticVMID")):
                errs.append(f"{path}.staticVMID is required when mode=static")
            errs += _one_of(f"{path}.connType", _s(tb.get("connType")), ConnType)
            continue
        errs += _vm_name_length(
            path, names.toolbox_vm_name(namespace, set_name, name), _s(tb.get("os"))
        )
        tb_image = _s(tb.get("image"))
        if not tb_image:
            errs.append(f"{path}.image is required when mode is run or clone")
        errs += _vm_options(path, tb, tb_image)
        tb_backend = _s(tb.get("backend")) or "cloud-hypervisor"
        if tb_backend != agent_backend:
            errs.append(
                f"{path}.backend {go_quote(tb_backend)} must match "
                f"spec.agent.backend {go_quote(agent_backend)}"
            )
        errs += _mode_rules(path, tb_backend, tb_mode or "run", tb_image)

    errs += _one_of("spec.snapshotPolicy", _s(spec.get("snapshotPolicy")), SnapshotPolicy)
    errs += _one_of("spec.hibernatePolicy", _s(spec.get("hibernatePolicy")), HibernatePolicy)
    return errs


def cocoonset_refusal(obj: Mapping[str, Any], old: Mapping[str, Any] | None = None) -> str | None:
    """The webhook's whole message for a refused CocoonSet write, or None."""
    errs = cocoonset_errors(obj, old)
    return MSG_SPEC_PREFIX + "; ".join(errs) if errs else None


def _vm_options(path: str, opts: Mapping[str, Any], image: str) -> list[str]:
    os_ = _s(opts.get("os"))
    errs = _one_of(f"{path}.os", os_, OSType)
    errs += _one_of(f"{path}.connType", _s(opts.get("connType")), ConnType)
    backend = _s(opts.get("backend"))
    errs += _one_of(f"{path}.backend", backend, Backend)
    if (backend or "cloud-hypervisor") == "firecracker":
        if (os_ or "linux") == "windows":
            errs.append(f"{path}: firecracker does not support Windows guests")
        if image.startswith(("http://", "https://")):
            errs.append(
                f"{path}: firecracker requires an OCI image, cloudimg URLs are not supported "
                f"(got {go_quote(image)})"
            )
    return errs


def _one_of(path: str, value: str, allowed: type[StrEnum]) -> list[str]:
    """The webhook's `<path> must be a, b, or c, got "x"` (the enum's order); "" is unset."""
    words = [m.value for m in allowed]
    if not value or value in words:
        return []
    listed = " or ".join(words) if len(words) == 2 else f"{', '.join(words[:-1])}, or {words[-1]}"
    return [f"{path} must be {listed}, got {go_quote(value)}"]


def _vm_name_length(path: str, vm: str, os_: str) -> list[str]:
    # VM names are ASCII (DNS labels), so Go's byte length is the character count.
    limit = names.VM_NAME_MAX if os_ == "macos" else names.MANAGED_VM_NAME_MAX
    if len(vm) <= limit:
        return []
    why = "" if os_ == "macos" else " to reserve the hibernate import suffix"
    return [
        f"{path} derives VM name {go_quote(vm)} ({len(vm)} characters); maximum is {limit}{why}"
    ]


def _mode_rules(path: str, backend: str, mode: str, image: str) -> list[str]:
    errs = []
    if backend == "firecracker" and mode != "run":
        errs.append(f"{path}: firecracker does not support {mode} mode, use mode=run instead")
    if mode == "clone" and image and not _is_relative_ref(image):
        errs.append(
            f"{path}.image {go_quote(image)} must be repo[:tag] when mode is clone "
            "(no registry port or digest)"
        )
    return errs


def _is_relative_ref(ref: str) -> bool:
    name, sep, tag = ref.partition(":")
    repo, tag = (name, tag) if sep and name else (ref, "latest")
    return bool(_REL_REPO.match(repo)) and bool(_REL_TAG.match(tag))


def _normal(spec: Mapping[str, Any]) -> str:
    # equality.Semantic.DeepEqual of the decoded specs: an absent field equals its
    # zero value (omitempty), so drop empties before comparing.
    return json.dumps(_drop_empty(spec), sort_keys=True, default=str)


def _drop_empty(value: Any) -> Any:
    if isinstance(value, Mapping):
        out = {k: _drop_empty(v) for k, v in value.items()}
        return {k: v for k, v in out.items() if v not in (None, "", 0, False, [], {})}
    if isinstance(value, list):
        return [_drop_empty(v) for v in value]
    return value


def _s(value: object) -> str:
    return value if isinstance(value, str) else ""


def _obj(value: object) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def go_quote(value: object) -> str:
    """Go's `%q` for strings, `%v` for the rest (as the webhook and field.Error print values)."""
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return str(int(value)) if isinstance(value, float) and value.is_integer() else str(value)
    return json.dumps(value, default=str, sort_keys=True)
