"""Pydantic models of the CocoonSet and of the pod fields the reconciler reads. The CocoonSet
models are the CRD's one source (`shared.crd`): a field's alias, type, default, bounds and
description, a type's docstring; `x-cocoon-*` keys are generator hints, never in the CRD.
Unknown fields are kept (`extra="allow"`) so a read-modify-write never drops another's."""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from enum import StrEnum
from typing import Annotated, Any, Final

from pydantic import AfterValidator, BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel

from shared import constants as k
from shared.enums import (
    AgentMode,
    Backend,
    CocoonSetPhase,
    ConnType,
    HibernatePolicy,
    LifecycleState,
    OSType,
    SnapshotPolicy,
    ToolboxMode,
)
from shared.names import LABEL_VALUE_MAX, LABEL_VALUE_PATTERN

# Not in the schema's `required` list although the model needs it (the API accepts it absent).
X_OPTIONAL: Final = "x-cocoon-optional"
# The model's default is a convenience for readers, not an API default.
X_NO_DEFAULT: Final = "x-cocoon-no-default"
# Described elsewhere (ObjectMeta): the schema says only `type: object`.
X_OPAQUE: Final = "x-cocoon-opaque"

INT32: Final[dict[str, Any]] = {"format": "int32"}
INT64: Final[dict[str, Any]] = {"format": "int64"}


def list_map(*keys: str) -> dict[str, Any]:
    """A list the API merges by key (server-side apply): `x-kubernetes-list-type: map`."""
    return {"x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": list(keys)}


# What kube-apiserver accepts as a string quantity.
QUANTITY_PATTERN: Final = (
    r"^(\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))(([KMGTPE]i)|[numkMGTPE]|"
    r"([eE](\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))))?$"
)
DNS1123_LABEL_PATTERN: Final = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"
CONDITION_REASON_PATTERN: Final = r"^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$"
CONDITION_TYPE_PATTERN: Final = (
    r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?"
    r"(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])$"
)

# The spec's CEL rules; shared.validation checks them in Python with these exact messages.
MSG_RELEASE_MAIN_ONLY: Final = "hibernatePolicy=release requires agent.replicas=0 and no toolboxes"
MSG_CLASS_IMMUTABLE: Final = "snapshotCompatibilityClass is immutable once set"
RULE_RELEASE_MAIN_ONLY: Final = (
    "!has(self.hibernatePolicy) || self.hibernatePolicy != 'release' || "
    "((!has(self.agent.replicas) || self.agent.replicas == 0) && "
    "(!has(self.toolboxes) || size(self.toolboxes) == 0))"
)
RULE_CLASS_IMMUTABLE: Final = (
    "!has(oldSelf.snapshotCompatibilityClass) || (has(self.snapshotCompatibilityClass) && "
    "self.snapshotCompatibilityClass == oldSelf.snapshotCompatibilityClass)"
)


@dataclass(frozen=True, slots=True)
class IntOrString:
    """Schema marker: `x-kubernetes-int-or-string`, strings matching `pattern`."""

    pattern: str


def go_regex_search(pattern: str, value: str) -> bool:
    """Go's `regexp.MatchString`, as the API server applies a CRD pattern: a search where `$`
    is the end of the text (Python's `$` would also match before a final newline)."""
    return _go_regex(pattern).search(value) is not None


@functools.cache
def _go_regex(pattern: str) -> re.Pattern[str]:
    # The CRD's patterns end in an unescaped `$` and use it nowhere else.
    if pattern.endswith("$") and not pattern.endswith("\\$"):
        pattern = pattern[:-1] + r"\Z"
    return re.compile(pattern)


def _check_quantity(value: int | str) -> int | str:
    if isinstance(value, str) and not go_regex_search(QUANTITY_PATTERN, value):
        raise ValueError(f"{value!r} is not a quantity (e.g. 10Gi, 500m, 2)")
    return value


Quantity = Annotated[int | str, IntOrString(QUANTITY_PATTERN), AfterValidator(_check_quantity)]


