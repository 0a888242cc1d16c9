#!/usr/bin/env bash
# A throwaway PostgreSQL cluster for the tests: initdb in DIR, listening on a Unix socket in DIR only (no TCP
# port), trust authentication for the user "strata", no fsync (a test cluster; a clean pg_ctl stop or restart
# still keeps every committed row).
#   tests/pg_cluster.sh start DIR     prints the server URL (postgresql://strata@/postgres?host=DIR) and
#                                     writes it to DIR/url
#   tests/pg_cluster.sh restart DIR   pg_ctl restart (the tests of reconnection)
#   tests/pg_cluster.sh stop DIR      stops it and removes DIR
# STRATA_PG_SERVER_OPTIONS replaces "-c fsync=off -c full_page_writes=off" (the benchmarks keep fsync on).
# Needs Debian's postgresql-15 (scripts/test installs it). As root, the server runs as the postgres user.
set -euo pipefail
cmd=${1:?usage: pg_cluster.sh start|restart|stop DIR}
dir=${2:?usage: pg_cluster.sh start|restart|stop DIR}

bin=${STRATA_PG_BIN:-}
if [ -z "$bin" ]; then
  for candidate in /usr/lib/postgresql/*/bin; do
    [ -x "$candidate/initdb" ] && bin=$candidate
  done
fi
if [ -z "$bin" ] || [ ! -x "$bin/initdb" ]; then
  echo "pg_cluster.sh: no PostgreSQL server found (install postgresql-15, or set STRATA_PG_BIN)" >&2
  exit 1
fi

as_owner() {
  if [ "$(id -u)" -eq 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi
}

case "$cmd" in
  start)
    # A cluster left by a run that was killed: stop it and start afresh.
    if [ -d "$dir/data" ]; then
      as_owner "$bin/pg_ctl" -D "$dir/data" -w -t 60 -m immediate stop >/dev/null 2>&1 || true
    fi
    rm -rf "$dir"
    mkdir -p "$dir"
    [ "$(id -u)" -eq 0 ] && chown postgres "$dir"
    as_owner "$bin/initdb" -D "$dir/data" -U strata -A trust -E UTF8 --locale=C --no-sync >"$dir/initdb.log" 2>&1 ||
      { cat "$dir/initdb.log" >&2; exit 1; }
    as_owner "$bin/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w -t 60 \
      -o "-c listen_addresses='' -k $dir ${STRATA_PG_SERVER_OPTIONS:--c fsync=off -c full_page_writes=off} -c max_connections=200" start >/dev/null ||
      { cat "$dir/server.log" >&2; exit 1; }
    url="postgresql://strata@/postgres?host=$dir"
    echo "$url" >"$dir/url"
    echo "$url"
    ;;
  restart)
    as_owner "$bin/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w -t 60 -m fast restart >/dev/null
    ;;
  stop)
    if [ -d "$dir/data" ]; then
      as_owner "$bin/pg_ctl" -D "$dir/data" -w -t 60 -m fast stop >/dev/null 2>&1 || true
    fi
    rm -rf "$dir"
    ;;
  *)
    echo "pg_cluster.sh: unknown command $cmd" >&2
    exit 2
    ;;
esac
