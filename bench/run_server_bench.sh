#!/usr/bin/env bash
# Throughput and latency of `strata serve` under load, with wrk (Debian) on loopback, beside a minimal
# cpp-httplib server doing nothing (bench/http_baseline.cc: the transport's limit) in the same run.
#   bench/run_server_bench.sh [NODES...]     (default: 10000 100000)
# STRATA_BENCH_DATA=DIR keeps the seeded stores (DIR/dataN) between runs: seeding 100k nodes takes minutes.
# For each store size: find (32 connections), and once: health, append to a session, a session's assembled
# context, and chat completions through the proxy (streamed, no session) against the baseline as the
# upstream, beside the upstream direct.
set -euo pipefail
source "$(dirname "$0")/../scripts/lib.sh"
strata_install "${STRATA_PACKAGES[@]}" wrk
strata_build dev strata strata_http_baseline strata_memory_bench >&2
bin=$STRATA_ROOT/build/bin
sizes=("$@")
[ ${#sizes[@]} -gt 0 ] || sizes=(10000 100000)
work=$(mktemp -d)
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; rm -rf "$work"; }
trap cleanup EXIT
duration=${STRATA_BENCH_SECONDS:-10}
threads=2
conns=32

lua() {  # lua NAME METHOD BODY
  cat >"$work/$1.lua" <<LUA
wrk.method = "$2"
wrk.body = [[$3]]
wrk.headers["Content-Type"] = "application/json"
LUA
}
lua find POST '{"query": "kakakaium lolomiium mimiruium", "limit": 10}'
lua append POST '{"role": "user", "content": "Please remember that the deploy runs at 18:00 on Fridays."}'
lua chat POST '{"model": "m", "stream": true, "messages": [{"role": "user", "content": "Say hello."}]}'
lua get GET ''

# run NAME URL SCRIPT [CONNECTIONS]: one wrk run; prints "NAME | req/s | p50 | p99".
run() {
  local out
  local c=${4:-$conns}
  out=$(wrk -t"$((c < threads ? c : threads))" -c"$c" -d"${duration}s" --latency -s "$work/$3.lua" "$2")
  local rps p50 p99 errors
  rps=$(echo "$out" | awk '/Requests\/sec/ {print $2}')
  p50=$(echo "$out" | awk '$1 == "50%" {print $2}')
  p99=$(echo "$out" | awk '$1 == "99%" {print $2}')
  errors=$(echo "$out" | awk '/Non-2xx/ {print $4}')
  printf '| %-44s | %10s | %8s | %8s |%s\n' "$1" "$rps" "$p50" "$p99" "${errors:+ non-2xx: $errors}"
}

wait_port() { for _ in $(seq 1 100); do curl -s "http://127.0.0.1:$1/health" >/dev/null && return 0; sleep 0.1; done; return 1; }

"$bin/strata_http_baseline" 18490 & pids+=($!)
wait_port 18490
echo "| scenario (wrk -t$threads, ${duration}s) | requests/s | p50 | p99 |"
echo "|---|---|---|---|"
for n in "${sizes[@]}"; do
  data=${STRATA_BENCH_DATA:-$work}/data$n
  if [ ! -f "$data/strata.db" ]; then
    echo "seeding $n nodes ..." >&2
    # The store benchmark builds the store (and then measures it; its report is not needed here).
    timeout 3600 "$bin/strata_memory_bench" "$n" "$data" >/dev/null || [ -f "$data/strata.db" ]
  fi
  port=$((18500 + ${#pids[@]}))
  "$bin/strata" serve --data "$data" --listen "127.0.0.1:$port" --provider openai --model m \
    --base-url http://127.0.0.1:18490/v1 2>"$work/serve$n.log" & pids+=($!)
  wait_port "$port"
  curl -s "http://127.0.0.1:$port/api/v1/search/find" -d '{"query": "warm up"}' >/dev/null
  run "find, $n nodes, $conns connections" "http://127.0.0.1:$port/api/v1/search/find" find
  run "find, $n nodes, 1 connection" "http://127.0.0.1:$port/api/v1/search/find" find 1
  last_port=$port
done
port=$last_port
run "health (strata serve)" "http://127.0.0.1:$port/health" get
run "baseline: cpp-httplib doing nothing" "http://127.0.0.1:18490/health" get
curl -s "http://127.0.0.1:$port/api/v1/sessions" -d '{"id": "bench", "user": "bench"}' >/dev/null
run "append one message to a session" "http://127.0.0.1:$port/api/v1/sessions/bench/messages" append
# A 200-message conversation (100 turns of ~60 tokens a side), assembled for an 8k window: the cut, the
# per-message counts and the sections, with and without recalling memories.
ctx="ctx$RANDOM"
curl -s "http://127.0.0.1:$port/api/v1/sessions" -d "{\"id\": \"$ctx\", \"user\": \"bench\"}" >/dev/null
turns=""
for i in $(seq 1 100); do
  turns+="${turns:+,}{\"role\": \"user\", \"content\": \"Turn $i: please look at the deploy logs for service $i and tell me why the canary failed after the schema migration ran.\"},"
  turns+="{\"role\": \"assistant\", \"content\": \"The canary for service $i failed because the migration added a NOT NULL column without a default; the old pods kept writing rows without it.\"}"
done
curl -s "http://127.0.0.1:$port/api/v1/sessions/$ctx/messages" -d "{\"messages\": [$turns]}" >/dev/null
run "assembled context, 200 messages, 8k window" \
  "http://127.0.0.1:$port/api/v1/sessions/$ctx/context?max_context_tokens=8000&memory_limit=0" get
run "  ... with memories recalled" "http://127.0.0.1:$port/api/v1/sessions/$ctx/context?max_context_tokens=8000" get
run "chat, streamed, through the proxy" "http://127.0.0.1:$port/v1/chat/completions" chat
run "chat, streamed, upstream direct" "http://127.0.0.1:18490/v1/chat/completions" chat
run "chat, proxy, 1 connection" "http://127.0.0.1:$port/v1/chat/completions" chat 1
run "chat, upstream direct, 1 connection" "http://127.0.0.1:18490/v1/chat/completions" chat 1
