"""Dump multi-hop and open-domain evidence turns missed in the first 10 (issue 32 miss analysis)."""
from common import *
turns, order = load_turns()
qs = load_pq()
for q in qs:
    if q['category'] not in (1, 3): continue
    r = q['strata']
    miss = [e for e in q['evidence'] if e not in r[:10]]
    if not miss: continue
    print(f"## [{CATS[q['category']]}] c{q['conversation']} {q['question']}")
    for e in q['evidence']:
        rank = r.index(e) + 1 if e in r else None
        t = turns[e]
        flag = 'HIT ' if rank and rank <= 10 else 'MISS'
        print(f"  {flag} rank={rank} s{t['session']}t{t['k']} {t['speaker']}: {t['body'][:220]}")
    print(f"  top1: {turns[r[0]]['speaker']}: {turns[r[0]]['body'][:150]}")
