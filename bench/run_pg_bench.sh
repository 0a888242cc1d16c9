#!/usr/bin/env bash
# PostgreSQL beside SQLite in one run (docs/PERFORMANCE.md, "PostgreSQL"): for each size, the context store's
# ingest rate, find p50/p99 and throughput and the vector index (re)build on the embedded store and on a
# local PostgreSQL 15 (fsync on, synchronous_commit off: like SQLite's WAL with synchronous=NORMAL, a
# committed write survives a process crash); then find from one and from two store instances (processes)
# on the same database. Then the cost of committing a 200-message session (phase 1, and phase 2 with a
# scripted model) into a store of each size, on both backends. A new PostgreSQL instance's first find
# (first_find_ms) is measured with its index loaded from the newest snapshot and built from the table.
# Usage: bench/run_pg_bench.sh [--commits-only] [N ...]   (default: 10000 100000)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
source "$root/scripts/lib.sh"
strata_install "${STRATA_PACKAGES[@]}" postgresql-15
strata_build dev strata_memory_bench strata_session_bench >&2
bin=$root/build/bin
export STRATA_BENCH_QUERY_CAP=${STRATA_BENCH_QUERY_CAP:-400}  # queries per throughput figure
commits_only=0
if [ "${1:-}" = "--commits-only" ]; then commits_only=1; shift; fi
sizes=("$@")
[ ${#sizes[@]} -eq 0 ] && sizes=(10000 100000)
work=$(mktemp -d /tmp/strata-pgb-XXXXXX)
chmod 755 "$work"
STRATA_PG_SERVER_OPTIONS="-c synchronous_commit=off -c shared_buffers=512MB" \
  bash "$root/tests/pg_cluster.sh" start "$work/pg" >/dev/null
trap 'bash "$root/tests/pg_cluster.sh" stop "$work/pg"; rm -rf "$work"' EXIT
psql=$(ls /usr/lib/postgresql/*/bin/psql | tail -1)
newdb() { "$psql" -h "$work/pg" -U strata -d postgres -qc "CREATE DATABASE $1"; echo "postgresql:///$1?host=$work/pg&user=strata"; }

for n in "${sizes[@]}"; do
  echo "== $n nodes"
  url=$(newdb "mem_$n")
  if [ $commits_only -eq 0 ]; then
    echo "sqlite:     $("$bin/strata_memory_bench" "$n" "$work/sqlite-$n")"
    echo "postgres:   $("$bin/strata_memory_bench" "$n" "$url")"
    # A new instance's first find (first_find_ms): its index from the newest snapshot, then from the table.
    echo "postgres, 1 instance:   $(STRATA_BENCH_QUERIES_ONLY=1 "$bin/strata_memory_bench" "$n" "$url")"
    echo "postgres, 1 instance, no snapshot: $(STRATA_BENCH_NO_SNAPSHOTS=1 STRATA_BENCH_QUERIES_ONLY=1 "$bin/strata_memory_bench" "$n" "$url")"
    STRATA_BENCH_QUERIES_ONLY=1 "$bin/strata_memory_bench" "$n" "$url" >"$work/i1" &
    STRATA_BENCH_QUERIES_ONLY=1 "$bin/strata_memory_bench" "$n" "$url" >"$work/i2" &
    wait
    echo "postgres, 2 instances:  $(cat "$work/i1") $(cat "$work/i2")"
  else
    STRATA_BENCH_INGEST_ONLY=1 "$bin/strata_memory_bench" "$n" "$work/sqlite-$n" >/dev/null
    STRATA_BENCH_INGEST_ONLY=1 "$bin/strata_memory_bench" "$n" "$url" >/dev/null
  fi
  echo "commit, sqlite:    $(STRATA_BENCH_REUSE=1 "$bin/strata_session_bench" 200 40 "$work/sqlite-$n")"
  echo "commit, postgres:  $("$bin/strata_session_bench" 200 40 "$url")"
  rm -rf "$work/sqlite-$n"
done
