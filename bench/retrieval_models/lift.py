"""Feature lift: evidence vs non-evidence among find's ranks 11-100 (and 1-100), by category group."""
from collections import Counter, defaultdict
from common import *
from harness import TURNS as turns, QS as qs, SPK as spk, DF as df, NT as nturns
from textutil import *
def feats(t, q):
    b = t['body']; ws = words(b)
    qw = set(words(q['question']))
    ing = [w for w in ws if w.endswith('ing') and len(w) > 5 and w not in qw and df[t['conv']][w] / nturns[t['conv']] < 0.02]
    f = {}
    f['opener_k<=2'] = t['k'] <= 2
    f['photo'] = '[shares a photo' in b
    f['rare_ing'] = bool(ing)
    f['hey_open'] = bool(re.match(r"^(hey|hi|hello|yo|woah|wow)\b", b, re.I))
    f['timeword'] = bool(re.search(r"\b(yesterday|last (week|weekend|month|year|night|friday|saturday|sunday|monday|tuesday|wednesday|thursday)|ago|recently|just)\b", b, re.I))
    f['I_did'] = bool(re.search(r"\b(i|we)\s+(\w+ed|went|took|made|got|did|joined|started|tried|saw|bought|won|had|visited|played|watched|read)\b", b, re.I))
    f['quote'] = '"' in b
    f['ends_q'] = b.rstrip().endswith('?')
    return f
for group in (('multi', 'open'), ('temporal', 'single')):
    cnt = {'ev': Counter(), 'non': Counter()}; tot = Counter()
    for q in qs:
        if CATS[q['category']] not in group: continue
        for i, u in enumerate(q['strata'][10:100]):
            key = 'ev' if u in q['evidence'] else 'non'
            tot[key] += 1
            for k, v in feats(turns[u], q).items(): cnt[key][k] += v
    print(group, dict(tot))
    for k in cnt['ev']:
        pe, pn = cnt['ev'][k] / tot['ev'], cnt['non'][k] / tot['non']
        print(f'  {k:14s} ev {pe:.2f} non {pn:.2f} lift {pe/max(pn,1e-9):.2f}')
