#!/usr/bin/env bash
# PostgreSQL beside SQLite in one run (docs/PERFORMANCE.md, "PostgreSQL"): for each size, the context store's
# ingest rate, find p50/p99 and throughput and the vector index (re)build on the embedded store and on a
# local PostgreSQL 15 (fsync on, synchronous_commit off: like SQLite's WAL with synchronous=NORMAL, a
# committed write survives a process crash); then find from one and from two store instances (processes)
# on the same database; then a 200-message session commit (phase 1 and 2, scripted model) on both.
# Usage: bench/run_pg_bench.sh [N ...]   (default: 10000 100000)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
source "$root/scripts/lib.sh"
strata_install "${STRATA_PACKAGES[@]}" postgresql-15
strata_build dev strata_memory_bench strata_session_bench >&2
bin=$root/build/bin
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
  echo "sqlite:     $("$bin/strata_memory_bench" "$n" "$work/sqlite-$n")"
  url=$(newdb "mem_$n")
  echo "postgres:   $("$bin/strata_memory_bench" "$n" "$url")"
  echo "postgres, 1 instance:   $(STRATA_BENCH_QUERIES_ONLY=1 "$bin/strata_memory_bench" "$n" "$url")"
  STRATA_BENCH_QUERIES_ONLY=1 "$bin/strata_memory_bench" "$n" "$url" >"$work/i1" &
  STRATA_BENCH_QUERIES_ONLY=1 "$bin/strata_memory_bench" "$n" "$url" >"$work/i2" &
  wait
  echo "postgres, 2 instances:  $(cat "$work/i1") $(cat "$work/i2")"
  rm -rf "$work/sqlite-$n"
done
echo "== session commit (200 messages, 40 facts)"
echo "sqlite:     $("$bin/strata_session_bench" 200 40 "$work/session")"
echo "postgres:   $("$bin/strata_session_bench" 200 40 "$(newdb session)")"
