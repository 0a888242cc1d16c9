#!/usr/bin/env bash
# Tokenizer throughput against the npm peers, on the same inputs in one run (docs/PERFORMANCE.md).
# Inputs: ~1 MiB each of source code, English prose and Chinese, (a) built by repeating the test corpus
# files and (b) generated with little repetition (bench/peers/make_tokenizer_inputs.mjs).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
source "$root/scripts/lib.sh"
source "$root/bench/lib.sh"
strata_install "${STRATA_PACKAGES[@]}"
strata_npm_setup
strata_build dev strata_tokenizer_bench strata >&2
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
echo "--- whole process on the generated inputs: one run = start, load the vocabulary, read, encode once (median of 3, ms)"
for encoding in cl100k_base o200k_base; do
  for file in "$dir/gen-code.txt" "$dir/gen-prose.txt" "$dir/gen-chinese.txt"; do
    s=$(median_ms 3 "$root/build/bin/strata" tokens count --encoding "$encoding" "$file")
    t=$(median_ms 3 node "$root/bench/peers/tokenizer_once.mjs" tiktoken "$encoding" "$file")
    g=$(median_ms 3 node "$root/bench/peers/tokenizer_once.mjs" gpt-tokenizer "$encoding" "$file")
    echo "$encoding $(basename "$file"): strata $s ms, tiktoken $t ms, gpt-tokenizer $g ms"
  done
done
echo "--- 5 MiB of Python source nobody here wrote (Debian's Python standard library, concatenated):"
echo "    strata tokens count as a whole process (1 thread, every core) beside the peers' warm in-process throughput"
py="$dir/python-stdlib-5mb.py"
if [ ! -s "$py" ]; then
  find /usr/lib/python3.11 -maxdepth 1 -name '*.py' -print0 | sort -z | xargs -0 cat | head -c 5242880 > "$py"
fi
mib=$(awk -v b="$(stat -c %s "$py")" 'BEGIN {printf "%.2f", b / 1048576}')
node "$root/bench/peers/tokenizer_peers.mjs" "$py"
for encoding in cl100k_base o200k_base; do
  one=$(median_ms 5 "$root/build/bin/strata" tokens count --threads 1 --encoding "$encoding" "$py")
  all=$(median_ms 5 "$root/build/bin/strata" tokens count --encoding "$encoding" "$py")
  echo "$encoding $mib MiB: strata whole process $one ms (1 thread, $(awk -v m="$mib" -v t="$one" 'BEGIN {printf "%.1f", m / t * 1000}') MiB/s), $all ms (every core, $(awk -v m="$mib" -v t="$all" 'BEGIN {printf "%.1f", m / t * 1000}') MiB/s)"
done
