# One entry point for humans and CI. Every target does its own set-up, so each
# works on a fresh machine: uv is bootstrapped with pip when missing, and the
# Debian docker-registry (a real CNCF Distribution server) is installed when
# apt can install it.
SHELL := /bin/bash
UV ?= uv
export UV_LINK_MODE ?= copy

.PHONY: bootstrap sync sysdeps controlplane terraform-cli check test demo bench lock image

bootstrap:
	@command -v $(UV) >/dev/null 2>&1 || python3 -m pip install --quiet uv

sync: bootstrap
	@$(UV) sync --frozen --all-extras --quiet

sysdeps:
	@bash infra/scripts/ensure-registry.sh
	@bash infra/scripts/ensure-image-tools.sh

# The self-hosted image without a Docker engine (buildah; a Debian base made with
# mmdebstrap when the upstream one cannot be pulled): see infra/scripts/build-image.sh.
image: sysdeps
	@bash infra/scripts/build-image.sh --local-base

check: sync
	$(UV) run ruff check .
	$(UV) run mypy
	$(UV) run lint-imports
	$(UV) run hadolint --failure-threshold info infra/Dockerfile

# A real kube-apiserver + etcd, built from their Go modules into ~/.cache (reused when
# present; needs Go). The conformance and e2e suites also run against it.
controlplane:
	@bash devstack/scripts/build-control-plane.sh

# Without Go the real-server tests skip (saying why); under CI=true that is a failure.
# A Terraform CLI for the deploy tests: the one on PATH, else OpenTofu built from its Go
# module into ~/.cache (about 20 min cold on 2 cores: built here, before pytest, so no test's
# timeout has to cover it). A failure here is reported by the tests that need the CLI.
terraform-cli:
	@bash infra/scripts/build-terraform.sh cli >/dev/null || true

test: sync sysdeps terraform-cli
	@cp_dir="$$(bash devstack/scripts/build-control-plane.sh | tail -n 1)" || { \
	  if [ "$${CI:-}" = true ]; then echo "CI: the real control plane is required" >&2; exit 1; fi; \
	  cp_dir=""; }; \
	COCOON_CONTROL_PLANE_BIN="$${cp_dir:+$$cp_dir/bin}" $(UV) run pytest -q -rs

demo: sync sysdeps
	$(UV) run cocoon-hibernation demo

bench: sync sysdeps
	$(UV) run python -m benchmarks

lock: bootstrap
	$(UV) lock
