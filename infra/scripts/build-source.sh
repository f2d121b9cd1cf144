#!/usr/bin/env bash
# Stage the Cloud Run functions source: the product files plus an exported
# requirements.txt. Terraform's archive_file zips this directory, so run it
# before every apply:
#
#   ./infra/scripts/build-source.sh && terraform -chdir=terraform/examples/gke apply
#
# Only what the four targets import is deployed: main.py, shared/, functions/.
# The local stack (devstack/, cocoon_hibernation/), tests and the `local` extra (cel-python) stay
# out; the buildpack installs requirements.txt, it never sees pyproject.toml.
# The output is deterministic for unchanged sources (sorted copy, no caches),
# so the archive hash only changes when the code or the lock does.
set -euo pipefail

repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
out="${1:-${repo_root}/build/function-source}"

case "${out}" in
  ""|"/") echo "refusing to stage into '${out}'" >&2; exit 2 ;;
esac

rm -rf "${out}"
mkdir -p "${out}"

cp "${repo_root}/main.py" "${out}/main.py"
for pkg in shared functions; do
  # tar keeps the tree and lets us drop caches in one pass.
  tar -C "${repo_root}" --exclude='__pycache__' --exclude='*.pyc' -cf - "${pkg}" | tar -C "${out}" -xf -
done

# --frozen: never re-resolve here; the lock is the truth CI tested. Extras are
# excluded unless named, so the `local` extra (cel-python) is not exported.
# --prune drops what only the command line imports (rich, for its tables) and
# whatever only it needed; tests/deploy holds the result to the closure of
# what main.py, functions/ and shared/ import. With every artifact's hash (uv's
# default): the build's pip then installs in hash-checking mode, so a package
# index serving other bytes for a pinned version fails the build.
(cd "${repo_root}" && uv export --frozen --no-dev --no-emit-project \
  --prune rich \
  --no-header --no-annotate --quiet --output-file "${out}/requirements.txt")

# archive_file records file modes; normalise them so a umask difference
# between machines does not change the archive hash.
find "${out}" -type d -exec chmod 0755 {} +
find "${out}" -type f -exec chmod 0644 {} +

echo "staged function source in ${out}" >&2
