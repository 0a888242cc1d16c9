#!/usr/bin/env bash
# Context-window figures (docs/PERFORMANCE.md, "Context window"): assembly over 1k/10k/100k-message
# histories with cached counts, the naive recount peer, appending one message, and the compaction-fidelity
# check.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
source "$root/scripts/lib.sh"
strata_install "${STRATA_PACKAGES[@]}"
strata_npm_setup
strata_build dev strata_window_bench >&2
echo "--- compaction fidelity"
"$root/build/bin/strata_window_bench" --fidelity
echo "--- assembly (single thread, median of 3)"
"$root/build/bin/strata_window_bench" --benchmark_repetitions=3 --benchmark_report_aggregates_only=true 2>&1 \
  | grep -E '_median' || true
