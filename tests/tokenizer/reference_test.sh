#!/usr/bin/env bash
# Exact agreement with the npm `tiktoken` package: Node encodes the corpus and seeded random strings, then
# Strata's test binary must produce identical ids for both encodings.
set -euo pipefail
tests_bin=${1:?usage: reference_test.sh path/to/strata_tests}
here=$(cd "$(dirname "$0")" && pwd)
export STRATA_NPM_CACHE=${STRATA_NPM_CACHE:-$HOME/.cache/strata/npm}
[ -d "$STRATA_NPM_CACHE/node_modules/tiktoken" ] || { echo "tiktoken npm package missing in $STRATA_NPM_CACHE (run scripts/test)"; exit 1; }
out=$(mktemp)
trap 'rm -f "$out"' EXIT
node "$here/reference.mjs" "$here/corpus" "$out" "${STRATA_TOKENIZER_RANDOM_CASES:-20000}"
STRATA_TOKENIZER_REFERENCE="$out" "$tests_bin" --gtest_filter='TokenizerReference.*' > "$out.log" 2>&1 || { cat "$out.log"; rm -f "$out.log"; exit 1; }
cat "$out.log"
grep -q '\[  PASSED  \] 1 test' "$out.log" || { echo "the reference test did not run"; rm -f "$out.log"; exit 1; }
rm -f "$out.log"
