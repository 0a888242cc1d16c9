"""Classify multi-hop and open-domain evidence missed in find's first 10 (issue 32)."""
from collections import Counter, defaultdict
from common import *
from textutil import *
turns, order = load_turns()
qs = load_pq()
spk = defaultdict(set)
for t in turns.values(): spk[t['conv']].add(t['speaker'])
C = Counter(); byq = Counter()
for q in qs:
    cat = CATS[q['category']]
    if cat not in ('multi', 'open'): continue
    r = q['strata']; top10 = r[:10]
    sess10 = {(turns[u]['session']) for u in top10}
    named = names_in(q['question'], spk[q['conversation']])
    qst = content_stems(q['question'], drop={n.lower() for n in spk[q['conversation']]})
    kind = ('both' if len(named) == 2 else 'list' if is_list_question(q['question']) else
            'hypo' if re.match(r"^(would|might|could|is it likely|does|do|is|was|did)\b", q['question'], re.I) or 'likely' in q['question'].lower() or 'might' in q['question'].lower() else 'other')
    act = is_activity_question(q['question'])
    for e in q['evidence']:
        if e in top10: continue
        t = turns[e]
        rank = r.index(e) + 1 if e in r else 999
        rb = '11-20' if rank <= 20 else '21-100' if rank <= 100 else '>100'
        sp = 'no-name' if not named else ('named-speaker' if t['speaker'] in named else 'other-speaker')
        ov = 'overlap' if qst & content_stems(t['body']) else 'no-overlap'
        ss = 'sess-in-top10' if t['session'] in sess10 else 'new-sess'
        for k in (cat, 'both-cats'):
            C[(k, 'rank', rb)] += 1; C[(k, 'speaker', sp)] += 1; C[(k, 'lex', ov)] += 1
            C[(k, 'session', ss)] += 1; C[(k, 'qkind', kind)] += 1; C[(k, 'activity-q', act)] += 1
            C[(k, 'total', '')] += 1
for k in sorted(C): print(k, C[k])