class _Model(BaseModel):
    # Aliases are the camelCase API names unless a field says otherwise; validate_assignment:
    # what is assigned is checked and dumped exactly as what is parsed.
    model_config = ConfigDict(
        extra="allow",
        populate_by_name=True,
        validate_assignment=True,
        alias_generator=to_camel,
    )


def dump(model: BaseModel) -> dict[str, Any]:
    """The object as the API would hold it: aliases, and only fields that were set
    (a defaulted field changed in place since counts as set)."""
    _mark_changed(model)
    return model.model_dump(by_alias=True, exclude_unset=True, mode="json")


def _mark_changed(value: Any) -> bool:
    """Mark changed-in-place defaults as set; True if `value` holds anything to write."""
    if isinstance(value, BaseModel):
        fields_set = value.model_fields_set
        for name, field in type(value).model_fields.items():
            current = getattr(value, name)
            nested = _mark_changed(current)
            if name in fields_set:
                continue
            if nested or current != field.get_default(call_default_factory=True):
                fields_set.add(name)
        return bool(fields_set) or bool(value.model_extra)
    if isinstance(value, list):
        return any([_mark_changed(v) for v in value]) or bool(value)
    if isinstance(value, dict):
        return any([_mark_changed(v) for v in value.values()]) or bool(value)
    return False


class OwnerReference(_Model):
    api_version: str
    kind: str
    name: str
    uid: str
    controller: bool | None = None
    block_owner_deletion: bool | None = None


class ObjectMeta(_Model):
    model_config = ConfigDict(json_schema_extra={X_OPAQUE: True})

    name: str = ""
    namespace: str | None = None
    uid: str | None = None
    resource_version: str | None = None
    generation: int | None = None
    creation_timestamp: str | None = None
    deletion_timestamp: str | None = None
    labels: dict[str, str] = Field(default_factory=dict)
    annotations: dict[str, str] = Field(default_factory=dict)
    owner_references: list[OwnerReference] = Field(default_factory=list)
    finalizers: list[str] = Field(default_factory=list)


_NAME_OF_REFERENT: Final = (
    "Name of the referent.\n"
    "This field is effectively required, but due to backwards compatibility is\n"
    "allowed to be empty. Instances of this type with an empty value here are\n"
    "almost certainly wrong.\n"
    "More info: https://kubernetes.io/docs/concepts/overview/working-with-objects/names/#names"
)


class LocalObjectRef(_Model):
    # corev1's ConfigMapEnvSource/SecretEnvSource are atomic: an apply replaces the whole ref.
    model_config = ConfigDict(json_schema_extra={"x-kubernetes-map-type": "atomic"})

    name: str = Field(default="", description=_NAME_OF_REFERENT)
    optional: bool | None = None


class ConfigMapEnvSource(LocalObjectRef):
    optional: bool | None = Field(
        default=None, description="Specify whether the ConfigMap must be defined"
    )


class SecretEnvSource(LocalObjectRef):
    optional: bool | None = Field(
        default=None, description="Specify whether the Secret must be defined"
    )


class EnvFromSource(_Model):
    """EnvFromSource represents the source of a set of ConfigMaps or Secrets"""

    config_map_ref: ConfigMapEnvSource | None = Field(
        default=None, description="The ConfigMap to select from"
    )
    prefix: str | None = Field(
        default=None,
        description=(
            "Optional text to prepend to the name of each environment variable.\n"
            "May consist of any printable ASCII characters except '='."
        ),
    )
    secret_ref: SecretEnvSource | None = Field(
        default=None, description="The Secret to select from"
    )


class ResourceClaim(_Model):
    """ResourceClaim references one entry in PodSpec.ResourceClaims."""

    name: str = Field(
        description=(
            "Name must match the name of one entry in pod.spec.resourceClaims of\n"
            "the Pod where this field is used. It makes that resource available\n"
            "inside a container."
        )
    )
    request: str | None = Field(
        default=None,
        description=(
            "Request is the name chosen for a request in the referenced claim.\n"
            "If empty, everything from the claim is made available, otherwise\n"
            "only the result of this request."
        ),
    )


