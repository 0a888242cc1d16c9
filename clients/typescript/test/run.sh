#!/usr/bin/env bash
# ctest client_typescript: builds @strata/client (build.sh) into a scratch directory and runs its tests with
# Node's test runner — the SSE parser, the typed contract against docs/api/openapi.yaml, and the client
# against a live `strata serve`.
#   bash clients/typescript/test/run.sh PATH/TO/strata
# Needs Node 20+ and $STRATA_NPM_CACHE (default ~/.cache/strata/npm) with the npm packages pinned in
# scripts/lib.sh; writes nothing to the checkout but the git-ignored src/generated/.
set -euo pipefail
if [ $# -ne 1 ]; then
  echo "usage: $0 PATH/TO/strata" >&2
  exit 2
fi
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
strata=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")
scratch=$(mktemp -d "${TMPDIR:-/tmp}/strata-ts-client.XXXXXX")
trap 'rm -rf "$scratch"' EXIT

# The package as it would be installed: its package.json (type: module) beside the compiled dist/.
cp "$here/../package.json" "$scratch/package.json"
bash "$here/../build.sh" "$scratch/dist"

STRATA_BIN=$strata STRATA_CLIENT_DIST=$scratch/dist \
  node --test --test-reporter=spec "$here/sse.test.mjs" "$here/contract.test.mjs" "$here/client.test.mjs"
