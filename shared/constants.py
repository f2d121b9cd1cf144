"""Every key, Event reason and metric name this project reads or writes, in one place: a wire
contract with cocoon-operator, vk-cocoon and the dashboards, so nothing else spells them out."""

from __future__ import annotations

from typing import Final

# --- CocoonSet API -----------------------------------------------------------
GROUP: Final = "cocoonset.cocoonstack.io"
VERSION: Final = "v1"
API_VERSION: Final = f"{GROUP}/{VERSION}"
KIND: Final = "CocoonSet"
PLURAL: Final = "cocoonsets"
SINGULAR: Final = "cocoonset"
CRD_NAME: Final = f"{PLURAL}.{GROUP}"

# --- labels on pods ----------------------------------------------------------
LABEL_SET_NAME: Final = "cocoonset.cocoonstack.io/name"
LABEL_ROLE: Final = "cocoonset.cocoonstack.io/role"
LABEL_SLOT: Final = "cocoonset.cocoonstack.io/slot"
LABEL_APP_NAME: Final = "app.kubernetes.io/name"
LABEL_POOL: Final = "cocoonstack.io/pool"
LABEL_SNAPSHOT_CPU_CLASS: Final = "cocoonstack.io/snapshot-cpu-class"
LABEL_HOSTNAME: Final = "kubernetes.io/hostname"

ROLE_MAIN: Final = "main"
ROLE_SUB_AGENT: Final = "sub-agent"
ROLE_TOOLBOX: Final = "toolbox"
DEFAULT_POOL: Final = "default"

# --- annotations on the set --------------------------------------------------
ANN_HIBERNATED_ON_NODE: Final = "cocoonset.cocoonstack.io/hibernated-on-node"
ANN_DELETE_VM_NAMES: Final = "cocoonset.cocoonstack.io/delete-vm-names"
# The main VM's image at release: a wake after `spec.agent.image` changed discards
# the snapshot instead of restoring it.
ANN_HIBERNATED_IMAGE: Final = "cocoonset.cocoonstack.io/hibernated-image"
# cocoon-operator's suspend clock: past 3 minutes in Suspending it writes `Failed`.
ANN_SUSPENDING_SINCE: Final = "cocoonset.cocoonstack.io/suspending-since"
ANN_IDLE_TIMEOUT: Final = "cocoonset.cocoonstack.io/idle-timeout"
ANN_LAST_ACTIVITY: Final = "cocoonset.cocoonstack.io/last-activity"
ANN_IDLE_EXEMPT_UNTIL: Final = "cocoonset.cocoonstack.io/idle-exempt-until"
# Written when a wake completes (the sweep's idle clock; status is the operator's).
ANN_LAST_WAKE: Final = "cocoonset.cocoonstack.io/last-wake-completed"
# The restored main pod (uid) whose wake was booked: a wake cocoon-operator
# completed first is booked once, by this record.
ANN_LAST_WAKE_POD: Final = "cocoonset.cocoonstack.io/last-wake-pod"
# Who asked for the wake in flight (written with the unsuspend, cleared with WakeCompleted).
ANN_WAKE_REQUESTED_BY: Final = "cocoonset.cocoonstack.io/wake-requested-by"
# When a wake was engaged (set with Waking); the sweep measures the wake deadline from it.
ANN_WAKE_STARTED: Final = "cocoonset.cocoonstack.io/wake-started"
# The wake whose WakeTimedOut was already emitted, so the sweep warns once per wake.
ANN_WAKE_TIMEOUT_REPORTED: Final = "cocoonset.cocoonstack.io/wake-timeout-reported"
# Durable "once" effects. A release round is the set's generation at the stash (written
# before any delete) with the pods it deletes; `release-reported` is the round whose
# SeatReleased exists. Round != reported after the seat is free = the report is owed.
ANN_RELEASE_ROUND: Final = "cocoonset.cocoonstack.io/release-round"
ANN_RELEASE_ROUND_PODS: Final = "cocoonset.cocoonstack.io/release-round-pods"
ANN_RELEASE_REPORTED: Final = "cocoonset.cocoonstack.io/release-reported"
# `<placement>:<restored main pod uid>:<hint node>`, written with the hint's clearing and
# removed once WakeCompleted exists. Present = the report is owed.
ANN_WAKE_REPORT_OWED: Final = "cocoonset.cocoonstack.io/wake-report-owed"
# The bad idle annotation(s) the sweep already warned about, so it warns once per bad value.
ANN_IDLE_CONFIG_ERROR: Final = "cocoonset.cocoonstack.io/idle-config-error"

