#!/usr/bin/env bash
# MCP tool-call latency (bench/mcp_latency.mjs) over stdio and Streamable HTTP, beside the official SDK's
# own server. Seeds a store of 1,000 memories for user "bench" first.
#   bench/run_mcp_bench.sh            (STRATA_BENCH_CALLS=N calls per row, default 1000)
set -euo pipefail
source "$(dirname "$0")/../scripts/lib.sh"
strata_install "${STRATA_PACKAGES[@]}"
strata_npm_setup
strata_build dev strata >&2
bin=$STRATA_ROOT/build/bin
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
data=$work/data
# 1,000 memories through MCP itself (one stdio session, one write per line).
for i in $(seq 1 1000); do
  printf '{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"write","arguments":{"uri":"strata://user/bench/memories/facts/f%d","content":"Fact %d: the user drinks %s tea and works on project %d."}}}\n' \
    "$i" "$i" "$i" "$([ $((i % 7)) -eq 0 ] && echo green || echo black)" "$((i % 50))"
done | "$bin/strata" mcp --data "$data" --user bench >/dev/null 2>&1
node "$STRATA_ROOT/bench/mcp_latency.mjs" "$bin/strata" "$data"