class ResourceRequirements(_Model):
    """ResourceRequirements describes the compute resource requirements."""

    claims: list[ResourceClaim] | None = Field(
        default=None,
        description=(
            "Claims lists the names of resources, defined in spec.resourceClaims,\n"
            "that are used by this container.\n\n"
            "This field depends on the\n"
            "DynamicResourceAllocation feature gate.\n\n"
            "This field is immutable. It can only be set for containers."
        ),
        json_schema_extra=list_map("name"),
    )
    limits: dict[str, Quantity] | None = Field(
        default=None,
        description=(
            "Limits describes the maximum amount of compute resources allowed.\n"
            "More info: https://kubernetes.io/docs/concepts/configuration/manage-resources-containers/"
        ),
    )
    requests: dict[str, Quantity] | None = Field(
        default=None,
        description=(
            "Requests describes the minimum amount of compute resources required.\n"
            "If Requests is omitted for a container, it defaults to Limits if that is "
            "explicitly specified,\n"
            "otherwise to an implementation-defined value. Requests cannot exceed Limits.\n"
            "More info: https://kubernetes.io/docs/concepts/configuration/manage-resources-containers/"
        ),
    )


PORT_MAX: Final = 65535


class _VMSpec(_Model):
    # The fields the agent and the toolbox share.
    backend: Backend = Backend.CLOUD_HYPERVISOR
    conn_type: ConnType | None = None
    force_pull: bool | None = Field(
        default=None, description="ForcePull bypasses the image cache and re-pulls from upstream."
    )
    network: str | None = Field(
        default=None, description="Network selects the cluster network to attach the VM to."
    )
    no_direct_io: bool | None = Field(
        default=None,
        alias="noDirectIO",
        description=(
            "NoDirectIO disables O_DIRECT on writable disks, using host page\n"
            "cache instead. Useful for dev/test with few VMs and abundant host\n"
            "memory. Cloud Hypervisor only; ignored by firecracker."
        ),
    )
    os: OSType = OSType.LINUX
    probe_port: int | None = Field(
        default=None,
        ge=0,
        le=PORT_MAX,
        description="ProbePort overrides the default ICMP probe with a TCP port check.",
        json_schema_extra=INT32,
    )
    resources: ResourceRequirements | None = None
    storage: Quantity | None = Field(default=None, description="Storage sizes the VM root volume.")


class AgentSpec(_VMSpec):
    """AgentSpec defines the configuration for agent VMs in a CocoonSet."""

    env_from: list[EnvFromSource] | None = None
    image: str = Field(min_length=1)
    mode: AgentMode = AgentMode.CLONE
    replicas: int = Field(
        default=0,
        ge=0,
        description=(
            "Replicas is the number of sub-agents; the main agent is always created in addition."
        ),
        json_schema_extra=INT32,
    )
    service_account_name: str | None = None


class ToolboxSpec(_VMSpec):
    """ToolboxSpec defines the configuration for a toolbox VM in a CocoonSet."""

    image: str | None = None
    mode: ToolboxMode = ToolboxMode.RUN
    name: str = Field(min_length=1, pattern=DNS1123_LABEL_PATTERN)
    static_ip: str | None = Field(default=None, alias="staticIP")
    static_vm_id: str | None = Field(default=None, alias="staticVMID")
    vnc_port: int | None = Field(default=None, ge=0, le=PORT_MAX, json_schema_extra=INT32)


