#!/usr/bin/env bash
# End-to-end checks of `strata context`: each command restores FILE, prints JSON, and on failure exits
# non-zero with one line on stderr and leaves every file as it was.
set -u
STRATA=${1:?usage: context_cli_test.sh path/to/strata}
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
f="$dir/context.jsonl"
pass=0
fail=0
check() {  # check NAME EXPECTED ACTUAL
  if [ "$2" == "$3" ]; then pass=$((pass + 1)); else fail=$((fail + 1)); echo "FAIL $1: expected [$2] got [$3]"; fi
}
snapshot() { (cd "$dir" && for x in *; do printf '%s:' "$x"; cksum < "$x"; done) }

check "system-prompt" '{"system_prompt_set":true}' "$("$STRATA" context system-prompt "$f" 'You are 助手')"
check "checkpoint" '{"checkpoint":0}' "$("$STRATA" context checkpoint "$f")"
check "append stdin" '{"appended":1,"history_length":1}' "$(echo '{"role":"user","content":"hi"}' | "$STRATA" context append "$f")"
check "append batch" '{"appended":2,"history_length":3}' "$("$STRATA" context append "$f" '[{"role":"assistant","content":"a"},{"role":"user","content":"b"}]')"
check "usage" '{"token_count":50}' "$("$STRATA" context usage "$f" 50)"
check "checkpoint with message" '{"checkpoint":1}' "$("$STRATA" context checkpoint "$f" --user-message)"
check "show (kimi-cli estimate)" '{"history":[{"role":"user","content":"hi"},{"role":"assistant","content":"a"},{"role":"user","content":"b"},{"role":"user","content":"<system>CHECKPOINT 1</system>"}],"token_count":50,"token_count_with_pending":57,"n_checkpoints":2,"system_prompt":"You are 助手"}' "$("$STRATA" context --tokenizer chars show "$f")"
# With the default o200k_base counter: 3 tokens of overhead + role + text per pending message (one here).
pending=$("$STRATA" context show "$f" | sed -E 's/.*"token_count_with_pending":([0-9]+).*/\1/')
expected=$((50 + 3 + $(printf 'user' | "$STRATA" tokens count) + $(printf '<system>CHECKPOINT 1</system>' | "$STRATA" tokens count)))
check "show (o200k pending)" "$expected" "$pending"

# Failures: one line on stderr, a distinct exit code, nothing touched.
before=$(snapshot)
err=$("$STRATA" context revert "$f" 9 2>&1 >/dev/null); rc=$?
check "unknown checkpoint exit" 3 "$rc"
check "unknown checkpoint message" 1 "$(echo "$err" | grep -c 'checkpoint 9 does not exist')"
err=$("$STRATA" context append "$f" '{"role":"user","content":' 2>&1 >/dev/null); rc=$?
check "invalid json exit" 2 "$rc"
check "invalid json names position" 1 "$(echo "$err" | grep -c 'invalid JSON at byte 25: syntax error')"
check "invalid json one line" 1 "$(echo "$err" | wc -l)"
err=$("$STRATA" context append "$f" '{"role":"user","content":[{"type":"hologram"}]}' 2>&1 >/dev/null); rc=$?
check "unknown part exit" 2 "$rc"
check "unknown part names path" 1 "$(echo "$err" | grep -c 'content\[0\].type')"
check "files untouched by failures" "$before" "$(snapshot)"

check "revert" '{"reverted_to":1,"history_length":3,"n_checkpoints":1}' "$("$STRATA" context revert "$f" 1)"
check "rotation kept" 1 "$(ls "$dir" | grep -c '^context_1.jsonl$')"
check "check clean" 0 "$("$STRATA" context check "$f" >/dev/null; echo $?)"

printf '{"role":"user","content":"torn' >> "$f"
"$STRATA" context check "$f" > "$dir/../report.json"; rc=$?
check "check damaged exit" 1 "$rc"
check "check reports torn tail" 1 "$(grep -c '"kind":"torn_tail"' "$dir/../report.json")"
rm -f "$dir/../report.json"
check "repair" 1 "$("$STRATA" context repair "$f" | grep -c '"repaired":true')"
check "check after repair" 0 "$("$STRATA" context check "$f" >/dev/null; echo $?)"
check "clear" '{"cleared":true}' "$("$STRATA" context clear "$f")"
check "empty after clear" 0 "$(wc -c < "$f")"
check "usage rejects negative" 2 "$("$STRATA" context usage "$f" -5 >/dev/null 2>&1; echo $?)"
# A count past 64 bits is refused, not read as the largest one; past 2^53 - 1 the log refuses it (its readers
# would call it damage). Either way the file is untouched.
check "usage rejects past 64 bits" 2 "$("$STRATA" context usage "$f" 99999999999999999999 >/dev/null 2>&1; echo $?)"
check "usage names the limit" 1 "$("$STRATA" context usage "$f" 99999999999999999999 2>&1 | grep -c 'at most 9223372036854775807')"
check "usage rejects past 2^53" 2 "$("$STRATA" context usage "$f" 9007199254740992 >/dev/null 2>&1; echo $?)"
check "nothing written" 0 "$(wc -c < "$f")"

# A file name is any bytes: the JSON reports name it with U+FFFD, and stay JSON.
odd="$dir/$(printf 'log\377.jsonl')"
echo '{"role":"user","content":"hi"}' > "$odd"
check "check names an odd file in JSON" 0 "$("$STRATA" context check "$odd" | python3 -c 'import json, sys; json.loads(sys.stdin.buffer.read().decode("utf-8"))'; echo $?)"
check "repair names an odd file in JSON" 0 "$("$STRATA" context repair "$odd" | python3 -c 'import json, sys; json.loads(sys.stdin.buffer.read().decode("utf-8"))'; echo $?)"

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
