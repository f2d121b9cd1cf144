"""The deployed functions: CloudEvent and HTTP in, reconciles out (`entrypoints` the targets,
`dispatch` triggers to reconciles and the one ack-or-retry decision, `process` the settings
and clients built once per instance)."""
