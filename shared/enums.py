"""Policy types of the CocoonSet API, values exactly as the CRD's enums. A type's docstring
is its description in the generated CRD (keep upstream's text); none where the field describes
itself (HibernatePolicy)."""

from __future__ import annotations

from enum import StrEnum


class HibernatePolicy(StrEnum):
    RETAIN = "retain"
    RELEASE = "release"


class CocoonSetPhase(StrEnum):
    """CocoonSetPhase represents the lifecycle phase of a CocoonSet."""

    PENDING = "Pending"
    RUNNING = "Running"
    SCALING = "Scaling"
    SUSPENDING = "Suspending"
    SUSPENDED = "Suspended"
    WAKING = "Waking"
    MIGRATING = "Migrating"
    FAILED = "Failed"


class SnapshotPolicy(StrEnum):
    """SnapshotPolicy defines when VM snapshots are taken."""

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
    """AgentMode defines the mode of an agent VM."""

    CLONE = "clone"
    RUN = "run"


class ToolboxMode(StrEnum):
    """ToolboxMode defines the mode of a toolbox VM."""

    RUN = "run"
    CLONE = "clone"
    STATIC = "static"


class OSType(StrEnum):
    """OSType defines the guest operating system type."""

    LINUX = "linux"
    WINDOWS = "windows"
    ANDROID = "android"
    MACOS = "macos"


class Backend(StrEnum):
    """Backend selects the hypervisor backend used to run a VM.
    Firecracker uses direct kernel boot and only supports OCI VM images
    (cloudimg URLs and Windows are rejected); the webhook and vk-cocoon
    enforce these constraints at admission and run time.
    """

    CLOUD_HYPERVISOR = "cloud-hypervisor"
    FIRECRACKER = "firecracker"


class ConnType(StrEnum):
    """ConnType is the connection protocol advertised for a VM. Empty
    falls back to OS-based inference (Linux→ssh, Windows→rdp, Android→adb);
    set explicitly to override (e.g. Linux+xrdp→rdp).
    """

    SSH = "ssh"
    RDP = "rdp"
    VNC = "vnc"
    ADB = "adb"
