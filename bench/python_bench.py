#!/usr/bin/env python3
"""Python's overhead over the C++ call, and ContextLog restore beside kimi-cli's json.loads loop, in one run.

  overhead: find, write and ContextLog.append through the module, each beside the same work done in C++
            by the same engine or log with no Python in between (`_cpp_loop`: arguments converted once);
            overhead = Python's time per call minus C++'s, and its share of the Python call.
  restore:  strata.ContextLog(path) of a ~100 MB kimi-cli log beside the json.loads loop kimi-cli runs
            (bench/peers/restore_json_lines.py's loop, without pydantic), best of REPEATS; and with the
            whole history read back into Python dicts (log.history.to_list()).

Usage: python_bench.py LOG_FILE [REPEATS]   (bench/run_python_bench.sh passes the log benchmark's file)
Data: the find corpus is the LoCoMo dev conversations' turns (../shared/benchmarks/locomo-dev) when present.
"""

from __future__ import annotations

import gc
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import strata

sys.path.insert(0, str(Path(__file__).resolve().parent / "peers"))
from restore_json_lines import kimi_restore  # noqa: E402 - the peer's own loop, shared with run_restore_bench.sh

ROOT = Path(__file__).resolve().parents[1]


def per_call_ns(fn, n: int) -> float:
    start = time.perf_counter_ns()
    for i in range(n):
        fn(i)
    return (time.perf_counter_ns() - start) / n


def corpus() -> list[str]:
    texts = []
    for f in sorted((ROOT.parent / "shared" / "benchmarks" / "locomo-dev").glob("*.json")):
        data = json.loads(f.read_text())
        conv = data.get("conversation", data)
        for key, turns in conv.items():
            if key.startswith("session_") and isinstance(turns, list):
                texts += [t.get("text", "") for t in turns if isinstance(t, dict) and t.get("text")]
    if not texts:  # Without the shared data: varied synthetic notes.
        texts = [f"Note {i}: the {w} meeting moved to {i % 7 + 1} pm in room {i % 13}."
                 for i, w in zip(range(2000), ["design", "review", "budget", "hiring", "launch"] * 400)]
    return texts[:2000]


def paired(py_fn, cpp_fn, repeats: int) -> tuple[float, float]:
    """Medians of `repeats` rounds, each running the Python loop then the C++ one (drift hits both)."""
    py, cpp = [], []
    for _ in range(repeats):
        py.append(py_fn())
        cpp.append(cpp_fn())
    return statistics.median(py), statistics.median(cpp)


def overhead(repeats: int) -> None:
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        engine = strata.Engine.open(os.path.join(tmp, "data"))
        texts = corpus()
        for i, t in enumerate(texts):
            engine.write(f"strata://resources/corpus/t{i}", t)
        # find: the same query in both loops (warm caches either way).
        query = "when is the design review"
        n = 200
        py, cpp = paired(lambda: per_call_ns(lambda i: engine.find(query), n),
                         lambda: engine._cpp_loop("find", query, "", n), repeats)
        rows.append((f"find ({len(texts)} notes, limit 10)", py, cpp))
        # write: new URIs each call (a node written, stat'ed and viewed).
        content = "A short note written to measure the binding's overhead on write."
        runs = iter(range(10**6))
        py, cpp = paired(lambda: (lambda r: per_call_ns(lambda i: engine.write(f"strata://resources/py{r}/n{i}", content),
                                                        n))(next(runs)),
                         lambda: engine._cpp_loop("write", f"strata://resources/cpp{next(runs)}/n", content, n), repeats)
        rows.append(("write", py, cpp))
        engine.close()
        # ContextLog.append of a typical message, durability none (an fsync would hide everything else).
        message = {"role": "assistant", "content": "Sure — the review moved to Thursday at 3 pm in room 4.",
                   "tool_calls": [{"type": "function", "id": "call_1",
                                   "function": {"name": "calendar", "arguments": "{\"day\": \"thursday\"}"}}]}
        n = 20000
        py_log = strata.ContextLog(os.path.join(tmp, "py.jsonl"), durability="none")
        cpp_log = strata.ContextLog(os.path.join(tmp, "cpp.jsonl"), durability="none")
        py, cpp = paired(lambda: per_call_ns(lambda i: py_log.append(message), n),
                         lambda: cpp_log._cpp_loop(json.dumps(message), n), repeats)
        rows.append(("ContextLog.append (durability none)", py, cpp))
        py_log.close()
        cpp_log.close()
    print(f"median of {repeats} rounds:")
    print(f"{'call':40} {'python':>12} {'c++':>12} {'overhead':>12} {'share':>7}")
    for name, py, cpp in rows:
        print(f"{name:40} {py / 1000:10.2f}us {cpp / 1000:10.2f}us {(py - cpp) / 1000:10.2f}us "
              f"{(py - cpp) / py * 100:6.1f}%")


def restore(path: str, repeats: int) -> None:
    size = os.path.getsize(path) / 2**20

    def timed(fn):
        gc.collect()
        start = time.perf_counter()
        out = fn()
        return time.perf_counter() - start, out

    strata_s = [timed(lambda: len(strata.ContextLog(path, durability="none", estimator="chars").history))
                for _ in range(repeats)]
    full_s = [timed(lambda: len(strata.ContextLog(path, durability="none", estimator="chars").history.to_list()))
              for _ in range(repeats)]
    peer_s = [timed(lambda: len(kimi_restore(path))) for _ in range(repeats)]
    assert strata_s[0][1] == peer_s[0][1] == full_s[0][1], (strata_s[0][1], peer_s[0][1], full_s[0][1])
    s, f, p = (min(t for t, _ in runs) for runs in (strata_s, full_s, peer_s))
    print(f"restore of {size:.0f} MiB, {peer_s[0][1]} messages (best of {repeats}):")
    print(f"  strata.ContextLog(path)                      {s * 1000:8.0f} ms  {size / s:6.0f} MiB/s")
    print(f"  ... and history.to_list() (all as dicts)     {f * 1000:8.0f} ms  {size / f:6.0f} MiB/s")
    print(f"  kimi-cli's json.loads loop (no pydantic)     {p * 1000:8.0f} ms  {size / p:6.0f} MiB/s")
    print(f"  ratio: {p / s:.1f}x (restore), {p / f:.1f}x (restore + every message as a dict)")


if __name__ == "__main__":
    log = sys.argv[1]
    repeats = int(sys.argv[2]) if len(sys.argv) > 2 else 5
    overhead(repeats)
    restore(log, repeats)
