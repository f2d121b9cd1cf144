"""Annotation keys and names of the seat economy (kept beside `shared.constants`, additive).

User-facing opt-ins (written by users) and records (written by this project,
read back on the next run so every decision is durable across invocations).
"""

from __future__ import annotations

from typing import Final

# --- opt-ins a user writes on a CocoonSet ---------------------------------------
# `<duration>`: this release set's seat may be taken by a waiting wake once idle that long.
ANN_RECLAIMABLE_AFTER: Final = "cocoonset.cocoonstack.io/reclaimable-after"
# `<cron 5 fields> <IANA zone>`: suspend / wake at those times.
ANN_SLEEP_SCHEDULE: Final = "cocoonset.cocoonstack.io/sleep-schedule"
ANN_WAKE_SCHEDULE: Final = "cocoonset.cocoonstack.io/wake-schedule"
# `<quantity>` (e.g. `50m`): PodMetrics CPU at or above this counts as activity.
ANN_IDLE_CPU_BELOW: Final = "cocoonset.cocoonstack.io/idle-cpu-below"

# --- records this project writes ------------------------------------------------
# On a waiting waker: JSON {pod, since, victim?, at?, freed?} (see reclaim.SeatWait).
ANN_SEAT_WAIT: Final = "cocoonset.cocoonstack.io/seat-wait"
# On a victim: `<namespace>/<name>` of the wake its seat was reclaimed for.
ANN_RECLAIMED_BY: Final = "cocoonset.cocoonstack.io/seat-reclaimed-by"
# On a scheduled set: the last schedule tick applied, `sleep@<RFC3339>` / `wake@<RFC3339>`.
ANN_SCHEDULE_APPLIED: Final = "cocoonset.cocoonstack.io/schedule-applied"
# The bad seat-economy annotation value(s) already warned about (warn once per value).
ANN_SEAT_CONFIG_ERROR: Final = "cocoonset.cocoonstack.io/seat-config-error"

REASON_SEAT_RECLAIMED: Final = "SeatReclaimed"
REASON_SCHEDULE_SUSPENDED: Final = "ScheduleSuspended"
REASON_SCHEDULE_WOKEN: Final = "ScheduleWoken"
REASON_METRICS_UNAVAILABLE: Final = "PodMetricsUnavailable"

CE_SEAT_RECLAIMED_KIND: Final = "seat-reclaimed"

# The default grace: a wake must have been unschedulable this long before it reclaims.
DEFAULT_RECLAIM_GRACE_SECONDS: Final = 30
