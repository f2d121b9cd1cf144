"""Policy types of the CocoonSet API (values exactly as the CRD's enums)."""

from __future__ import annotations

from enum import StrEnum


class HibernatePolicy(StrEnum):
    RETAIN = "retain"
    RELEASE = "release"


class CocoonSetPhase(StrEnum):
    PENDING = "Pending"
    RUNNING = "Running"
    SCALING = "Scaling"
    SUSPENDING = "Suspending"
    SUSPENDED = "Suspended"
    WAKING = "Waking"
    MIGRATING = "Migrating"
    FAILED = "Failed"


class SnapshotPolicy(StrEnum):
    ALWAYS = "always"
    MAIN_ONLY = "main-only"
    NEVER = "never"


class LifecycleState(StrEnum):
    """vk-cocoon's `vm.cocoonstack.io/lifecycle-state` values."""

    CREATING = "creating"
    READY = "ready"
    HIBERNATING = "hibernating"
    HIBERNATED = "hibernated"
    FAILED = "failed"


class AgentMode(StrEnum):
    CLONE = "clone"
    RUN = "run"


class ToolboxMode(StrEnum):
    RUN = "run"
    CLONE = "clone"
    STATIC = "static"


class OSType(StrEnum):
    LINUX = "linux"
    WINDOWS = "windows"
    ANDROID = "android"
    MACOS = "macos"


class Backend(StrEnum):
    CLOUD_HYPERVISOR = "cloud-hypervisor"
    FIRECRACKER = "firecracker"


class ConnType(StrEnum):
    SSH = "ssh"
    RDP = "rdp"
    VNC = "vnc"
    ADB = "adb"