class CocoonSetSpec(_Model):
    """CocoonSetSpec defines the desired state of a CocoonSet."""

    model_config = ConfigDict(
        json_schema_extra={
            "x-kubernetes-validations": [
                {"message": MSG_RELEASE_MAIN_ONLY, "rule": RULE_RELEASE_MAIN_ONLY},
                {"message": MSG_CLASS_IMMUTABLE, "rule": RULE_CLASS_IMMUTABLE},
            ]
        }
    )

    agent: AgentSpec
    hibernate_policy: HibernatePolicy = Field(
        default=HibernatePolicy.RETAIN,
        description=(
            "HibernatePolicy keeps (retain) or frees (release) the VM's scheduling\n"
            "seat while suspended; release requires a main-only set until sub-agent/\n"
            "toolbox restore intent is extended."
        ),
    )
    node_name: str | None = Field(
        default=None,
        description=(
            "NodeName pins the VM to a node (cross-node migrate). Empty = let the\n"
            "scheduler place it within NodePool and leave it alone; a value adds a\n"
            "hostname nodeAffinity so the pod lands there or stays Pending if it won't fit."
        ),
    )
    node_pool: str = Field(default=k.DEFAULT_POOL)
    snapshot_compatibility_class: str | None = Field(
        default=None,
        max_length=LABEL_VALUE_MAX,  # a label value: the class is used as a node label value
        pattern=LABEL_VALUE_PATTERN,
        description=(
            "SnapshotCompatibilityClass selects nodes that expose a guest-visible CPU\n"
            "ABI compatible with this set's memory snapshots. It is independent from\n"
            "NodePool so multiple workload pools can share one snapshot class."
        ),
    )
    snapshot_policy: SnapshotPolicy = Field(default=SnapshotPolicy.ALWAYS)
    suspend: bool | None = None
    toolboxes: list[ToolboxSpec] | None = None


class AgentStatus(_Model):
    """AgentStatus represents the observed state of a single agent VM."""

    forked_from: str | None = None
    ip: str | None = None
    phase: str | None = None
    pod_name: str | None = None
    role: str
    slot: int = Field(json_schema_extra=INT32)
    vm_id: str | None = Field(default=None, alias="vmID")
    vm_name: str | None = None


class ConditionStatus(StrEnum):
    TRUE = "True"
    FALSE = "False"
    UNKNOWN = "Unknown"


class Condition(_Model):
    """Condition contains details for one aspect of the current state of this API Resource."""

    last_transition_time: str = Field(
        description=(
            "lastTransitionTime is the last time the condition transitioned from one status "
            "to another.\n"
            "This should be when the underlying condition changed.  If that is not known, "
            "then using the time when the API field changed is acceptable."
        ),
        json_schema_extra={"format": "date-time"},
    )
    message: str = Field(
        max_length=32768,
        description=(
            "message is a human readable message indicating details about the transition.\n"
            "This may be an empty string."
        ),
    )
    observed_generation: int | None = Field(
        default=None,
        ge=0,
        description=(
            "observedGeneration represents the .metadata.generation that the condition was "
            "set based upon.\n"
            "For instance, if .metadata.generation is currently 12, but the "
            ".status.conditions[x].observedGeneration is 9, the condition is out of date\n"
            "with respect to the current state of the instance."
        ),
        json_schema_extra=INT64,
    )
    reason: str = Field(
        min_length=1,
        max_length=1024,
        pattern=CONDITION_REASON_PATTERN,
        description=(
            "reason contains a programmatic identifier indicating the reason for the "
            "condition's last transition.\n"
            "Producers of specific condition types may define expected values and meanings "
            "for this field,\n"
            "and whether the values are considered a guaranteed API.\n"
            "The value should be a CamelCase string.\n"
            "This field may not be empty."
        ),
    )
    status: ConditionStatus = Field(
        description="status of the condition, one of True, False, Unknown."
    )
    type: str = Field(
        max_length=316,
        pattern=CONDITION_TYPE_PATTERN,
        description="type of condition in CamelCase or in foo.example.com/CamelCase.",
    )


class ToolboxStatus(_Model):
    """ToolboxStatus represents the observed state of a single toolbox VM."""

    conn_type: ConnType | None = None
    ip: str | None = None
    name: str
    phase: str | None = None
    pod_name: str | None = None
    vm_id: str | None = Field(default=None, alias="vmID")
    vm_name: str | None = None
    vnc_port: int | None = Field(default=None, json_schema_extra=INT32)


