"""Rule B: for list questions only, spread the first hits over sessions: greedy, each candidate's score times
(1-p)^(hits already taken from its session); candidates are find's first `depth`."""
from harness import *

def list_q(q):
    return is_list_question(q['question'])

def make(p, depth=100, cap=None):
    def rr(q):
        if not list_q(q): return None
        cand = list(zip(q['strata'][:depth], q['scores'][:depth]))
        taken = Counter(); out = []
        while cand and len(out) < 10:
            best = max(range(len(cand)), key=lambda j: cand[j][1] * (1 - p) ** taken[TURNS[cand[j][0]]['session']])
            u, s = cand.pop(best); out.append(u); taken[TURNS[u]['session']] += 1
        rest = [u for u in q['strata'] if u not in out]
        return out + rest
    return rr

if __name__ == '__main__':
    L = [q for q in QS if list_q(q)]
    print('list questions:', len(L), Counter(CATS[q['category']] for q in L))
    for q in L[:0]: print(q['question'])
    for depth in (20, 50, 100):
        for p in (0.1, 0.2, 0.3, 0.5, 0.8):
            run(f'B p={p} depth={depth}', make(p, depth))

# Variant: only present-perfect list questions ("What X has/have S ..."), the multi-hop form.
PP = re.compile(r"^(what|which)\b.*\b(has|have)\s+[A-Z]", re.I)
def make_pp(p, depth=100):
    base = make(p, depth)
    return lambda q: base(q) if PP.search(q['question']) else None

if __name__ == '__main__':
    print('present-perfect list questions:', sum(1 for q in QS if list_q(q) and PP.search(q['question'])))
    for p in (0.1, 0.2, 0.3, 0.5):
        run(f'B-pp p={p} depth=30', make_pp(p, 30))
