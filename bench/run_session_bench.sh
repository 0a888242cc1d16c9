#!/usr/bin/env bash
# Session figures (docs/PERFORMANCE.md, "Sessions"): commit latency around the model calls for a
# 200-message session with the scripted provider, and the duplicate rate after re-committing the same facts
# phrased differently (session_bench.cc). Usage: bench/run_session_bench.sh [MESSAGES [FACTS]]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
source "$root/scripts/lib.sh"
strata_install "${STRATA_PACKAGES[@]}"
strata_build dev strata_session_bench >&2
"$root/build/bin/strata_session_bench" "${1:-200}" "${2:-40}" "${TMPDIR:-/tmp}/strata-session-bench"
