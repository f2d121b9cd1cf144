#!/usr/bin/env bash
# Install what tests/deploy/test_image.py needs to build and run infra/Dockerfile
# without a Docker engine: buildah, podman, runc, mmdebstrap (Debian packages).
# Only as root with apt-get; otherwise says what is missing and exits 0, and the
# image tests skip saying why (CI runs as root, so there they run).
set -euo pipefail
missing=()
for tool in buildah podman runc mmdebstrap; do
  command -v "${tool}" >/dev/null 2>&1 || missing+=("${tool}")
done
if [ "${#missing[@]}" -eq 0 ]; then
  exit 0
fi
if command -v apt-get >/dev/null 2>&1 && [ "$(id -u)" = 0 ]; then
  echo "installing ${missing[*]} (image build and run tests)..." >&2
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq >/dev/null
  # With recommends: podman's (slirp4netns, fuse-overlayfs, uidmap, ...) are what the image
  # tests were run with here; a leaner set is untested.
  apt-get install -y -qq "${missing[@]}" uidmap >/dev/null
  exit 0
fi
echo "not installed: ${missing[*]}; the image tests will skip ('sudo apt-get install ${missing[*]}')" >&2
