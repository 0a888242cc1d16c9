"""Rule A: activity answer kind. A question asking for activities/hobbies/what someone does; a turn of the
person it names holding an activity word (a rare -ing word not in the question) gains w."""
import sys
from harness import *

ACT_Q = re.compile(r"\b(activit(y|ies)|hobb(y|ies)|sports?|exercises?|pastimes?|partake|outdoor|interests|"
                   r"do(es)?\s+[A-Z]\w+\s+do\s+(to|with|for|on|when|in)\b)", re.I)
NOT_ACT = set("""thing something anything everything nothing morning evening during bring spring string king ring
wing being going doing getting having feeling looking thinking saying making taking coming trying hoping wondering
amazing exciting interesting inspiring rewarding relaxing calming challenging refreshing touching encouraging
fulfilling surprising boring annoying frustrating overwhelming promising satisfying uplifting heartwarming
breathtaking thrilling motivating charming loving caring understanding welcoming stunning interesting""".split())

def act_words(t, qwords, pmax):
    c = t['conv']
    return [w for w in words(t['body']) if w.endswith('ing') and len(w) >= 6 and w not in NOT_ACT and w not in qwords
            and DF[c][w] / NT[c] <= pmax]

def make(w, pmax, mode='named', doing=False):
    """A turn of the named person holding a rare -ing word (or, with `doing`, "I/we" and a verb of doing)
    gains w, for activity questions."""
    def rr(q):
        if not ACT_Q.search(q['question']): return None
        named = set(names_in(q['question'], SPK[q['conversation']]))
        qw = set(words(q['question']))
        def g(q, u, i):
            t = TURNS[u]
            if mode == 'named' and named and t['speaker'] not in named: return 1.0
            held = act_words(t, qw, pmax) or (doing and DOING.search(t['body']))
            return 1.0 + w if held else 1.0
        return multiplicative(q, g)
    return rr

if __name__ == '__main__':
    n = sum(1 for q in QS if ACT_Q.search(q['question']))
    print('activity questions:', n, Counter(CATS[q['category']] for q in QS if ACT_Q.search(q['question'])))
    for pmax in (0.01, 0.02, 0.05, 1.0):
        for w in (0.1, 0.2, 0.3, 0.5):
            run(f'A w={w} df<={pmax}', make(w, pmax))

DOING = re.compile(r"\b(i|we)('m|'ve| am| are| have| had)?\s+(been\s+|also\s+|just\s+|really\s+)?(started|joined|tried|"
                   r"trying|doing|playing|practicing|practising|took up|taking|went|signed up|learning|learned|love|"
                   r"enjoy|do|play)\b", re.I)

if __name__ == '__main__':
    for pmax in (0.02, 1.0):
        for w in (0.1, 0.2, 0.3, 0.5):
            run(f'A2 (ing or I+doing) w={w} df<={pmax}', make(w, pmax, doing=True))