# --- the seat economy ------------------------------------------------------------
# Opt-ins a user writes on a set: `<duration>` idle after which a waiting wake may take
# the seat; `<cron 5 fields> <IANA zone>` sleep/wake windows; `<quantity>` PodMetrics CPU
# at or above which the VM counts as active.
ANN_RECLAIMABLE_AFTER: Final = "cocoonset.cocoonstack.io/reclaimable-after"
ANN_SLEEP_SCHEDULE: Final = "cocoonset.cocoonstack.io/sleep-schedule"
ANN_WAKE_SCHEDULE: Final = "cocoonset.cocoonstack.io/wake-schedule"
ANN_IDLE_CPU_BELOW: Final = "cocoonset.cocoonstack.io/idle-cpu-below"
# Records: a waiting waker's JSON wait (reclaim's SeatWait); on a victim, the
# `<namespace>/<name>` it was reclaimed for; the last schedule tick applied; the bad
# seat annotation value(s) already warned about.
ANN_SEAT_WAIT: Final = "cocoonset.cocoonstack.io/seat-wait"
ANN_RECLAIMED_BY: Final = "cocoonset.cocoonstack.io/seat-reclaimed-by"
ANN_SCHEDULE_APPLIED: Final = "cocoonset.cocoonstack.io/schedule-applied"
ANN_SEAT_CONFIG_ERROR: Final = "cocoonset.cocoonstack.io/seat-config-error"
# The fair order's gate on a restore pod (only this project removes it), the pool line it
# joins (a label: one LIST reads a line), its place (wake request time) and when ungated.
GATE_SEAT_ORDER: Final = "cocoonset.cocoonstack.io/seat-order"
LABEL_SEAT_LINE: Final = "cocoonset.cocoonstack.io/seat-line"
ANN_QUEUED_AT: Final = "cocoonset.cocoonstack.io/seat-queued-at"
ANN_UNGATED_AT: Final = "cocoonset.cocoonstack.io/seat-ungated-at"

# --- annotations on pods -----------------------------------------------------
ANN_GENERATION: Final = "cocoonset.cocoonstack.io/generation"
ANN_IMAGE: Final = "cocoonset.cocoonstack.io/image"
ANN_MODE: Final = "cocoonset.cocoonstack.io/mode"
ANN_OS: Final = "cocoonset.cocoonstack.io/os"
ANN_STORAGE: Final = "cocoonset.cocoonstack.io/storage"
ANN_NETWORK: Final = "cocoonset.cocoonstack.io/network"
ANN_SNAPSHOT_POLICY: Final = "cocoonset.cocoonstack.io/snapshot-policy"
ANN_MANAGED: Final = "cocoonset.cocoonstack.io/managed"
ANN_FORCE_PULL: Final = "cocoonset.cocoonstack.io/force-pull"

ANN_VM_NAME: Final = "vm.cocoonstack.io/name"
ANN_VM_ID: Final = "vm.cocoonstack.io/id"
ANN_VM_IP: Final = "vm.cocoonstack.io/ip"
ANN_HIBERNATE: Final = "vm.cocoonstack.io/hibernate"
ANN_RESTORE: Final = "vm.cocoonstack.io/restore-from-hibernate"
ANN_KEEP_SNAPSHOT: Final = "vm.cocoonstack.io/keep-snapshot-on-delete"
ANN_LIFECYCLE_STATE: Final = "vm.cocoonstack.io/lifecycle-state"
ANN_LIFECYCLE_GENERATION: Final = "vm.cocoonstack.io/lifecycle-observed-generation"
ANN_LIFECYCLE_MESSAGE: Final = "vm.cocoonstack.io/lifecycle-state-message"
ANN_NO_DIRECT_IO: Final = "vm.cocoonstack.io/no-direct-io"
ANN_CONN_TYPE: Final = "vm.cocoonstack.io/conn-type"
ANN_BACKEND: Final = "vm.cocoonstack.io/backend"
ANN_PROBE_PORT: Final = "vm.cocoonstack.io/probe-port"

TRUE: Final = "true"

# --- registry ----------------------------------------------------------------
TAG_HIBERNATE: Final = "hibernate"
TAG_LATEST: Final = "latest"

# --- the main pod a wake builds -----------------------------------------------
PLACEHOLDER_IMAGE: Final = "ghcr.io/cocoonstack/placeholder:latest"
MAIN_CONTAINER: Final = "agent"
TOLERATION_VK_PROVIDER: Final = "virtual-kubelet.io/provider"
TOLERATION_NOT_READY: Final = "node.kubernetes.io/not-ready"
TOLERATION_UNREACHABLE: Final = "node.kubernetes.io/unreachable"
POD_GRACE_SECONDS: Final = 1
HINT_AFFINITY_WEIGHT: Final = 100

