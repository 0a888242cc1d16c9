#!/usr/bin/env bash
# `strata migrate`: the sample deployment (scripts/sample-data) copied from a data directory into PostgreSQL
# is verified by the command itself, and reads the same through the CLI afterwards (logs, archive states,
# memories and their recall); a second copy into the now non-empty database is refused, and the CLI then
# works on the PostgreSQL deployment as on the directory.
#   tests/cli/migrate_test.sh STRATA        (STRATA_TEST_PG_DIR: the suite's running cluster)
set -euo pipefail
strata=${1:?usage: migrate_test.sh STRATA}
root=$(cd "$(dirname "$0")/../.." && pwd)
pg=${STRATA_TEST_PG_DIR:?the PostgreSQL test cluster (ctest fixture pg)}
psql=$(ls /usr/lib/postgresql/*/bin/psql 2>/dev/null | tail -1)
work=$(mktemp -d)
db=migrate_$$
trap '"$psql" -h "$pg" -U strata -d postgres -qc "DROP DATABASE IF EXISTS $db WITH (FORCE)" >/dev/null 2>&1 || true; rm -rf "$work"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

bash "$root/scripts/sample-data" "$work/data" "$strata" >/dev/null
"$psql" -h "$pg" -U strata -d postgres -qc "CREATE DATABASE $db"
url="postgresql:///$db?host=$pg&user=strata"

out=$("$strata" migrate --from "$work/data" --to "$url" 2>/dev/null) || fail "migrate failed: $out"
grep -q "verified: the copy matches the source" <<<"$out" || fail "no verification: $out"
grep -q "copied 20 nodes, 4 relations, 3 sessions (16 messages, 3 archives), 4 audit entries" <<<"$out" ||
  fail "unexpected counts: $out"

same() {  # same ARGS...: the command's output on the directory and on PostgreSQL
  local a b
  a=$("$strata" "$1" --data "$work/data" "${@:2}") || fail "$* on the directory"
  b=$("$strata" "$1" --data "$url" "${@:2}") || fail "$* on PostgreSQL"
  [ "$a" = "$b" ] || fail "$* differs: directory: $a / PostgreSQL: $b"
}
same session log kyoto-trip
same session list
same memory ls strata://user/alice/memories/preferences
same memory read strata://user/alice/memories/preferences/seat
same memory history strata://user/alice/memories/preferences/seat
# Recall finds the same memory first on both (the scores differ: bm25 in SQLite, ts_rank in PostgreSQL).
top() { "$strata" memory --data "$1" find "which seat does alice take" --limit 1 | awk '{print $2}'; }
[ "$(top "$work/data")" = "$(top "$url")" ] || fail "find disagrees: $(top "$work/data") vs $(top "$url")"
# The failed archive keeps its state and error.
"$strata" session --data "$url" status visa-questions | grep -q '"state":"failed"' || fail "the failed archive's state was lost"

# A second copy into the non-empty database is refused and changes nothing.
if err=$("$strata" migrate --from "$work/data" --to "$url" 2>&1); then fail "a second copy was accepted"; fi
grep -q "already holds data" <<<"$err" || fail "unclear refusal: $err"
same session log kyoto-trip

# The PostgreSQL deployment takes writes like the directory.
echo "Alice prefers green tea." | "$strata" memory --data "$url" write strata://user/alice/notes/tea >/dev/null
[ "$("$strata" memory --data "$url" read strata://user/alice/notes/tea)" = "Alice prefers green tea." ] || fail "write after migrate"
echo "ok - migrate copies and verifies the sample deployment; CLI reads agree; a second copy is refused"
