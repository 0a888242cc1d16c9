"""Rule E (probe): in list questions ("What Xs has S ...", "What kind of X"), a turn that holds the category
word X itself (rather than an instance of it) loses p."""
from harness import *
HEAD = re.compile(r"^(?:what|which)\s+(?:kinds?\s+of\s+|types?\s+of\s+|sorts?\s+of\s+)?((?:[a-z+\-]+\s+){0,2}?)([a-z\-]+s)\s+(?:has|have|does|do|did|is|are|was|were)\b", re.I)
def head(q):
    m = HEAD.search(q.strip())
    if not m: return None
    w = m.group(2).lower()
    if w in ('does', 'has', 'is', 'was', 'things'): return None
    return stem(w)
def holds(t, h): return h in {stem(w) for w in words(t['body'])}
def make(p):
    def rr(q):
        h = head(q['question'])
        if not h: return None
        return multiplicative(q, lambda q, u, i: (1 - p) if holds(TURNS[u], h) else 1.0)
    return rr
if __name__ == '__main__':
    H = [q for q in QS if head(q['question'])]
    print('questions:', len(H), Counter(CATS[q['category']] for q in H))
    print(sorted({head(q['question']) for q in H}))
    for lo, hi in ((0, 10), (10, 30), (30, 100)):
        c = Counter()
        for q in H:
            h = head(q['question'])
            for u in q['strata'][lo:hi]:
                k = 'ev' if u in q['evidence'] else 'non'; c[k] += 1; c[k + '_h'] += holds(TURNS[u], h)
        print(f'ranks {lo+1}-{hi}: holds head  ev {c["ev_h"]/max(1,c["ev"]):.2f} ({c["ev"]})  non {c["non_h"]/c["non"]:.2f}')
    for p in (0.1, 0.2, 0.3):
        run(f'E head-noun p={p}', make(p))
