#!/usr/bin/env bash
# The store at scale (issue 31): bench/run_scale_bench.sh [NODES...] (default: 100000 1000000).
# For each size: a SQLite store filled with the synthetic store corpus, then the vector index rebuilt from
# the table on one thread and on every core, with its recall@10 against an exact scan, in-process find
# latency, peak RSS and disk size (bench/scale_bench.cc). Not part of scripts/test: 1M runs for up to an hour.
# STRATA_BENCH_DATA=DIR keeps the stores (DIR/scaleN) between runs; the rebuild-only runs reuse them.
set -euo pipefail
source "$(dirname "$0")/../scripts/lib.sh"
strata_install "${STRATA_PACKAGES[@]}"
strata_build dev strata_scale_bench >&2
bin=$STRATA_ROOT/build/bin
sizes=("$@")
[ ${#sizes[@]} -gt 0 ] || sizes=(100000 1000000)
data=${STRATA_BENCH_DATA:-/tmp/strata-bench}
mkdir -p "$data"
echo "# $(date -u +%Y-%m-%d) $(nproc) cores"
for n in "${sizes[@]}"; do
  "$bin/strata_scale_bench" "$n" "$data/scale$n"                        # ingest, rebuild on every core
  "$bin/strata_scale_bench" "$n" "$data/scale$n" --reuse --threads 1    # the rebuild on one thread, same store
done
