"""Writes an agent-style kimi-cli context log for the restore benchmark (bench/run_restore_bench.sh): turns of a
coding agent whose tool results are real source files of this repository (long strings full of quotes,
backslashes and newlines), tool calls carrying code edits, thinking, a usage mark after every step and a
last turn still running (so its messages are pending). Deterministic (seeded).
Usage: make_agent_log.py OUT [BYTES]   (default 100 MiB)"""
import json, random, os, glob, sys
random.seed(7)
out = sys.argv[1]; target = int(sys.argv[2]) if len(sys.argv) > 2 else 100 << 20
srcs = []
root = os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', '..')
for pat in ['src/*/*.cc', 'include/strata/*/*.h', 'docs/*.md', 'tests/*/*.cc']:
    for p in sorted(glob.glob(os.path.join(root, pat))):
        srcs.append(open(p, encoding='utf-8', errors='replace').read())
words = open(os.path.join(root, 'docs', 'ARCHITECTURE.md')).read().split()
def prose(n): 
    i = random.randrange(len(words)); return ' '.join(words[(i + k) % len(words)] for k in range(n))
size = 0; turn = 0; tokens = 1000
with open(out, 'w') as f:
    def w(obj):
        global size
        line = json.dumps(obj, ensure_ascii=False, separators=(',', ':')) + '\n'
        f.write(line); size += len(line.encode())
    w({"role": "_system_prompt", "content": "You are a coding agent. " + prose(200)})
    while size < target:
        w({"role": "_checkpoint", "id": turn})
        w({"role": "user", "content": prose(random.randint(10, 120))})
        for step in range(random.randint(1, 4)):
            src = random.choice(srcs); a = random.randrange(max(1, len(src) - 20000)); chunk = src[a:a + random.randint(500, 20000)]
            call = {"type": "function", "id": f"call_{turn}_{step}", "function": {"name": random.choice(["read_file", "grep", "edit"]),
                    "arguments": json.dumps({"path": "src/x.cc", "old": chunk[:300], "new": chunk[:300].replace(';', ';\n')})}}
            w({"role": "assistant", "content": [{"type": "think", "think": prose(random.randint(50, 400))},
                                                 {"type": "text", "text": prose(random.randint(5, 80))}], "tool_calls": [call]})
            w({"role": "tool", "content": chunk, "tool_call_id": call["id"]})
            tokens += len(chunk) // 4 + 300
            w({"role": "_usage", "token_count": tokens})
        w({"role": "assistant", "content": prose(random.randint(20, 300))})
        turn += 1
    # The last turn is still running: no usage mark after it yet.
    w({"role": "user", "content": prose(50)})
    src = srcs[0]
    w({"role": "assistant", "content": [{"type": "text", "text": "Reading."}], "tool_calls": [{"type": "function", "id": "call_last", "function": {"name": "read_file", "arguments": "{\"path\":\"a\"}"}}]})
    w({"role": "tool", "content": src[:20000], "tool_call_id": "call_last"})
print(f"{out}: {size} bytes, {turn} turns")
