#!/usr/bin/env bash
# Builds @strata/client: generates src/generated/openapi.ts from docs/api/openapi.yaml with the pinned
# openapi-typescript, then compiles src/ with the pinned TypeScript compiler.
#   bash clients/typescript/build.sh [OUT_DIR]      (default: clients/typescript/dist)
# Needs only Node and $STRATA_NPM_CACHE (default ~/.cache/strata/npm) holding the npm packages pinned in
# scripts/lib.sh (`source scripts/lib.sh && strata_npm_setup` installs them); nothing is installed here.
# tsc fails when a route or a member the client uses is missing from, or different in, the API document.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../.." && pwd)
out=${1:-$here/dist}
npm_cache=${STRATA_NPM_CACHE:-$HOME/.cache/strata/npm}
openapi_typescript=$npm_cache/node_modules/openapi-typescript/bin/cli.js
tsc=$npm_cache/node_modules/typescript/bin/tsc
for tool in "$openapi_typescript" "$tsc"; do
  if [ ! -f "$tool" ]; then
    echo "build.sh: $tool is missing; install the pinned npm packages: source scripts/lib.sh && strata_npm_setup" >&2
    exit 1
  fi
done

# Generated beside the sources (git-ignored), replaced only when it changed, and atomically (a build running
# at the same time never reads half a file; the temporary name does not end in .ts, so tsc never sees it).
mkdir -p "$here/src/generated"
generated=$here/src/generated/openapi.ts
fresh=$(mktemp "$generated.XXXXXX")
trap 'rm -f "$fresh"' EXIT
# On failure only the head of its report is shown: the YAML parser's error carries the whole document.
if ! log=$(node "$openapi_typescript" "$root/docs/api/openapi.yaml" --output "$fresh" 2>&1); then
  echo "build.sh: openapi-typescript failed on docs/api/openapi.yaml:" >&2
  printf '%s\n' "$log" | grep -v '^\s*at ' | head -n 20 >&2
  exit 1
fi
if cmp -s "$fresh" "$generated"; then rm -f "$fresh"; else mv "$fresh" "$generated"; fi

node "$tsc" -p "$here/tsconfig.json" --outDir "$out"
