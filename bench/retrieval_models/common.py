"""Shared loading and scoring for the issue-32 reranking models (see README.md here)."""
import json, re, glob, os
from collections import defaultdict

_HERE = os.path.dirname(os.path.abspath(__file__))
# The development half of LoCoMo (../shared beside the checkout) and find's first 100 per question.
DATA = os.environ.get('STRATA_LOCOMO_DIR', os.path.join(_HERE, '../../../shared/benchmarks/locomo-dev'))
PQ = os.environ.get('STRATA_PQ', '/tmp/rexp/pq.tsv')
CATS = {1: 'multi', 2: 'temporal', 3: 'open', 4: 'single'}

def load_turns():
    """uri -> dict(text, speaker, body, session, k, conv, idx)"""
    turns = {}
    order = {}
    for path in sorted(glob.glob(DATA + '/*.json')):
        name = os.path.splitext(os.path.basename(path))[0]
        doc = json.load(open(path))
        conv = doc
        n = 1
        lst = []
        while f'session_{n}_date_time' in conv:
            date = conv[f'session_{n}_date_time']
            for k, t in enumerate(conv.get(f'session_{n}', []), 1):
                uri = f'strata://resources/locomo/{name}/session-{n}/turn-{k}'
                body = t['text']
                if isinstance(t.get('blip_caption'), str):
                    body += ' [shares a photo: ' + t['blip_caption'] + ']'
                d = dict(uri=uri, speaker=t['speaker'], body=body, session=n, k=k, conv=name,
                         text=t['speaker'] + ' (' + date + '): ' + body, idx=len(lst))
                turns[uri] = d
                lst.append(uri)
            n += 1
        order[name] = lst
    return turns, order

def load_pq(path=PQ):
    return [json.loads(l) for l in open(path)]

def recall(ranked, evidence, k):
    s = set(ranked[:k])
    return sum(1 for e in evidence if e in s) / len(evidence)

def evaluate(qs, rankings):
    """rankings: list parallel to qs. returns dict key->(r5, r10, n) for all, cats, convs."""
    acc = defaultdict(lambda: [0.0, 0.0, 0])
    for q, r in zip(qs, rankings):
        r5, r10 = recall(r, q['evidence'], 5), recall(r, q['evidence'], 10)
        for key in ('all', CATS[q['category']], 'c' + q['conversation']):
            a = acc[key]; a[0] += r5; a[1] += r10; a[2] += 1
    return {k: (v[0] / v[2], v[1] / v[2], v[2]) for k, v in acc.items()}

KEYS = ['all', 'multi', 'temporal', 'open', 'single', 'c26', 'c30', 'c41', 'c42', 'c43']

def fmt(res, base=None):
    out = []
    for k in KEYS:
        r5, r10, n = res[k]
        if base is None:
            out.append(f'{k} {r5:.3f}/{r10:.3f}')
        else:
            out.append(f'{k} {r5-base[k][0]:+.3f}/{r10-base[k][1]:+.3f}')
    return '  '.join(out)

def fmt_header(res):
    return fmt(res)
