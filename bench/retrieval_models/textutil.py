"""Crude tokenisation, stems and question classes for the issue-32 models."""
import re
STOP = set("""a an the and or but if of to in on at by for with from as is are was were be been being am do does did done
has have had having i me my mine we us our you your he him his she her it its they them their this that these those
what which who whom whose when where why how would could should might may can will shall not no yes so than then there
here about into over after before during also just some any all both each more most other such only own same too very
s t don doesn didn isn wasn like really much many one get got go going gone went make made thing things lot lots
ever still even way well back up out off down again further once""".split())

def words(text):
    return re.findall(r"[a-z0-9]+", text.lower())

def stem(w):
    for suf in ('ational', 'ations', 'ation', 'ings', 'ing', 'ies', 'ied', 'ers', 'er', 'ed', 'es', 'ly', 's'):
        if w.endswith(suf) and len(w) - len(suf) >= 3:
            w = w[: -len(suf)]
            if suf in ('ies', 'ied'):
                w += 'y'
            break
    return w[:6]

def content_stems(text, drop=()):
    return {stem(w) for w in words(text) if w not in STOP and w not in drop and len(w) > 2}

LIST_RE = re.compile(r"^(what|which)\s+(\w+\s+){0,3}?(\w+s)\s+(has|have|does|do|did|is|are|was|were)\b|"
                     r"^what\s+are\b|^how many\b|^what\s+(kind|kinds|types?|sorts?)\s+of\b", re.I)

def is_list_question(q):
    return bool(LIST_RE.search(q.strip()))

ACT_RE = re.compile(r"\b(activit\w*|hobb\w*|do(es)?\s+\w+\s+(do|like|enjoy)|sports?|exercis\w*|interests?|"
                    r"do(es)?\s+(\w+\s+){1,3}do\s+to|partake|outdoor|pastime\w*|fun|relax\w*|destress\w*|de-stress)\b", re.I)

def is_activity_question(q):
    return bool(ACT_RE.search(q))

def names_in(q, speakers):
    ql = q.lower()
    return [s for s in speakers if re.search(r"\b" + re.escape(s.lower()) + r"\b", ql)]
