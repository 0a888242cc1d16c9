#!/usr/bin/env bash
# Two processes on one SQLite data directory (a `strata serve` and the CLI beside it):
#   bench/run_two_process_bench.sh [NODES] [STRATA_BINARY]      (default: 20000, build/bin/strata)
# A synthetic corpus of NODES Markdown notes (random words) is imported, a server is started on the
# directory, and then: the server's find right after each of three one-node writes through the CLI, and a
# CLI `ls` and `find` right after one write through the server. Each line is the wall time of one command
# (curl or the CLI), in seconds. Before the vector log, each of these waited for the whole vector index to
# be built again (docs/formats/context-store.md, "The vector index"). Give an older binary as the second
# argument to compare in the same run. Not part of scripts/test.
set -euo pipefail
nodes=${1:-20000}
root=$(cd "$(dirname "$0")/.." && pwd)
bin=${2:-$root/build/bin/strata}
work=$(mktemp -d /tmp/strata-two-process.XXXXXX)
trap 'kill "${server:-0}" 2>/dev/null || true; rm -rf "$work"' EXIT
python3 - "$work/corpus" "$nodes" <<'PY'
import os, random, sys
random.seed(7)
out, n = sys.argv[1], int(sys.argv[2])
parts = ["ka", "lo", "mi", "ra", "tu", "pe", "zo", "ni", "sha", "vor", "lin", "dek", "bar", "qui", "fen", "gor"]
vocab = sorted({"".join(random.choice(parts) for _ in range(random.randint(2, 4))) for _ in range(6000)})
for i in range(n):
    d = os.path.join(out, f"d{i // 200:03d}")
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, f"n{i:05d}.md"), "w") as f:
        f.write(f"Note {i} " + " ".join(random.choice(vocab) for _ in range(random.randint(15, 40))) + "\n")
PY
data=$work/data
"$bin" memory --data "$data" import "$work/corpus" --uri strata://resources/big > /dev/null
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
"$bin" serve --data "$data" --listen "127.0.0.1:$port" > "$work/serve.log" 2>&1 &
server=$!
for _ in $(seq 100); do curl -sf "127.0.0.1:$port/health" > /dev/null && break; sleep 0.1; done
seconds() {
  local start end
  start=$(date +%s%N)
  "$@" > /dev/null 2>&1
  end=$(date +%s%N)
  awk -v ns=$((end - start)) 'BEGIN {printf "%.3f", ns / 1e9}'
}
find_on_server() { curl -sf -XPOST "127.0.0.1:$port/api/v1/search/find" -d "{\"query\": \"$1\"}"; }
echo "# $(date -u +%Y-%m-%d) $(nproc) cores, $nodes nodes, $("$bin" --version 2>/dev/null | head -1)"
echo "server find, warm: $(seconds find_on_server warmup) s"
for k in 1 2 3; do
  echo "zeppelin harbour $k" | "$bin" memory --data "$data" write "strata://resources/s/cli$k" > /dev/null
  echo "server find after a CLI write ($k): $(seconds find_on_server zeppelin) s"
done
curl -sf -XPOST "127.0.0.1:$port/api/v1/fs/write" -d '{"uri": "strata://resources/s/x", "content": "zeppelin harbour"}' > /dev/null
echo "CLI ls after a server write: $(seconds "$bin" memory --data "$data" ls strata://resources/s) s"
echo "CLI find after that: $(seconds "$bin" memory --data "$data" find zeppelin) s"
