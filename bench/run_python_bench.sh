#!/usr/bin/env bash
# The Python module's overhead over the C++ call (find, write, ContextLog.append) and ContextLog restore
# of the log benchmark's ~100 MB kimi-cli log beside kimi-cli's json.loads loop (bench/python_bench.py).
# Usage: bench/run_python_bench.sh [REPEATS]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
source "$root/scripts/lib.sh"
strata_install "${STRATA_PACKAGES[@]}" python3
strata_build dev strata_python strata_log_bench >&2
dir=${STRATA_BENCH_DIR:-/tmp/strata-bench}
mkdir -p "$dir"
"$root/build/bin/strata_log_bench" --cold >/dev/null  # Writes $dir/context-100mb.jsonl if missing.
cat "$dir/context-100mb.jsonl" > /dev/null  # In the page cache for both.
PYTHONPATH="$root/build/python" /usr/bin/python3 "$root/bench/python_bench.py" "$dir/context-100mb.jsonl" "${1:-5}"
