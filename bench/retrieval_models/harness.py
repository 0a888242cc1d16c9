"""Rerank harness: apply a rule to find's first 100 (pq.tsv) and print recall vs the file's baseline."""
from collections import Counter, defaultdict
from common import *
from textutil import *

TURNS, ORDER = load_turns()
QS = load_pq()
SPK = defaultdict(set)
for t in TURNS.values(): SPK[t['conv']].add(t['speaker'])
DF = defaultdict(Counter)
for t in TURNS.values():
    for w in set(words(t['body'])): DF[t['conv']][w] += 1
NT = {c: len(o) for c, o in ORDER.items()}
BASE = evaluate(QS, [q['strata'] for q in QS])

def run(name, rerank, only=None):
    """rerank(q) -> new ranking (list of uris) or None to keep. Prints deltas; returns results."""
    rk = []; touched = 0
    for q in QS:
        r = rerank(q)
        if r is None or r[:10] == q['strata'][:10]: rk.append(q['strata'])
        else: rk.append(r); touched += 1
    res = evaluate(QS, rk)
    print(f"{name:38s} {res['all'][0]:.3f}/{res['all'][1]:.3f} (changed {touched:3d})  " + fmt(res, BASE))
    return res

def multiplicative(q, gain):
    """gain(q, uri, rank) -> multiplier; rerank by score*multiplier."""
    items = [(s * gain(q, u, i), -i, u) for i, (u, s) in enumerate(zip(q['strata'], q['scores']))]
    items.sort(reverse=True)
    return [u for _, _, u in items]
