"""Rule C2: joined questions ("X and Y", "both") name both speakers: the first ten are balanced between them
(greedy: a candidate's score x (1-p)^max(0, taken[its speaker] - taken[the other])), over find's first `depth`."""
from harness import *
from rule_c_subject import name_positions, subject_and_other, make as make_subject

def joined(q, speakers):
    ws, named = name_positions(q, speakers)
    return len(named) >= 2 and subject_and_other(q, speakers) is None

def make(p, depth=30):
    def rr(q):
        if not joined(q['question'], SPK[q['conversation']]): return None
        _, named = name_positions(q['question'], SPK[q['conversation']])
        a, b = named[0][0], named[1][0]
        cand = list(zip(q['strata'][:depth], q['scores'][:depth])); taken = Counter(); out = []
        while cand and len(out) < 10:
            def val(j):
                s = TURNS[cand[j][0]]['speaker']; o = b if s == a else a
                return cand[j][1] * (1 - p) ** max(0, taken[s] - taken[o])
            j = max(range(len(cand)), key=val)
            u, _ = cand.pop(j); out.append(u); taken[TURNS[u]['speaker']] += 1
        return out + [u for u in q['strata'] if u not in out]
    return rr

if __name__ == '__main__':
    J = [q for q in QS if joined(q['question'], SPK[q['conversation']])]
    print('joined questions:', len(J), Counter(CATS[q['category']] for q in J))
    for depth in (20, 50):
        for p in (0.1, 0.2, 0.4):
            run(f'C2 joined balance p={p} depth={depth}', make(p, depth))
    # combined with the subject rule
    sub = make_subject(0.0, 0.0)
    for p in (0.1, 0.2):
        bal = make(p, 20)
        run(f'C+C2 subject + balance p={p}', lambda q: sub(q) or bal(q))
