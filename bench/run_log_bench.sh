#!/usr/bin/env bash
# Runs every context-log benchmark and its peers in one go (docs/PERFORMANCE.md records the output).
# Usage: bench/run_log_bench.sh   (builds the dev preset first; data under $STRATA_BENCH_DIR or /tmp/strata-bench)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
source "$root/scripts/lib.sh"
strata_install "${STRATA_PACKAGES[@]}" python3
strata_build dev strata_log_bench >&2
bench="$root/build/bin/strata_log_bench"
data=${STRATA_BENCH_DIR:-/tmp/strata-bench}/context-100mb.jsonl

"$bench" --benchmark_repetitions=3 --benchmark_report_aggregates_only=true --benchmark_filter='Restore'
"$bench" --benchmark_filter='Append|Fdatasync|Revert'
echo "--- cold restores, each in a fresh process"
"$bench" --cold
"$bench" --cold-peer
GLIBC_TUNABLES=glibc.malloc.hugetlb=1 "$bench" --cold | sed 's/^/[malloc on transparent huge pages] /'
python3 "$root/bench/peers/restore_json_lines.py" "$data" 3
