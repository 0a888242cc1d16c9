#!/usr/bin/env bash
# Whole-process restore and print of a 100 MB context log (`strata context show FILE > /dev/null`) beside
# Python's json.loads loop over the same lines (kimi-cli's restore without pydantic), in the same run, on
# two logs: the log benchmark's (many small messages) and an agent-style one (real source files as tool
# output: long strings full of escapes). Each command runs REPEATS times (default 5); the median is printed.
# Usage: bench/run_restore_bench.sh [REPEATS]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
source "$root/scripts/lib.sh"
source "$root/bench/lib.sh"
strata_install "${STRATA_PACKAGES[@]}" python3
strata_build dev strata strata_log_bench >&2
dir=${STRATA_BENCH_DIR:-/tmp/strata-bench}
mkdir -p "$dir"
repeats=${1:-5}
"$root/build/bin/strata_log_bench" --cold >/dev/null  # Writes $dir/context-100mb.jsonl if missing.
[ -f "$dir/agent-100mb.jsonl" ] || python3 "$root/bench/peers/make_agent_log.py" "$dir/agent-100mb.jsonl"
for log in context-100mb agent-100mb; do
  file="$dir/$log.jsonl"
  mb=$(( $(stat -c %s "$file") / 1048576 ))
  cat "$file" > /dev/null  # In the page cache for everyone.
  strata_ms=$(median_ms "$repeats" "$root/build/bin/strata" context show "$file")
  python_ms=$(median_ms "$repeats" python3 "$root/bench/peers/restore_json_lines.py" "$file" 0)
  echo "$log ($mb MiB): strata context show ${strata_ms} ms; python json.loads loop (whole process) ${python_ms} ms;" \
       "ratio $(awk -v a="$python_ms" -v b="$strata_ms" 'BEGIN {printf "%.1f", a / b}')x"
  python3 "$root/bench/peers/restore_json_lines.py" "$file" 3 | sed 's/^/  in-process: /'
done
