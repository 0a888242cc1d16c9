#!/usr/bin/env bash
# Evidence recall on LoCoMo's long conversations (docs/PERFORMANCE.md, "Retrieval on LoCoMo"): every turn one
# leaf, each answerable question asked with find (limit 10, under its conversation), recall@5/@10 overall and by
# category for Strata's Find (embedded default: SQLite, local embedder) and for plain BM25 over the same turns
# in the same run, and find latency. Source: bench/retrieval_bench.cc.
# Usage: bench/run_retrieval_bench.sh [--ablations] [LOCOMO_DIR] [--set name=value ...]
#   (default: ../shared/benchmarks/locomo-dev beside the checkout). --ablations also runs Find with each step
#   switched off in turn (docs/PERFORMANCE.md, "What each step is worth").
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
source "$root/scripts/lib.sh"
strata_install "${STRATA_PACKAGES[@]}"
strata_build dev strata_retrieval_bench >&2
data="$root/../shared/benchmarks/locomo-dev"
ablations=0
if [ "${1:-}" = "--ablations" ]; then ablations=1; shift; fi
if [ $# -gt 0 ] && [ "${1#--}" = "$1" ]; then data=$1; shift; fi
if [ ! -d "$data" ]; then
  echo "no LoCoMo conversations at $data (pass the directory)" >&2
  exit 2
fi
work=$(mktemp -d /tmp/strata-retrieval-XXXXXX)
trap 'rm -rf "$work"' EXIT
"$root/build/bin/strata_retrieval_bench" "$data" "$work/store" "$@"
if [ $ablations -eq 1 ]; then
  for off in neighbour_weight=0 directory_weight=0 vector_weight=0 beam=0 "neighbour_weight=0,directory_weight=0"; do
    echo "without ($off): $("$root/build/bin/strata_retrieval_bench" "$data" "$work/store" --set "$off" | head -1)"
  done
fi
