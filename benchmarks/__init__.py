"""Benchmarks: one command (`make bench`), figures written to benchmarks/results/.

Every module `bench_<name>.py` exposes `run(*, quick: bool) -> dict` returning
`{"figures": {name: {"value": float, "unit": str, "note": str}}, "samples": {name: [float]}}`.
Figures are ratios or counts measured side by side in the same run, because
these machines are noisy: an absolute millisecond figure means little alone.
"""
