"""Rule C: the subject speaker. When the query names both speakers and the names are not joined ("X and Y",
"both"), the speaker step's gain goes to the first named only (the question's subject: "What book did Tim
recommend to John", "What does Melanie think about Caroline's decision"). Modelled on find's first 100: the
second-named speaker's turns have find's x(1+0.2) undone (keep=0) or partly kept (keep = share of the gain kept),
times (1-p)."""
from harness import *

SPEAKER_W = 0.2  # find's speaker_weight

def name_positions(q, speakers):
    ws = words(q)
    pos = {}
    for s in speakers:
        sw = s.lower()
        for i, w in enumerate(ws):
            if w == sw: pos.setdefault(s, i)
    return ws, sorted(pos.items(), key=lambda kv: kv[1])

def subject_and_other(q, speakers):
    ws, named = name_positions(q, speakers)
    if len(named) < 2: return None
    (a, i), (b, j) = named[0], named[1]
    between = ws[i + 1:j]
    if between == ['and'] or 'both' in ws: return None  # joined: both are asked about
    return a, b

def make(keep=0.0, p=0.0):
    def rr(q):
        so = subject_and_other(q['question'], SPK[q['conversation']])
        if so is None: return None
        subj, other = so
        def g(q, u, i):
            if TURNS[u]['speaker'] != other: return 1.0
            return (1 + keep * SPEAKER_W) / (1 + SPEAKER_W) * (1 - p)
        return multiplicative(q, g)
    return rr

if __name__ == '__main__':
    G = [q for q in QS if subject_and_other(q['question'], SPK[q['conversation']])]
    print('questions gated:', len(G), Counter(CATS[q['category']] for q in G), Counter(q['conversation'] for q in G))
    ev = Counter()
    for q in G:
        s, o = subject_and_other(q['question'], SPK[q['conversation']])
        for e in q['evidence']: ev['subject' if TURNS[e]['speaker'] == s else 'other'] += 1
    print('their evidence turns by speaker:', dict(ev))
    for keep in (0.5, 0.0):
        run(f'C subject keep={keep} p=0', make(keep, 0.0))
    for p in (0.1, 0.2, 0.3):
        run(f'C subject keep=0 p={p}', make(0.0, p))