class CocoonSetStatus(_Model):
    """CocoonSetStatus represents the observed state of a CocoonSet."""

    agents: list[AgentStatus] | None = Field(default=None, json_schema_extra=list_map("slot"))
    conditions: list[Condition] | None = Field(default=None, json_schema_extra=list_map("type"))
    desired_agents: int | None = Field(default=None, json_schema_extra=INT32)
    desired_toolboxes: int | None = Field(default=None, json_schema_extra=INT32)
    observed_generation: int | None = Field(default=None, json_schema_extra=INT64)
    phase: CocoonSetPhase | None = None
    ready_agents: int | None = Field(default=None, json_schema_extra=INT32)
    ready_toolboxes: int | None = Field(default=None, json_schema_extra=INT32)
    toolboxes: list[ToolboxStatus] | None = Field(default=None, json_schema_extra=list_map("name"))


class CocoonSet(_Model):
    """CocoonSet is the Schema for the cocoonsets API."""

    # TypeMeta: the defaults help readers of a bare spec; the API has none.
    api_version: str = Field(
        default=k.API_VERSION,
        description=(
            "APIVersion defines the versioned schema of this representation of an object.\n"
            "Servers should convert recognized schemas to the latest internal value, and\n"
            "may reject unrecognized values.\n"
            "More info: https://git.k8s.io/community/contributors/devel/sig-architecture/"
            "api-conventions.md#resources"
        ),
        json_schema_extra={X_NO_DEFAULT: True},
    )
    kind: str = Field(
        default=k.KIND,
        description=(
            "Kind is a string value representing the REST resource this object represents.\n"
            "Servers may infer this from the endpoint the client submits requests to.\n"
            "Cannot be updated.\n"
            "In CamelCase.\n"
            "More info: https://git.k8s.io/community/contributors/devel/sig-architecture/"
            "api-conventions.md#types-kinds"
        ),
        json_schema_extra={X_NO_DEFAULT: True},
    )
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    # The API accepts a CocoonSet without spec; we never read one.
    spec: CocoonSetSpec = Field(json_schema_extra={X_OPTIONAL: True})
    status: CocoonSetStatus = Field(default_factory=CocoonSetStatus)

    @property
    def namespace(self) -> str:
        return self.metadata.namespace or "default"

    @property
    def name(self) -> str:
        return self.metadata.name

    @property
    def generation(self) -> int:
        return self.metadata.generation or 0

    @property
    def phase(self) -> CocoonSetPhase | None:
        return self.status.phase

    @property
    def suspended(self) -> bool:
        return bool(self.spec.suspend)

    @property
    def is_release(self) -> bool:
        return self.spec.hibernate_policy is HibernatePolicy.RELEASE

    @property
    def hint(self) -> str:
        return self.metadata.annotations.get(k.ANN_HIBERNATED_ON_NODE, "")

    @property
    def hibernated_image(self) -> str:
        return self.metadata.annotations.get(k.ANN_HIBERNATED_IMAGE, "")

    @property
    def image_changed_since_release(self) -> bool:
        """The release recorded an image and `spec.agent.image` is now another."""
        return bool(self.hibernated_image) and self.hibernated_image != self.spec.agent.image

    @property
    def recorded_vm_names(self) -> frozenset[str]:
        """The VM names the set itself records: the release stash and the status agents."""
        names = set(self.metadata.annotations.get(k.ANN_DELETE_VM_NAMES, "").split(","))
        names.update(a.vm_name or "" for a in self.status.agents or ())
        names.update(t.vm_name or "" for t in self.status.toolboxes or ())
        return frozenset(n.strip() for n in names if n.strip())


_GO_INT: Final = re.compile(r"[+-]?[0-9]+")


def parse_go_int(raw: str) -> int:
    """An integer annotation as the operator reads it: a signed ASCII int64, anything
    else (`1_0`, ` 7`, `٣`, out of range) 0, where int() would disagree about a generation."""
    if not _GO_INT.fullmatch(raw):
        return 0
    value = int(raw)
    return value if -(1 << 63) <= value < 1 << 63 else 0


class ContainerState(_Model):
    running: dict[str, Any] | None = None


class ContainerStatus(_Model):
    state: ContainerState | None = None


class PodCondition(_Model):
    type: str
    status: str
    reason: str | None = None
    message: str | None = None


class PodStatus(_Model):
    phase: str | None = None
    conditions: list[PodCondition] = Field(default_factory=list)
    container_statuses: list[ContainerStatus] = Field(default_factory=list)


