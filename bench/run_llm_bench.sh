#!/usr/bin/env bash
# Streaming-path throughput: Strata's SSE parser, decoders + merger, and the whole client (HttpProvider +
# Generate over an in-memory transport), against Node peers on the same OpenAI stream in one run
# (docs/PERFORMANCE.md, "LLM streaming").
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
source "$root/scripts/lib.sh"
strata_install "${STRATA_PACKAGES[@]}"
strata_npm_setup
strata_build dev strata_llm_bench >&2
dir=${STRATA_BENCH_DIR:-/tmp/strata-bench}
mkdir -p "$dir"
"$root/build/bin/strata_llm_bench" --write-streams "$dir"
echo "--- Strata (C++), single thread"
"$root/build/bin/strata_llm_bench" --benchmark_repetitions=3 --benchmark_report_aggregates_only=true 2>&1 \
  | grep -E '_median' || true
echo "--- peers"
node "$root/bench/peers/sse_peers.mjs" "$dir/openai-stream.sse"
