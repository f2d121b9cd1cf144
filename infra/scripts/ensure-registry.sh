#!/usr/bin/env bash
# Make sure a CNCF Distribution server (Debian package docker-registry) is on
# this machine; tests, benchmarks and the demo start their own instances of it
# on 127.0.0.1. Never starts the system service.
set -euo pipefail
if command -v docker-registry >/dev/null 2>&1 || command -v registry >/dev/null 2>&1; then
  exit 0
fi
if command -v apt-get >/dev/null 2>&1 && [ "$(id -u)" = 0 ]; then
  echo "installing the Debian package docker-registry (CNCF Distribution)..." >&2
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq >/dev/null
  # policy-rc.d may refuse to start the packaged service: that is fine, we never use it.
  apt-get install -y -qq docker-registry >/dev/null
  exit 0
fi
echo "docker-registry (CNCF Distribution) is missing: install it with 'sudo apt-get install docker-registry'" \
     "or put a 'registry' binary from distribution/distribution on PATH" >&2
exit 1
