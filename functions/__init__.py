"""The deployed functions: CloudEvent and HTTP in, reconciles out (docs/design.md#targets).

- `entrypoints`: the four targets (`release`, `wake`, `sweep`, `ingest`), decorated once;
  `main.py` re-exports them for Cloud Run.
- `ingest`: the HTTP webhooks (gates, parse, ack or retry as HTTP status).
- `dispatch`: triggers -> reconciles; the one place that decides ack or retry.
- `process`: the process's settings and clients, read and built once per instance.
- `report_wait`, `sweep`: the push path's bounded wait, the sweep target's run.
- `serve`, `metrics`: all four targets in one long-running process, with Prometheus.
"""