# --- Event reasons --------------------------------------------------------------
REASON_WAKE_NO_CAPACITY: Final = "WakeNoCapacity"
REASON_WAKE_TIMED_OUT: Final = "WakeTimedOut"
REASON_SEAT_RELEASED: Final = "SeatReleased"
REASON_WAKE_COMPLETED: Final = "WakeCompleted"
REASON_WAKE_REQUESTED: Final = "WakeRequested"
REASON_IDLE_SUSPENDED: Final = "IdleSuspended"
REASON_BAD_ANNOTATION: Final = "InvalidAnnotation"
# A write the API server's admission refused (quota, PodSecurity, ServiceAccount).
REASON_WRITE_REFUSED: Final = "WriteRefused"
# A legacy VM name that more than one existing set records: no release, no restore.
REASON_VM_NAME_SHARED: Final = "VMNameShared"
# A released set whose `:hibernate` is gone: the wake creates nothing.
REASON_SNAPSHOT_MISSING: Final = "SnapshotMissing"
# The image changed since the release: the snapshot is dropped, the VM boots fresh.
REASON_SNAPSHOT_DISCARDED: Final = "SnapshotDiscarded"
# cocoon-operator's, read by `status`: its suspend gave up and wrote `Failed`.
REASON_SUSPEND_TIMED_OUT: Final = "SuspendTimedOut"
REASON_SEAT_RECLAIMED: Final = "SeatReclaimed"
REASON_SCHEDULE_SUSPENDED: Final = "ScheduleSuspended"
REASON_SCHEDULE_WOKEN: Final = "ScheduleWoken"
EVENT_COMPONENT: Final = "cocoon-hibernation"

# --- metric names (kinds, labels and buckets: shared/metric_names.py) -------------
# The reference operator's counters: dashboards built for it query these names.
METRIC_PODS_DELETED: Final = "cocoon_operator_slot_release_pods_deleted_total"
METRIC_WAKE: Final = "cocoon_operator_slot_release_wake_total"
METRIC_WAKE_UNSCHEDULABLE: Final = "cocoon_operator_slot_release_wake_unschedulable_total"
METRIC_SEAT_RECLAIMS: Final = "cocoon_hibernation_seat_reclaims_total"
METRIC_EVENTS: Final = "cocoon_hibernation_events_total"
METRIC_RELEASE_PENDING: Final = "cocoon_hibernation_release_pending_total"
METRIC_DROPPED: Final = "cocoon_hibernation_dropped_events_total"
METRIC_ADMISSION_REFUSED: Final = "cocoon_hibernation_admission_refused_total"
METRIC_RETRIES: Final = "cocoon_hibernation_retries_total"
METRIC_WAKE_DURATION: Final = "cocoon_hibernation_wake_seconds"
METRIC_SEAT_WAIT: Final = "cocoon_hibernation_seat_wait_seconds"
METRIC_RECLAIM_GRACE: Final = "cocoon_hibernation_reclaim_grace_seconds"
METRIC_SWEEP_DURATION: Final = "cocoon_hibernation_sweep_seconds"
METRIC_SEAT_FREED: Final = "cocoon_hibernation_seat_freed_seconds"

PLACEMENT_HINT_NODE: Final = "hint-node"
PLACEMENT_POOL: Final = "pool"

# --- CloudEvent types in and out -----------------------------------------------
CE_SNAPSHOT_PUSHED: Final = "io.cocoonstack.snapshot.pushed"
CE_SET_CHANGED: Final = "io.cocoonstack.cocoonset.changed"
CE_WAKE_REQUESTED: Final = "io.cocoonstack.cocoonset.wake.requested"
CE_SWEEP_REQUESTED: Final = "io.cocoonstack.sweep.requested"
CE_PUBSUB_PUBLISHED: Final = "google.cloud.pubsub.topic.v1.messagePublished"
CE_AUDIT_WRITTEN: Final = "google.cloud.audit.log.v1.written"
CE_HARBOR_PUSHED: Final = "harbor.artifact.pushed"
CE_KNATIVE_PING: Final = "dev.knative.sources.ping"
CE_KNATIVE_PREFIX: Final = "dev.knative.apiserver."
CE_LIFECYCLE_PREFIX: Final = "io.cocoonstack.hibernation."
