#!/usr/bin/env bash
# Build the self-hosted image (infra/Dockerfile) without a Docker engine:
# buildah, with `RUN` in a chroot (no OCI runtime needed to build).
#
#   ./infra/scripts/build-image.sh [TAG]                 # on the pinned upstream base
#   ./infra/scripts/build-image.sh --local-base [TAG]    # on a Debian base made here
#
# TAG defaults to localhost/cocoon-hibernation:<version>, the version in
# pyproject.toml (the one the wheel and `--version` carry; CHANGELOG.md). The image for a cluster is
# built on the Dockerfile's default base (python:3.12-slim, pinned by digest).
# --local-base is for machines that cannot pull it: mmdebstrap makes a Debian
# bookworm root (Python 3.11 + pip, the Dockerfile's `python3` at
# /usr/local/bin like the upstream image) from the Debian archive, imported as
# localhost/cocoon-python-base:bookworm and passed as PYTHON_IMAGE. The CAs this
# machine trusts locally (/usr/local/share/ca-certificates: a TLS-intercepting
# proxy's, for instance) are added to that base, so the build's PyPI downloads
# verify as they do on the host (UV_NATIVE_TLS=1 makes uv use that store);
# such an image is for local tests only.
#
# Needs buildah (and, with --local-base, mmdebstrap and podman). Runs as root.
# Prints the image ID on its last line.
set -euo pipefail

repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
local_base=0
if [ "${1:-}" = "--local-base" ]; then
  local_base=1
  shift
fi
version="$(sed -n 's/^version = "\(.*\)"$/\1/p' "${repo_root}/pyproject.toml" | head -n1)"
[ -n "${version}" ] || { echo "build-image: no version in pyproject.toml" >&2; exit 2; }
tag="${1:-localhost/cocoon-hibernation:${version}}"
base_tag="localhost/cocoon-python-base:bookworm"
build_args=()

if [ "${local_base}" = 1 ]; then
  if ! podman image exists "${base_tag}"; then
    tar="$(mktemp --suffix=.tar)"
    trap 'rm -f "${tar}"' EXIT
    echo "build-image: mmdebstrap bookworm (python3, pip) -> ${base_tag}" >&2
    mmdebstrap --variant=minbase --quiet \
      --include=python3,python3-pip,python3-venv,ca-certificates \
      --customize-hook='ln -sf /usr/bin/python3 "$1/usr/local/bin/python3"' \
      --customize-hook='ln -sf /usr/bin/pip3 "$1/usr/local/bin/pip"' \
      --customize-hook='rm -f "$1"/usr/lib/python3.*/EXTERNALLY-MANAGED' \
      --customize-hook='if ls /usr/local/share/ca-certificates/*.crt >/dev/null 2>&1; then cp /usr/local/share/ca-certificates/*.crt "$1/usr/local/share/ca-certificates/" && chroot "$1" update-ca-certificates >/dev/null; fi' \
      --customize-hook='rm -rf "$1"/var/lib/apt/lists/* "$1"/var/cache/apt/*' \
      bookworm "${tar}" http://deb.debian.org/debian
    # UV_NATIVE_TLS: uv verifies with the system store (which holds those CAs),
    # not its bundled roots.
    podman import --change 'ENV UV_NATIVE_TLS=1' --change 'CMD ["/usr/bin/python3"]' \
      "${tar}" "${base_tag}" >/dev/null
  fi
  build_args=(--build-arg "PYTHON_IMAGE=${base_tag}")
fi

echo "build-image: buildah bud -> ${tag}" >&2
buildah bud --isolation chroot --quiet "${build_args[@]}" \
  -f "${repo_root}/infra/Dockerfile" -t "${tag}" "${repo_root}" >&2
buildah images --quiet --no-trunc "${tag}" | head -n1
