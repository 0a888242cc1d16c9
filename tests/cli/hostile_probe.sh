#!/usr/bin/env bash
# The hostile-input probe: drives the real `strata` program with the inputs that once broke it (issue 20)
# and checks, for each, what a user must be able to rely on:
#   - no death by a signal (abort, SIGSEGV) and no hang (each command has a time limit);
#   - an error is one line on stderr, of bounded length, naming the problem, never "unexpected error"
#     (an exception that escaped: a bug), with a non-zero exit code;
#   - nothing stored is lost or changed by the failed command.
# Usage: hostile_probe.sh PATH/TO/strata   (ctest runs it; prints "N passed, N failed").
set -u
S=$(realpath "$1")
W=$(mktemp -d)
trap 'chmod -R u+w "$W" 2>/dev/null; rm -rf "$W"' EXIT
cd "$W" || exit 1
pass=0
fail=0
OUT=$W/out
ERR=$W/err

ok() { pass=$((pass + 1)); }
bad() {
  fail=$((fail + 1))
  echo "FAIL [$name] $*"
  echo "  stderr: $(head -c 400 "$ERR")"
}

# run NAME CMD... : runs CMD with stdin from $IN (default /dev/null), 180 s at most.
run() {
  name=$1
  shift
  timeout 180 "$@" <"${IN:-/dev/null}" >"$OUT" 2>"$ERR"
  rc=$?
}

