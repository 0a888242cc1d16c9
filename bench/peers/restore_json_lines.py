#!/usr/bin/env python3
"""Peer for the restore benchmark: kimi-cli's restore loop without pydantic (json.loads per line and the
role dispatch). kimi-cli also validates every message with pydantic, so its real restore is slower than this.
Usage: restore_json_lines.py FILE [REPEATS]"""
import json
import sys
import time

path = sys.argv[1]
repeats = int(sys.argv[2]) if len(sys.argv) > 2 else 3
size = 0
best = None
for _ in range(repeats):
    start = time.perf_counter()
    history, token_count, next_checkpoint = [], 0, 0
    with open(path, encoding="utf-8", errors="replace") as f:
        for line in f:
            if not line.strip():
                continue
            record = json.loads(line)
            role = record.get("role")
            if role == "_usage":
                token_count = record["token_count"]
            elif role == "_checkpoint":
                next_checkpoint = record["id"] + 1
            elif role == "_system_prompt":
                pass
            else:
                history.append(record)
    elapsed = time.perf_counter() - start
    best = elapsed if best is None else min(best, elapsed)
    size = f.tell() if hasattr(f, "tell") else size
import os
size = os.path.getsize(path)
print(f"python json.loads restore: {size / best / 2**20:.1f} MB/s, {len(history) / best:,.0f} messages/s "
      f"({best * 1000:.0f} ms best of {repeats})")
