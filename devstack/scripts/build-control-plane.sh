#!/usr/bin/env bash
# Build (or reuse) a real kube-apiserver and etcd from their Go modules.
#
# Why a throwaway module: k8s.io/kubernetes publishes a go.mod that requires
# its staging modules (k8s.io/api, k8s.io/apiserver, ...) at v0.0.0 and points
# them at ./staging with replace directives, which do not apply to a consumer.
# So we create a tiny module that requires k8s.io/kubernetes at the pinned
# version and replaces every staging module with its published v0.X.Y.
# Nothing from those modules is committed: the build lands in a cache dir.
#
# Output: $COCOON_CONTROL_PLANE_DIR (default ~/.cache/cocoon-hibernation/
# control-plane/k8s-<ver>-etcd-<ver>) with bin/kube-apiserver and bin/etcd.
# Prints that directory on the last line of stdout.
set -euo pipefail

KUBE_VERSION="${COCOON_KUBE_VERSION:-v1.34.4}"
ETCD_VERSION="${COCOON_ETCD_VERSION:-v3.6.16}"
CACHE_ROOT="${COCOON_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/cocoon-hibernation}"
OUT="${COCOON_CONTROL_PLANE_DIR:-$CACHE_ROOT/control-plane/k8s-${KUBE_VERSION}-etcd-${ETCD_VERSION}}"

if [[ -x "$OUT/bin/kube-apiserver" && -x "$OUT/bin/etcd" ]]; then
  echo "control plane: reusing $OUT" >&2
  echo "$OUT"
  exit 0
fi

if ! command -v go >/dev/null 2>&1; then
  echo "control plane: 'go' is not installed; cannot build kube-apiserver/etcd" >&2
  exit 3
fi

# The staging modules' published versions mirror the kubernetes minor:
# v1.34.4 -> v0.34.4.
STAGING_VERSION="v0.${KUBE_VERSION#v1.}"
WORK="$(mktemp -d "${TMPDIR:-/tmp}/cocoon-cp-build.XXXXXX")"
trap 'rm -rf "$WORK"' EXIT
export GOFLAGS=-mod=mod
export CGO_ENABLED=0

start=$(date +%s)
mkdir -p "$OUT/bin.partial"

# --- kube-apiserver -------------------------------------------------------
mkdir -p "$WORK/kube"
cd "$WORK/kube"
go mod init cocoon.local/controlplane >/dev/null 2>&1
modfile="$(go mod download -json "k8s.io/kubernetes@${KUBE_VERSION}" | sed -n 's/.*"GoMod": "\(.*\)",*/\1/p')"
{
  echo "require k8s.io/kubernetes ${KUBE_VERSION}"
  echo "replace ("
  grep -E '=> \./staging/src/' "$modfile" | awk -v v="$STAGING_VERSION" '{print "\t" $1 " => " $1 " " v}'
  echo ")"
} >> go.mod
cat > tools.go <<'GO'
//go:build tools

package tools

import _ "k8s.io/kubernetes/cmd/kube-apiserver"
GO
echo "control plane: resolving k8s.io/kubernetes ${KUBE_VERSION} (staging ${STAGING_VERSION})" >&2
go mod tidy -e >&2 2>&1 || true
go get "k8s.io/kubernetes/cmd/kube-apiserver@${KUBE_VERSION}" >&2
echo "control plane: building kube-apiserver" >&2
go build -trimpath -ldflags "-s -w -X k8s.io/component-base/version.gitVersion=${KUBE_VERSION} -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=$(echo "$KUBE_VERSION" | cut -d. -f2)" \
  -o "$OUT/bin.partial/kube-apiserver" k8s.io/kubernetes/cmd/kube-apiserver

# --- etcd -----------------------------------------------------------------
mkdir -p "$WORK/etcd"
cd "$WORK/etcd"
go mod init cocoon.local/etcd >/dev/null 2>&1
echo "control plane: building etcd ${ETCD_VERSION}" >&2
go get "go.etcd.io/etcd/server/v3@${ETCD_VERSION}" >&2
# The server module's main package is go.etcd.io/etcd/server/v3/etcdmain;
# a three-line main calls it, as etcd's own top-level main does.
cat > main.go <<'GO'
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() { etcdmain.Main(os.Args) }
GO
go mod tidy >&2
go build -trimpath -ldflags "-s -w" -o "$OUT/bin.partial/etcd" .

rm -rf "$OUT/bin"
mv "$OUT/bin.partial" "$OUT/bin"
echo "control plane: built in $(( $(date +%s) - start )) s into $OUT" >&2
echo "$OUT"
