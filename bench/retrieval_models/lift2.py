"""Lift of cheap turn cues among find's ranks 1-30: evidence vs not, all categories and multi/open."""
from harness import *
REACT = re.compile(r"^(thanks|thank you|thx|wow|woah|whoa|aww|awesome|congrats|congratulations|that's|thats|that is|"
                   r"sounds|glad|sorry|nice|cool|great|amazing|yeah|yep|yes|oh|haha|lol|so|ha)\b", re.I)
def second_person(t):
    ws = words(t['body']); return sum(w in ('you', 'your', "you're", 'yours') for w in ws) / max(1, len(ws))
def first_person(t):
    ws = words(t['body']); return sum(w in ('i', 'my', 'me', 'we', 'our', 'us') for w in ws) / max(1, len(ws))
F = {
  'reaction_open': lambda t, q: bool(REACT.match(t['body'])),
  'you>=0.05': lambda t, q: second_person(t) >= 0.05,
  'you>first': lambda t, q: second_person(t) > first_person(t),
  'I>=0.08': lambda t, q: first_person(t) >= 0.08,
  'told_event': lambda t, q: __import__('rule_c_cues').told(t),
}
for group in (('multi', 'open'), ('temporal', 'single'), ('multi', 'open', 'temporal', 'single')):
    for lo, hi in ((0, 10), (10, 30)):
        cnt = {'ev': Counter(), 'non': Counter()}; tot = Counter()
        for q in QS:
            if CATS[q['category']] not in group: continue
            named = set(names_in(q['question'], SPK[q['conversation']]))
            for u in q['strata'][lo:hi]:
                t = TURNS[u]
                key = 'ev' if u in q['evidence'] else 'non'; tot[key] += 1
                for k, f in F.items(): cnt[key][k] += f(t, q)
        print(group, f'ranks {lo+1}-{hi}', dict(tot), '  '.join(
            f"{k} {cnt['ev'][k]/tot['ev']:.2f}/{cnt['non'][k]/tot['non']:.2f}" for k in F))
