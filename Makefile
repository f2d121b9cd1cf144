# One entry point for humans and CI. Every target does its own set-up, so each
# works on a fresh machine: uv is bootstrapped with pip when missing, and the
# Debian docker-registry (a real CNCF Distribution server) is installed when
# apt can install it.
SHELL := /bin/bash
UV ?= uv
export UV_LINK_MODE ?= copy

.PHONY: bootstrap sync sysdeps check test demo bench lock

bootstrap:
	@command -v $(UV) >/dev/null 2>&1 || python3 -m pip install --quiet uv

sync: bootstrap
	@$(UV) sync --frozen --all-extras --quiet

sysdeps:
	@bash infra/scripts/ensure-registry.sh

check: sync
	$(UV) run ruff check .
	$(UV) run mypy
	$(UV) run lint-imports
	$(UV) run hadolint --failure-threshold info infra/Dockerfile

test: sync sysdeps
	$(UV) run pytest -q -rs

demo: sync sysdeps
	$(UV) run cocoon-hibernation demo

bench: sync sysdeps
	$(UV) run python -m benchmarks

lock: bootstrap
	$(UV) lock