# The checks on the command just run.
no_crash() {
  if [ "$rc" -eq 124 ]; then bad "timed out"; return 1; fi
  if [ "$rc" -ge 128 ]; then bad "killed by signal $((rc - 128))"; return 1; fi
  if grep -q "unexpected error" "$ERR"; then bad "an exception escaped"; return 1; fi
  return 0
}
want_ok() {
  no_crash || return
  if [ "$rc" -ne 0 ]; then bad "exit $rc, wanted success"; return; fi
  ok
}
# want_error [PATTERN]: a non-zero exit, exactly one error line under 4 KiB, naming PATTERN if given.
want_error() {
  no_crash || return
  if [ "$rc" -eq 0 ]; then bad "exit 0, wanted an error"; return; fi
  local lines bytes
  lines=$(grep -c "^strata: error:" "$ERR")
  bytes=$(grep "^strata: error:" "$ERR" | wc -c)
  if [ "$lines" -ne 1 ]; then bad "$lines error lines, wanted 1"; return; fi
  if [ "$(wc -l <"$ERR")" -gt 3 ]; then bad "$(wc -l <"$ERR") lines on stderr"; return; fi
  if [ "$bytes" -gt 4096 ]; then bad "error line of $bytes bytes"; return; fi
  if [ $# -gt 0 ] && ! grep -qiE -- "$1" "$ERR"; then bad "error does not name '$1'"; return; fi
  ok
}
# expect NAME CONDITION-COMMAND...: an extra check on stored state.
expect() {
  name=$1
  shift
  if "$@"; then ok; else fail=$((fail + 1)); echo "FAIL [$name] check failed: $*"; fi
}

deep() { python3 -c "import sys; n=int(sys.argv[1]); sys.stdout.write(sys.argv[2] + '['*n + ']'*n + sys.argv[3])" "$@"; }
script() { printf '{"replies": [%s]}' "$1" >"$2"; }
D=$W/data

# ---- Wrongly typed model replies (dedup, extraction) ----
script '{"text": "{\"decision\": 1}"}, {"text": "{\"decision\": 1}"}' dedup1.json
run remember-decision-number "$S" memory --data "$D" remember strata://user/u1 "U1 likes tea." --category profile --script dedup1.json
no_crash && ok
"$S" memory --data "$D" remember strata://user/u1 "U1 likes green tea." --category profile --script <(script '{"text": "{}"}' /dev/stdout) >/dev/null 2>&1
script '{"text": "{\"decision\": \"merge\", \"memories\": [{\"action\": 1, \"uri\": 5}]}"}' dedup2.json
run remember-action-number "$S" memory --data "$D" remember strata://user/u1 "U1 likes green tea a lot." --category profile --script dedup2.json
no_crash && ok
"$S" session --data "$D" new --user u2 --id s1 >/dev/null 2>&1
"$S" session --data "$D" add s1 --text "I always take the aisle seat." >/dev/null 2>&1
script '{"text": "Summary."}, {"text": "{\"memories\": [{\"category\": 1, \"content\": 2}]}"}, {"text": "{\"memories\": 7}"}' extract.json
run commit-wrong-types "$S" session --data "$D" commit s1 --wait --script extract.json
no_crash && ok
run work-after-wrong-types "$S" session --data "$D" work --script extract.json
no_crash && ok

# ---- Strata's own files edited to wrong types ----
"$S" session --data "$D" new --user u3 --id s2 >/dev/null 2>&1
"$S" session --data "$D" new --user u3 --id s3 >/dev/null 2>&1
python3 - "$D/sessions/s2/session.json" <<'EOF'
import json, sys
p = sys.argv[1]; j = json.load(open(p)); j["user"] = 1; json.dump(j, open(p, "w"))
EOF
run session-json-user-number "$S" session --data "$D" show s2
want_error "session.json"
run other-sessions-unharmed "$S" session --data "$D" show s3
want_ok
python3 - "$D/sessions/s3/session.json" <<'EOF'
import json, sys
p = sys.argv[1]; j = json.load(open(p)); j["user"] = "a/../b"; json.dump(j, open(p, "w"))
EOF
run session-json-user-path "$S" session --data "$D" show s3
want_error "session.json"
run session-list-survives-damage "$S" session --data "$D" list
no_crash && ok
if [ -f "$D/sessions/s1/history/archive_001/state.json" ]; then
  python3 - "$D/sessions/s1/history/archive_001/state.json" <<'EOF'
import json, sys
p = sys.argv[1]; j = json.load(open(p)); j["messages"] = "x"; json.dump(j, open(p, "w"))
EOF
fi
run state-json-messages-string "$S" session --data "$D" status s1
no_crash && ok
run list-with-damaged-state "$S" session --data "$D" list
want_ok

# ---- Command-line inputs of the wrong type ----
IN=$W/window.json
echo '{"records": [{"role": "assistant", "content": "x", "tool_calls": [{"type": "function", "id": 5, "function": {"name": "f", "arguments": "{}"}}]}]}' >"$IN"
run window-numeric-tool-call-id "$S" window assemble --max-tokens 1000
want_error "id"
echo '{"system_prompt": "s", "tools": [{"name": "f", "description": 5, "parameters": {}}], "history": []}' >"$IN"
run provider-numeric-tool-description "$S" provider request --provider openai --model m
want_error "description"
echo '{"system_prompt": "s", "tools": [{"name": "f", "parameters": "x"}], "history": []}' >"$IN"
run provider-string-tool-parameters "$S" provider request --provider openai --model m
want_error "parameters"
unset IN
script '{"text": 5}' chat-bad.json
IN=$W/chat-in
echo "hello" >"$IN"
run chat-script-wrong-type "$S" chat --provider scripted --script chat-bad.json --session "$W/chat.jsonl"
want_error "text"
echo '{"model": 1, "replies": [{"text": "hi"}]}' >chat-bad-model.json
run chat-script-model-not-a-string "$S" chat --provider scripted --script chat-bad-model.json --session "$W/chat.jsonl"
want_error '"model" must be a string'
echo '{"request": 1, "response": {"status": "x"}}' >replay.jsonl
run chat-replay-wrong-type "$S" chat --provider openai --model m --replay replay.jsonl --session "$W/chat2.jsonl"
no_crash && [ "$rc" -ne 0 ] && ok || { [ "$rc" -eq 0 ] && bad "exit 0"; }
# MCP servers for the chat (issue 19): a config that is not JSON or has a wrongly typed member is an error
# naming it; a server that answers the handshake, then floods binary junk and dies in the middle of a call
# is a tool result, and the chat goes on.
echo '{"mcpServers": ' >mcp-bad.json
run chat-mcp-config-not-json "$S" chat --provider scripted --script chat-bad.json --session "$W/chat3.jsonl" \
  --mcp-config-file mcp-bad.json
want_error "mcp-bad.json"
run chat-mcp-config-wrong-type "$S" chat --provider scripted --script chat-bad.json --session "$W/chat3.jsonl" \
  --mcp-config '{"mcpServers": {"x": {"command": "y", "args": [1]}}}'
want_error "args\\[0\\]"
cat >junk-server.py <<'PY'
import json, os, sys
for line in sys.stdin:
    m = json.loads(line)
    if m.get("method") == "initialize":
        print(json.dumps({"jsonrpc": "2.0", "id": m["id"], "result": {"protocolVersion": "2025-06-18",
              "capabilities": {"tools": {}}, "serverInfo": {"name": "junk"}}}), flush=True)
    elif m.get("method") == "tools/list":
        print(json.dumps({"jsonrpc": "2.0", "id": m["id"], "result": {"tools": [{"name": "boom"}]}}), flush=True)
    elif m.get("method") == "tools/call":
        sys.stdout.buffer.write(os.urandom(300000)); sys.stdout.flush()
        sys.stderr.buffer.write(b"\x1b[2J\xff\xfe dying\n"); sys.stderr.flush()
        os._exit(9)
PY
script '{"parts": [{"type": "function", "id": "c1", "function": {"name": "boom", "arguments": "{}"}}]}, {"text": "ok"}' chat-mcp.json
run chat-mcp-server-dies-in-a-call "$S" chat --provider scripted --script chat-mcp.json --session "$W/chat4.jsonl" \
  --mcp-config "{\"mcpServers\": {\"junk\": {\"command\": \"python3\", \"args\": [\"$W/junk-server.py\"]}}}"
want_ok
expect chat-mcp-tool-error-logged grep -q "exited with status 9" "$W/chat4.jsonl"
unset IN

# ---- Text that is not UTF-8, NUL bytes, control characters ----
printf 'caf\xe9' >latin1.txt
IN=$W/latin1.txt
run write-invalid-utf8 "$S" memory --data "$D" write strata://resources/notes/latin1
want_error "UTF-8"
unset IN
"$S" memory --data "$D" write strata://resources/notes/fine <<<"fine" >/dev/null 2>&1
run ls-after-invalid-utf8 "$S" memory --data "$D" ls strata://resources/notes --json
want_ok
mkdir -p skill-nul
printf -- '---\nname: nul-skill\ndescription: has a \0 raw nul\n---\nbody\n' >skill-nul/SKILL.md
run skill-nul-in-front-matter "$S" skill --data "$D" add skill-nul
want_error "control character"
"$S" session --data "$D" new --user u4 --id s4 >/dev/null 2>&1
run context-ref-dotdot "$S" session --data "$D" add s4 '{"role": "user", "content": [{"type": "context_ref", "uri": "strata://resources/../etc"}]}'
want_error "relative"
run context-ref-nul "$S" session --data "$D" add s4 '{"role": "user", "content": [{"type": "context_ref", "uri": "strata://resources/a\u0000b"}]}'
want_error "control"
run uri-with-newline "$S" memory --data "$D" read "$(printf 'strata://resources/a\nb')"
want_error "control"

# ---- Deep JSON (stack exhaustion) ----
deep 100000 '{"records": ' ', "x": 1}' >deep-window.json
IN=$W/deep-window.json
run deep-window-records "$S" window assemble --max-tokens 1000
want_error "nested deeper"
unset IN
IN=$W/window.json
echo '{"system_prompt": "s", "tools": [], "history": []}' >"$IN"
run deep-provider-options "$S" provider request --provider openai --model m --options "$(deep 5000 '{"a": ' '}')"
want_error "nested deeper"
unset IN
cat >t.yaml <<'EOF'
metadata: {id: t, name: t, description: d, version: '1', language: en, category: c}
variables:
  - {name: x, type: dict, description: d}
template: "{{ x }}"
EOF
deep 100000 '{"x": ' '}' >deep-vars.json
run deep-prompt-vars "$S" prompt render t.yaml --vars deep-vars.json
want_error "nested deeper"
mkdir -p deep-import/d
deep 100000 '{"self": {"metadata": {"a": ' '}}}' >deep-import/d/.meta.json
echo "leaf" >deep-import/d/leaf.md
run deep-import-meta "$S" memory --data "$D" import deep-import --uri strata://resources/deep
no_crash && ok

# ---- Templates that would never end or fill the memory ----
template() { printf 'metadata: {id: t2, name: t2, description: d, version: "1", language: en, category: c}\ntemplate: %s\n' "$1" >t2.yaml; }
template "\"{{ $(python3 -c "print('('*5000 + '1' + ')'*5000)") }}\""
run jinja-5k-parens "$S" prompt render t2.yaml
want_error "nest"
template "\"{{ $(python3 -c "print('+'.join(['1']*20000))") }}\""
run jinja-20k-sum "$S" prompt render t2.yaml
no_crash && ok
template "\"$(python3 -c "print('{% if true %}'*20000 + 'x' + '{% endif %}'*20000)")\""
run jinja-20k-ifs "$S" prompt render t2.yaml
want_error "nest"
template "\"{% for a in range(100000) %}{% for b in range(100000) %}x{% endfor %}{% endfor %}\""
run jinja-nested-loops "$S" prompt render t2.yaml
want_error "limit"
template "\"{% set ns = namespace(s='xx') %}{% for i in range(64) %}{% set ns.s = ns.s ~ ns.s %}{% endfor %}{{ ns.s }}\""
run jinja-string-doubling "$S" prompt render t2.yaml
want_error "limit"
template "\"{{ 'x' * 60000000 }}{{ 'x' * 60000000 }}\""
run jinja-huge-repeat "$S" prompt render t2.yaml
want_error "limit"

# ---- Symbolic links in imports and exports ----
mkdir -p outside tree/sub
echo "secret outside the tree" >outside/secret.md
echo "inside" >tree/sub/ok.md
ln -s "$W/outside/secret.md" tree/linked.md
ln -s "$W/outside" tree/linkeddir
ln -s . tree/sub/loop
echo "stolen sidecar" >outside/abstract
ln -s "$W/outside/abstract" tree/sub/.abstract.md
run import-links "$S" memory --data "$D" import tree --uri strata://resources/tree
want_ok
run import-links-not-followed "$S" memory --data "$D" grep "outside the tree" --under strata://resources/tree
expect import-grep-ran test "$rc" -eq 0
expect import-no-outside-content bash -c "! grep -q 'outside the tree' '$OUT'"
run import-link-abstract "$S" memory --data "$D" read strata://resources/tree/sub --level 0
expect import-read-abstract test "$rc" -eq 0
expect import-no-linked-sidecar bash -c "! grep -q 'stolen' '$OUT'"
mkdir -p export-target
echo "precious" >outside/victim.md
ln -s "$W/outside/victim.md" export-target/ok.md
mkdir -p export-target/tree
run export-through-file-link "$S" memory --data "$D" export export-target --uri strata://resources/tree/sub
want_error "symbolic link"
mkdir -p export2
ln -s "$W/outside" export2/sub
run export-through-dir-link "$S" memory --data "$D" export export2 --uri strata://resources/tree
want_error "symbolic link"
expect export-left-outside-alone grep -q precious outside/victim.md
expect export-wrote-nothing-outside test ! -e outside/ok.md

# ---- Errors that would echo megabytes, URIs of absurd size ----
python3 -c "import sys; sys.stdout.write('{\"role\": \"user\", \"content\": \"' + 'x' * 50_000_000)" >huge-line.json
IN=$W/huge-line.json
run huge-unterminated-line "$S" session --data "$D" add s4
want_error "JSON"
unset IN
run uri-30000-segments "$S" memory --data "$D" read "strata://resources/$(python3 -c "print('/'.join(['a'] * 30000))")"
want_error "longer than|segments"
python3 -c "import sys; sys.stdout.write('{\"role\": \"user\", \"content\": \"' + 'x' * 20_000_000 + '\"}\n')" >big-ctx.jsonl
run context-show-20mb-one-char "$S" context show big-ctx.jsonl
want_ok

# ---- Many processes on one session: no acknowledged message is lost or lands in a committed archive ----
"$S" session --data "$D" new --user u5 --id race >/dev/null 2>&1
acks=$W/acks
: >"$acks"
for w in 1 2 3 4; do
  (for i in $(seq 1 15); do
     if "$S" session --data "$D" add race --text "w$w-m$i" >/dev/null 2>&1; then echo "w$w-m$i" >>"$acks"; fi
   done) &
done
(for i in 1 2 3 4 5; do "$S" session --data "$D" commit race >/dev/null 2>&1; sleep 0.05; done) &
wait
stored=$(cat "$D"/sessions/race/messages.jsonl "$D"/sessions/race/history/*/messages.jsonl 2>/dev/null |
         grep -o '"w[0-9]*-m[0-9]*"' | tr -d '"' | sort)
expect race-every-acknowledged-add-stored bash -c "[ \"\$(sort '$acks')\" = \"$stored\" ]"
counts_ok=1
for st in "$D"/sessions/race/history/*/state.json; do
  [ -f "$st" ] || continue
  dir=$(dirname "$st")
  want=$(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['messages'])" "$st")
  have=$(grep -c . "$dir/messages.jsonl")
  [ "$want" = "$have" ] || counts_ok=0
done
expect race-archives-hold-what-they-say test "$counts_ok" -eq 1
expect race-no-temp-files-left bash -c "! ls '$D'/sessions/race | grep -q '\\.tmp'"

# --read-only on that directory (issue 28): memory, serve and mcp read it; every change is refused naming
# the mode; nothing in it changes. $@: the command prefix that runs as a user who may only read it.
read_only_mode() {
  local before after port log
  before=$(cd "$RO" && find . -type f ! -name '*-shm' ! -name '*-wal' -printf '%p %s %T@\n' | sort)
  run read-only-read "$@" "$S" memory --data "$RO" --read-only read strata://resources/a/b
  want_ok
  expect read-only-read-content grep -q hello "$OUT"
  run read-only-find "$@" "$S" memory --data "$RO" --read-only find hello
  want_ok
  expect read-only-find-hit grep -q strata://resources/a/b "$OUT"
  IN=/dev/null run read-only-write "$@" "$S" memory --data "$RO" --read-only write strata://resources/a/c
  want_error "write refused: the data is open read-only \(--read-only\)"
  log=$W/serve-ro.log
  # Port 0: the server picks a free one and says which (a random port in 20000-40000 could be taken, as
  # one was by an outgoing connection of another test).
  "$@" "$S" serve --data "$RO" --read-only --listen "127.0.0.1:0" >"$log" 2>&1 &
  local pid=$!
  for _ in $(seq 50); do grep -q "serving" "$log" && break; sleep 0.1; done
  port=$(sed -n 's|.* on http://127\.0\.0\.1:\([0-9]*\)/.*|\1|p' "$log" | head -n 1)
  name=read-only-serve-read
  if curl -sf "http://127.0.0.1:$port/api/v1/fs/read?uri=strata://resources/a/b" | grep -q hello; then ok; else bad "GET read failed: $(head -c 300 "$log")"; fi
  name=read-only-serve-write
  if curl -s -X POST "http://127.0.0.1:$port/api/v1/fs/write" -d '{"uri":"strata://resources/a/c","content":"x"}' |
     grep -q 'write refused: the data is open read-only'; then ok; else bad "POST write was not refused naming the mode"; fi
  kill "$pid" 2>/dev/null
  wait "$pid" 2>/dev/null
  printf '%s\n' '{"jsonrpc":"2.0","id":1,"method":"tools/list"}' \
    '{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"read","arguments":{"uri":"strata://resources/a/b"}}}' >"$W/mcp-ro.in"
  IN=$W/mcp-ro.in run read-only-mcp "$@" "$S" mcp --data "$RO" --read-only
  want_ok
  expect read-only-mcp-no-writers bash -c "! grep -q '\"name\":\"write\"' '$OUT' && grep -q '\"name\":\"read\"' '$OUT'"
  expect read-only-mcp-reads grep -q 'hello' "$OUT"
  after=$(cd "$RO" && find . -type f ! -name '*-shm' ! -name '*-wal' -printf '%p %s %T@\n' | sort)
  expect read-only-nothing-changed test "$before" = "$after"
}

# ---- A data directory this process may only read ----
if [ "$(id -u)" -eq 0 ] && id nobody >/dev/null 2>&1 && command -v runuser >/dev/null; then
  RO=$W/ro
  "$S" memory --data "$RO" write strata://resources/a/b <<<"hello" >/dev/null 2>&1
  chmod -R a+rX "$W"
  chmod -R a-w "$RO"
  run read-only-data-dir runuser -u nobody -- "$S" memory --data "$RO" read strata://resources/a/b
  want_error "not writable"
  read_only_mode runuser -u nobody --
  chmod -R u+w "$RO"
else
  RO=$W/ro
  "$S" memory --data "$RO" write strata://resources/a/b <<<"hello" >/dev/null 2>&1
  chmod -R a-w "$RO"
  run read-only-data-dir "$S" memory --data "$RO" read strata://resources/a/b
  want_error "not writable"
  read_only_mode
  chmod -R u+w "$RO"
fi

# ---- Nothing stored was lost along the way ----
run store-check "$S" memory --data "$D" check
want_ok

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
