"""Rule D: a turn addressed to the listener tells little about its speaker. A turn whose words are at least
theta 'you/your/you're/yours/yourself' (share of the turn's words after its label) loses p of its score.
Variants: ungated; gated off when the question asks what was said/given/advised to someone (or names two
speakers)."""
from harness import *
YOU = {'you', 'your', 'yours', 'yourself', 'ya', 'u'}
def you_share(t):
    ws = words(t['body']); return sum(w in YOU for w in ws) / max(1, len(ws))
SAID = re.compile(r"\b(say|said|says|tell|tells|told|advice|advise|advised|suggest\w*|recommend\w*|reccomend\w*|"
                  r"encourag\w*|compliment\w*|think about|feel about|describe|offer\w*|give|gave|given|to (him|her))\b", re.I)

def make(theta, p, gate=False):
    def rr(q):
        if gate and (SAID.search(q['question']) or len(names_in(q['question'], SPK[q['conversation']])) >= 2):
            return None
        return multiplicative(q, lambda q, u, i: (1 - p) if you_share(TURNS[u]) >= theta else 1.0)
    return rr

if __name__ == '__main__':
    allt = list(TURNS.values())
    for th in (0.04, 0.05, 0.07, 0.1):
        print(f'theta {th}: share of all turns %.2f' % (sum(you_share(t) >= th for t in allt) / len(allt)))
    for gate in (False, True):
        for th in (0.04, 0.05, 0.07, 0.1):
            for p in (0.1, 0.15, 0.2, 0.3):
                run(f'D you>={th} p={p} gate={gate}', make(th, p, gate))
