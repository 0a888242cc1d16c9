#!/usr/bin/env bash
# The store at scale (issue 31): bench/run_scale_bench.sh [--sqlite-only|--pg-only] [NODES...]
# (default: 100000 1000000). For each size, on SQLite and on a local PostgreSQL 15 started here (fsync on,
# synchronous_commit off), a store filled with the synthetic store corpus in batches of 1000, then the vector
# index built from the table with every core, its recall@10 against an exact scan (SQLite), a new
# PostgreSQL instance's first search from the newest index snapshot, in-process find latency and CPU, peak
# RSS and disk size (bench/scale_bench.cc). Up to 100k, the SQLite rebuild is repeated on one thread (the
# previous figure beside it) and a PostgreSQL instance also builds its index from the table. Not part of scripts/test: 1M takes about an hour for both backends.
# STRATA_BENCH_DATA=DIR keeps the SQLite stores (DIR/scaleN) for --find-only and --reuse runs.
set -euo pipefail
source "$(dirname "$0")/../scripts/lib.sh"
backends=(sqlite postgresql)
case "${1:-}" in
  --sqlite-only) backends=(sqlite); shift ;;
  --pg-only) backends=(postgresql); shift ;;
esac
strata_install "${STRATA_PACKAGES[@]}" postgresql-15
strata_build dev strata_scale_bench >&2
bin=$STRATA_ROOT/build/bin
sizes=("$@")
[ ${#sizes[@]} -gt 0 ] || sizes=(100000 1000000)
data=${STRATA_BENCH_DATA:-/tmp/strata-bench}
mkdir -p "$data"
echo "# $(date -u +%Y-%m-%d) $(nproc) cores, $(git -C "$STRATA_ROOT" rev-parse --short HEAD)"
for n in "${sizes[@]}"; do
  if [[ " ${backends[*]} " == *" sqlite "* ]]; then
    "$bin/strata_scale_bench" "$n" "$data/scale$n"                      # ingest, rebuild on every core
    if [ "$n" -le 100000 ]; then
      "$bin/strata_scale_bench" "$n" "$data/scale$n" --reuse --threads 1  # the rebuild on one thread, same store
    fi
  fi
done
if [[ " ${backends[*]} " == *" postgresql "* ]]; then
  work=$(mktemp -d /tmp/strata-scale-pg-XXXXXX)
  chmod 755 "$work"
  STRATA_PG_SERVER_OPTIONS="-c synchronous_commit=off -c shared_buffers=1GB -c max_wal_size=4GB" \
    bash "$STRATA_ROOT/tests/pg_cluster.sh" start "$work/pg" >/dev/null
  trap 'bash "$STRATA_ROOT/tests/pg_cluster.sh" stop "$work/pg"; rm -rf "$work"' EXIT
  psql=$(ls /usr/lib/postgresql/*/bin/psql | tail -1)
  for n in "${sizes[@]}"; do
    "$psql" -h "$work/pg" -U strata -d postgres -qc "CREATE DATABASE scale_$n"
    cold=()
    [ "$n" -le 100000 ] || cold=(--no-cold)  # Above 100k only the warm start (the index from the table: minutes).
    line=$("$bin/strata_scale_bench" "$n" "postgresql:///scale_$n?host=$work/pg&user=strata" "${cold[@]}")
    bytes=$("$psql" -h "$work/pg" -U strata -d postgres -Atc "SELECT pg_database_size('scale_$n')")
    echo "${line%\}}, \"database_mb\": $((bytes / 1048576))}"
    "$psql" -h "$work/pg" -U strata -d postgres -qc "DROP DATABASE scale_$n"
  done
fi
