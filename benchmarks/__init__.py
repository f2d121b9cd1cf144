"""Reproducible measurements: each module has `run(*, quick) -> dict`."""
