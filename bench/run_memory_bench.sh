#!/usr/bin/env bash
# Context-store figures (docs/PERFORMANCE.md, "Context store"): ingestion rate with the local embedder,
# find p50/p99, vector index rebuild time and recall@5/@10 on the labelled synthetic set (memory_bench.cc).
# Usage: bench/run_memory_bench.sh [N ...]   (default: 10000 100000)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
source "$root/scripts/lib.sh"
strata_install "${STRATA_PACKAGES[@]}"
strata_build dev strata_memory_bench >&2
sizes=("$@")
[ ${#sizes[@]} -eq 0 ] && sizes=(10000 100000)
for n in "${sizes[@]}"; do
  "$root/build/bin/strata_memory_bench" "$n" "${TMPDIR:-/tmp}/strata-memory-bench-$n"
done
