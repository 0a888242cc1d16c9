#!/usr/bin/env python3
"""Peer for the restore benchmark: kimi-cli's restore loop without pydantic (json.loads per line and the
role dispatch). kimi-cli also validates every message with pydantic, so its real restore is slower than this.
Usage: restore_json_lines.py FILE [REPEATS]   (REPEATS 0: one silent pass, for timing the whole process)"""
import json
import os
import sys
import time

def kimi_restore(path):
    """kimi-cli's restore loop: returns the messages (the usage, checkpoint and system prompt records are read
    as kimi-cli reads them)."""
    history, token_count, next_checkpoint, system_prompt = [], 0, 0, None
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
                system_prompt = record["content"]
            else:
                history.append(record)
    return history


def main():
    path = sys.argv[1]
    repeats = int(sys.argv[2]) if len(sys.argv) > 2 else 3
    silent = repeats == 0
    repeats = max(repeats, 1)
    size = os.path.getsize(path)
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        history = kimi_restore(path)
        times.append(time.perf_counter() - start)
        n = len(history)
        del history
    if silent:
        sys.exit(0)
    first, best = times[0], min(times)
    print(f"python json.loads restore of {size / 2**20:.1f} MB, {n} messages: first {first * 1000:.0f} ms "
          f"= {size / first / 2**20:.0f} MB/s; best of {repeats} {best * 1000:.0f} ms = {size / best / 2**20:.0f} MB/s, "
          f"{n / best:,.0f} messages/s")


if __name__ == "__main__":
    main()