class PodSpec(_Model):
    node_name: str | None = None


class Pod(_Model):
    api_version: str = Field(default="v1")
    kind: str = "Pod"
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    spec: PodSpec = Field(default_factory=PodSpec)
    status: PodStatus = Field(default_factory=PodStatus)

    @property
    def name(self) -> str:
        return self.metadata.name

    @property
    def annotations(self) -> dict[str, str]:
        return self.metadata.annotations

    @property
    def labels(self) -> dict[str, str]:
        return self.metadata.labels

    @property
    def terminating(self) -> bool:
        return self.metadata.deletion_timestamp is not None

    @property
    def role(self) -> str:
        return self.labels.get(k.LABEL_ROLE, "")

    @property
    def is_main(self) -> bool:
        # The role label alone, as the operator classifies pods.
        return self.role == k.ROLE_MAIN

    @property
    def managed(self) -> bool:
        # The annotation alone, as the operator reads it: a pod without it has no VM to gate on.
        return self.annotations.get(k.ANN_MANAGED) == k.TRUE

    def controlled_by(self, owner_uid: str | None) -> bool:
        """The pod's controller reference names this uid."""
        ref = next((r for r in self.metadata.owner_references if r.controller), None)
        return ref is not None and bool(owner_uid) and ref.uid == owner_uid

    @property
    def generation_stamp(self) -> int:
        """The set generation last stamped on the pod (vk-cocoon echoes it); else 0."""
        return parse_go_int(self.annotations.get(k.ANN_GENERATION, ""))

    @property
    def vm_name(self) -> str:
        return self.annotations.get(k.ANN_VM_NAME, "")

    @property
    def lifecycle_state(self) -> LifecycleState | None:
        raw = self.annotations.get(k.ANN_LIFECYCLE_STATE, "")
        try:
            return LifecycleState(raw)
        except ValueError:
            return None

    @property
    def lifecycle_generation(self) -> int:
        """Missing or garbage reads as 0 (see parse_go_int)."""
        return parse_go_int(self.annotations.get(k.ANN_LIFECYCLE_GENERATION, ""))

    @property
    def terminal(self) -> bool:
        """The kubelet's `Failed` phase only, as the operator reads it: vk-cocoon's sticky
        `failed` is not terminal, the pod still holds a VM the release waits for."""
        return self.status.phase == "Failed"

    @property
    def failed(self) -> bool:
        """A failed main as the operator's normal flow sees it: either failure path."""
        return self.terminal or self.lifecycle_state is LifecycleState.FAILED

    @property
    def live(self) -> bool:
        """VM id annotation non-empty and a container Running."""
        return bool(self.annotations.get(k.ANN_VM_ID)) and any(
            cs.state is not None and cs.state.running is not None
            for cs in self.status.container_statuses
        )

    @property
    def ready(self) -> bool:
        return any(c.type == "Ready" and c.status == "True" for c in self.status.conditions)

    @property
    def scheduling_gates(self) -> tuple[str, ...]:
        """`spec.schedulingGates[*].name` (kept as read: PodSpec models few fields)."""
        raw = (self.spec.model_extra or {}).get("schedulingGates") or []
        return tuple(str(g.get("name", "")) for g in raw if isinstance(g, dict))

    @property
    def preferred_node(self) -> str:
        """The hostname a wake's preferred node affinity names ("" = none): the hint it
        was created for, kept after the wake cleared it."""
        affinity = (self.spec.model_extra or {}).get("affinity") or {}
        terms = (affinity.get("nodeAffinity") or {}).get(
            "preferredDuringSchedulingIgnoredDuringExecution"
        ) or []
        for term in terms:
            for expr in (term.get("preference") or {}).get("matchExpressions") or []:
                if expr.get("key") == k.LABEL_HOSTNAME and expr.get("values"):
                    return str(expr["values"][0])
        return ""

    def unschedulable_message(self) -> str | None:
        for c in self.status.conditions:
            if c.type == "PodScheduled" and c.status == "False" and c.reason == "Unschedulable":
                return c.message or ""
        return None
