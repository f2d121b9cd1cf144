"""Pydantic models of the CocoonSet and of the pod fields the reconciler reads.

Defaults are exactly the CRD's. Every model keeps fields it does not know
(`extra="allow"`) so a read-modify-write never drops what another component
wrote; dump with :func:`dump` (aliases, unset fields left out) to get back the
object as it was read, plus only what we changed.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

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

Quantity = int | str


class _Model(BaseModel):
    model_config = ConfigDict(extra="allow", populate_by_name=True, use_enum_values=False)


def dump(model: BaseModel) -> dict[str, Any]:
    """The object as the API would hold it: aliases, and only fields that were set."""
    return model.model_dump(by_alias=True, exclude_unset=True, mode="json")


class OwnerReference(_Model):
    api_version: str = Field(alias="apiVersion")
    kind: str
    name: str
    uid: str
    controller: bool | None = None
    block_owner_deletion: bool | None = Field(default=None, alias="blockOwnerDeletion")


class ObjectMeta(_Model):
    name: str = ""
    namespace: str | None = None
    uid: str | None = None
    resource_version: str | None = Field(default=None, alias="resourceVersion")
    generation: int | None = None
    creation_timestamp: str | None = Field(default=None, alias="creationTimestamp")
    deletion_timestamp: str | None = Field(default=None, alias="deletionTimestamp")
    labels: dict[str, str] = Field(default_factory=dict)
    annotations: dict[str, str] = Field(default_factory=dict)
    owner_references: list[OwnerReference] = Field(default_factory=list, alias="ownerReferences")
    finalizers: list[str] = Field(default_factory=list)


# --- spec ----------------------------------------------------------------------------


class LocalObjectRef(_Model):
    name: str = ""
    optional: bool | None = None


class EnvFromSource(_Model):
    config_map_ref: LocalObjectRef | None = Field(default=None, alias="configMapRef")
    prefix: str | None = None
    secret_ref: LocalObjectRef | None = Field(default=None, alias="secretRef")


class ResourceClaim(_Model):
    name: str
    request: str | None = None


class ResourceRequirements(_Model):
    claims: list[ResourceClaim] | None = None
    limits: dict[str, Quantity] | None = None
    requests: dict[str, Quantity] | None = None


class AgentSpec(_Model):
    backend: Backend = Backend.CLOUD_HYPERVISOR
    conn_type: ConnType | None = Field(default=None, alias="connType")
    env_from: list[EnvFromSource] | None = Field(default=None, alias="envFrom")
    force_pull: bool | None = Field(default=None, alias="forcePull")
    image: str = Field(min_length=1)
    mode: AgentMode = AgentMode.CLONE
    network: str | None = None
    no_direct_io: bool | None = Field(default=None, alias="noDirectIO")
    os: OSType = OSType.LINUX
    probe_port: int | None = Field(default=None, alias="probePort", ge=0, le=65535)
    replicas: int = Field(default=0, ge=0)
    resources: ResourceRequirements | None = None
    service_account_name: str | None = Field(default=None, alias="serviceAccountName")
    storage: Quantity | None = None


class ToolboxSpec(_Model):
    backend: Backend = Backend.CLOUD_HYPERVISOR
    conn_type: ConnType | None = Field(default=None, alias="connType")
    force_pull: bool | None = Field(default=None, alias="forcePull")
    image: str | None = None
    mode: ToolboxMode = ToolboxMode.RUN
    name: str = Field(min_length=1, pattern=r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
    network: str | None = None
    no_direct_io: bool | None = Field(default=None, alias="noDirectIO")
    os: OSType = OSType.LINUX
    probe_port: int | None = Field(default=None, alias="probePort", ge=0, le=65535)
    resources: ResourceRequirements | None = None
    static_ip: str | None = Field(default=None, alias="staticIP")
    static_vm_id: str | None = Field(default=None, alias="staticVMID")
    storage: Quantity | None = None
    vnc_port: int | None = Field(default=None, alias="vncPort", ge=0, le=65535)


class CocoonSetSpec(_Model):
    agent: AgentSpec
    hibernate_policy: HibernatePolicy = Field(
        default=HibernatePolicy.RETAIN, alias="hibernatePolicy"
    )
    node_name: str | None = Field(default=None, alias="nodeName")
    node_pool: str = Field(default=k.DEFAULT_POOL, alias="nodePool")
    snapshot_compatibility_class: str | None = Field(
        default=None,
        alias="snapshotCompatibilityClass",
        max_length=63,
        pattern=r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$",
    )
    snapshot_policy: SnapshotPolicy = Field(default=SnapshotPolicy.ALWAYS, alias="snapshotPolicy")
    suspend: bool | None = None
    toolboxes: list[ToolboxSpec] | None = None


# --- status --------------------------------------------------------------------------


class AgentStatus(_Model):
    forked_from: str | None = Field(default=None, alias="forkedFrom")
    ip: str | None = None
    phase: str | None = None
    pod_name: str | None = Field(default=None, alias="podName")
    role: str
    slot: int
    vm_id: str | None = Field(default=None, alias="vmID")
    vm_name: str | None = Field(default=None, alias="vmName")


class Condition(_Model):
    last_transition_time: str = Field(alias="lastTransitionTime")
    message: str
    observed_generation: int | None = Field(default=None, alias="observedGeneration")
    reason: str
    status: str
    type: str


class ToolboxStatus(_Model):
    conn_type: ConnType | None = Field(default=None, alias="connType")
    ip: str | None = None
    name: str
    phase: str | None = None
    pod_name: str | None = Field(default=None, alias="podName")
    vm_id: str | None = Field(default=None, alias="vmID")
    vm_name: str | None = Field(default=None, alias="vmName")
    vnc_port: int | None = Field(default=None, alias="vncPort")


class CocoonSetStatus(_Model):
    agents: list[AgentStatus] | None = None
    conditions: list[Condition] | None = None
    desired_agents: int | None = Field(default=None, alias="desiredAgents")
    desired_toolboxes: int | None = Field(default=None, alias="desiredToolboxes")
    observed_generation: int | None = Field(default=None, alias="observedGeneration")
    phase: CocoonSetPhase | None = None
    ready_agents: int | None = Field(default=None, alias="readyAgents")
    ready_toolboxes: int | None = Field(default=None, alias="readyToolboxes")
    toolboxes: list[ToolboxStatus] | None = None


class CocoonSet(_Model):
    api_version: str = Field(default=k.API_VERSION, alias="apiVersion")
    kind: str = k.KIND
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    spec: CocoonSetSpec
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


# --- pods (only what the reconciler reads) -------------------------------------------


class ContainerStateRunning(_Model):
    started_at: str | None = Field(default=None, alias="startedAt")


class ContainerState(_Model):
    running: ContainerStateRunning | None = None


class ContainerStatus(_Model):
    name: str = ""
    ready: bool = False
    state: ContainerState | None = None


class PodCondition(_Model):
    type: str
    status: str
    reason: str | None = None
    message: str | None = None


class PodStatus(_Model):
    phase: str | None = None
    conditions: list[PodCondition] = Field(default_factory=list)
    container_statuses: list[ContainerStatus] = Field(
        default_factory=list, alias="containerStatuses"
    )


class PodSpec(_Model):
    node_name: str | None = Field(default=None, alias="nodeName")


class Pod(_Model):
    api_version: str = Field(default="v1", alias="apiVersion")
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
        return self.role == k.ROLE_MAIN or self.labels.get(k.LABEL_SLOT) == "0"

    @property
    def managed(self) -> bool:
        # Agents are always managed by vk-cocoon (SPEC §2); toolboxes say so explicitly.
        return self.role in (k.ROLE_MAIN, k.ROLE_SUB_AGENT) or (
            self.annotations.get(k.ANN_MANAGED) == k.TRUE
        )

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
        """Missing or garbage reads as 0 (SPEC §2)."""
        raw = self.annotations.get(k.ANN_LIFECYCLE_GENERATION, "")
        try:
            return int(raw)
        except ValueError:
            return 0

    @property
    def terminal(self) -> bool:
        return self.status.phase == "Failed" or self.lifecycle_state is LifecycleState.FAILED

    @property
    def live(self) -> bool:
        """VM id annotation non-empty and a container Running (SPEC §5)."""
        if not self.annotations.get(k.ANN_VM_ID):
            return False
        return any(
            cs.state is not None and cs.state.running is not None
            for cs in self.status.container_statuses
        )

    @property
    def ready(self) -> bool:
        return any(c.type == "Ready" and c.status == "True" for c in self.status.conditions)

    def unschedulable_message(self) -> str | None:
        for c in self.status.conditions:
            if c.type == "PodScheduled" and c.status == "False" and c.reason == "Unschedulable":
                return c.message or ""
        return None
