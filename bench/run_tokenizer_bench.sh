#!/usr/bin/env bash
# Tokenizer throughput against the npm peers, on the same inputs in one run (docs/PERFORMANCE.md).
# Inputs: ~1 MiB each of source code, English prose and Chinese, (a) built by repeating the test corpus
# files and (b) generated with little repetition (bench/peers/make_tokenizer_inputs.mjs).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
source "$root/scripts/lib.sh"
strata_install "${STRATA_PACKAGES[@]}"
strata_npm_setup
strata_build dev strata_tokenizer_bench >&2
dir=${STRATA_BENCH_DIR:-/tmp/strata-bench}
mkdir -p "$dir"
files=()
for kind in code:code.txt prose:prose_en.txt chinese:chinese.txt; do
  name=${kind%%:*} src="$root/tests/tokenizer/corpus/${kind##*:}" out="$dir/tok-${kind%%:*}.txt"
  : > "$out"
  while [ "$(stat -c %s "$out")" -lt 1048576 ]; do cat "$src" >> "$out"; done
  files+=("$out")
done
node "$root/bench/peers/make_tokenizer_inputs.mjs" "$dir"
files+=("$dir/gen-code.txt" "$dir/gen-prose.txt" "$dir/gen-chinese.txt")
echo "--- Strata (C++), single thread and 2 threads"
STRATA_TOKENIZER_BENCH_FILES=$(IFS=:; echo "${files[*]}") "$root/build/bin/strata_tokenizer_bench" \
  --benchmark_repetitions=3 --benchmark_report_aggregates_only=true --benchmark_filter='median|.' 2>&1 \
  | grep -E 'ids;|_median' || true
echo "--- peers (Node $(node --version)), single thread, MB/s"
node "$root/bench/peers/tokenizer_peers.mjs" "${files[@]}"
