#!/usr/bin/env bash
# The Terraform CLI and the providers the module needs, without the network
# beyond the Go module proxy. Two modes:
#
#   build-terraform.sh cli        # prints the path of a terraform (or tofu) binary
#   build-terraform.sh providers  # prints the path of a CLI config file that
#                                 # installs google/random/archive/time from a
#                                 # filesystem mirror, never from a registry
#
# cli: the `terraform` on PATH when there is one; else OpenTofu built from its
# Go module into the cache. Terraform itself cannot be built from the proxy:
# its go.mod replaces nine nested modules (remote-state backends) with ./
# directories that the published module zip does not contain.
#
# providers: a filesystem mirror in the cache
# ($COCOON_CACHE_DIR/tf-mirror/registry.terraform.io/hashicorp/<name>/<ver>/linux_amd64/).
# Whatever is missing is built from its Go module. The proxy does not serve
# the v2+ releases of hashicorp/terraform-provider-{google,random,archive,time}
# (their go.mod has no /vN suffix) nor pseudo-versions of their commits
# (403 "This module version is not available"), so when the mirror is empty
# this mode says so and exits 4: the tests that need a provider then report
# exactly that. A mirror filled any other way (a release zip unpacked there by
# an operator, a CI cache) is used as is.
#
# Nothing here is committed output: everything lands in the cache dir.
set -euo pipefail

mode="${1:-cli}"
CACHE_ROOT="${COCOON_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/cocoon-hibernation}"
TOFU_VERSION="${COCOON_TOFU_VERSION:-v1.12.6}"
MIRROR="${COCOON_TF_MIRROR:-$CACHE_ROOT/tf-mirror}"
ARCH="$(go env GOOS 2>/dev/null || echo linux)_$(go env GOARCH 2>/dev/null || echo amd64)"

# Pinned provider versions the mirror must hold (module constraints allow them).
declare -A PROVIDERS=(
  [google]="${COCOON_TF_GOOGLE_VERSION:-7.45.0}"
  [random]="${COCOON_TF_RANDOM_VERSION:-3.9.0}"
  [archive]="${COCOON_TF_ARCHIVE_VERSION:-2.8.0}"
  [time]="${COCOON_TF_TIME_VERSION:-0.14.0}"
)
# The commit of the google provider's v7.45.0 tag: the only form the proxy
# could serve for a module without a /v7 suffix.
GOOGLE_COMMIT="6f756229ab21d14d238c6280d2255262e4cccfc4"

build_cli() {
  if command -v terraform >/dev/null 2>&1; then
    command -v terraform
    return 0
  fi
  local out="$CACHE_ROOT/opentofu-$TOFU_VERSION"
  if [[ -x "$out/tofu" ]]; then
    echo "$out/tofu"
    return 0
  fi
  if ! command -v go >/dev/null 2>&1; then
    echo "terraform: none on PATH and no 'go' to build OpenTofu" >&2
    return 3
  fi
  # OpenTofu's go.mod replaces hcl/v2 with its fork, so `go install @version`
  # refuses it: build it from a throwaway module that repeats the replace.
  local work
  work="$(mktemp -d "${TMPDIR:-/tmp}/cocoon-tofu-build.XXXXXX")"
  trap 'rm -rf "$work"' RETURN
  local start modfile
  start=$(date +%s)
  (
    cd "$work"
    go mod init cocoon.local/tofu >/dev/null 2>&1
    modfile="$(go mod download -json "github.com/opentofu/opentofu@${TOFU_VERSION}" | sed -n 's/.*"GoMod": "\(.*\)",*/\1/p')"
    echo "require github.com/opentofu/opentofu ${TOFU_VERSION}" >> go.mod
    grep -E '^replace ' "$modfile" >> go.mod || true
    cat > tools.go <<'GO'
//go:build tools

package tools

import _ "github.com/opentofu/opentofu/cmd/tofu"
GO
    GOFLAGS=-mod=mod go mod tidy >/dev/null 2>&1 || GOFLAGS=-mod=mod go get "github.com/opentofu/opentofu/cmd/tofu@${TOFU_VERSION}" >&2
    mkdir -p "$out.partial"
    CGO_ENABLED=0 GOFLAGS=-mod=mod go build -trimpath -ldflags '-s -w' -o "$out.partial/tofu" github.com/opentofu/opentofu/cmd/tofu
  )
  rm -rf "$out"
  mv "$out.partial" "$out"
  echo "terraform: built OpenTofu $TOFU_VERSION in $(( $(date +%s) - start ))s -> $out/tofu" >&2
  echo "$out/tofu"
}

provider_path() {
  local name="$1" version="$2"
  echo "$MIRROR/registry.terraform.io/hashicorp/$name/$version/$ARCH/terraform-provider-${name}_v${version}_x5"
}

build_providers() {
  local missing=()
  for name in "${!PROVIDERS[@]}"; do
    [[ -x "$(provider_path "$name" "${PROVIDERS[$name]}")" ]] || missing+=("$name")
  done
  if (( ${#missing[@]} > 0 )); then
    if ! command -v go >/dev/null 2>&1; then
      echo "providers: missing from $MIRROR: ${missing[*]}; no 'go' to try building them" >&2
      return 4
    fi
    # Ask the proxy once, for the one that matters most; its answer is the
    # reason reported. (random/archive/time are refused the same way.)
    local probe err
    probe="$(mktemp -d "${TMPDIR:-/tmp}/cocoon-tfp.XXXXXX")"
    if err="$(cd "$probe" && go mod download -json "github.com/hashicorp/terraform-provider-google@${GOOGLE_COMMIT}" 2>&1)" \
        && ! grep -q '"Error"' <<<"$err"; then
      echo "providers: the Go module proxy now serves terraform-provider-google@${GOOGLE_COMMIT}; extend this script to build it" >&2
    else
      echo "providers: missing from $MIRROR: ${missing[*]}" >&2
      echo "providers: go mod download github.com/hashicorp/terraform-provider-google@${GOOGLE_COMMIT} answered:" >&2
      sed -n 's/.*"Error": "\(.*\)".*/  \1/p' <<<"$err" | sed 's/\\n/ /g; s/\\t/ /g' >&2
    fi
    rm -rf "$probe"
    return 4
  fi
  local rc="$CACHE_ROOT/terraformrc"
  mkdir -p "$CACHE_ROOT"
  # OpenTofu resolves `hashicorp/google` on registry.opentofu.org: the same
  # binaries answer for both hostnames (hard links; OpenTofu does not follow a
  # symlinked hostname directory when it scans the mirror).
  [[ -L "$MIRROR/registry.opentofu.org" ]] && rm "$MIRROR/registry.opentofu.org"
  local name src dst
  for name in "${!PROVIDERS[@]}"; do
    src="$(provider_path "$name" "${PROVIDERS[$name]}")"
    dst="${src/registry.terraform.io/registry.opentofu.org}"
    if [[ ! -e "$dst" ]]; then
      mkdir -p "$(dirname "$dst")"
      ln "$src" "$dst" 2>/dev/null || cp "$src" "$dst"
    fi
  done
  cat > "$rc" <<EOF
# Written by infra/scripts/build-terraform.sh: providers from the local mirror
# only; a provider missing there fails init instead of reaching a registry.
provider_installation {
  filesystem_mirror {
    path    = "$MIRROR"
    include = ["registry.terraform.io/hashicorp/*", "registry.opentofu.org/hashicorp/*"]
  }
}
EOF
  echo "$rc"
}

case "$mode" in
  cli) build_cli ;;
  providers) build_providers ;;
  *) echo "usage: $0 cli|providers" >&2; exit 2 ;;
esac
