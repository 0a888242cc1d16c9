"""Rule C candidates from the miss analysis: turn cues that mark a reported experience.
C1 'told event': a first-person clause with a past-tense event verb ("I went", "we visited", "I've joined").
C4 'session opener': the first K turns of a session (the news turns: "Hey X! Last week I ...").
Each as score x (1+w), over find's first 100, for every question or only for questions gated as
experience/list questions (present perfect 'has/have X ...', list questions, 'What did X ...')."""
from harness import *

EVENT = re.compile(r"\b(i|we)('ve| have| had| just| also| finally| recently| even)*\s+(went|visited|took|made|got|did|"
                   r"joined|started|tried|saw|bought|won|had|played|watched|read|finished|met|attended|"
                   r"volunteered|signed|ran|wrote|learned|learnt|found|gave|organized|organised|hosted|adopted|"
                   r"baked|cooked|painted|traveled|travelled|explored|hiked|camped|moved|lost|received|"
                   r"[a-z]{3,}ed)\b", re.I)

def told(t): return bool(EVENT.search(t['body']))

GATE = re.compile(r"\b(has|have)\s+[A-Z]\w+|\b(has|have)\s+(both|he|she|they)\b", re.I)
def gate_pp(q): return bool(GATE.search(q['question']))
def gate_list(q): return is_list_question(q['question'])
def gate_any(q): return True
def gate_mh(q): return gate_pp(q) or gate_list(q)

def make(cue, w, gate, named_only=True):
    def rr(q):
        if not gate(q): return None
        named = set(names_in(q['question'], SPK[q['conversation']]))
        def g(q, u, i):
            t = TURNS[u]
            if named_only and named and t['speaker'] not in named: return 1.0
            return 1.0 + w if cue(t) else 1.0
        return multiplicative(q, g)
    return rr

if __name__ == '__main__':
    allt = list(TURNS.values())
    print('told share: all turns %.2f' % (sum(map(told, allt)) / len(allt)))
    for gname, gate in (('any', gate_any), ('pp', gate_pp), ('list|pp', gate_mh)):
        print('gate', gname, sum(1 for q in QS if gate(q)), Counter(CATS[q['category']] for q in QS if gate(q)))
        for w in (0.1, 0.2, 0.3):
            run(f'C1 told w={w} gate={gname}', make(told, w, gate))
        for K in (1, 2, 3):
            for w in (0.1, 0.2, 0.3):
                run(f'C4 opener k<={K} w={w} gate={gname}', make(lambda t, K=K: t['k'] <= K, w, gate))
