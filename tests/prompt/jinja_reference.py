# Differential test of Strata's Jinja2 engine against Python's Jinja2 (Debian's python3-jinja2): every
# template of ../shared/conformance/prompts (with its variables and declared defaults) plus the cases below
# are rendered by both; the output must be byte-identical, and both must fail on the same inputs.
# Usage: jinja_reference.py RENDER_TOOL CONFORMANCE_DIR
import json, glob, os, subprocess, sys, tempfile, yaml, jinja2
RENDER, CONFORMANCE = sys.argv[1], sys.argv[2]
TMP = tempfile.mkdtemp()
ok = bad = 0
def check(name, tpl, vars):
    global ok, bad
    t, v = os.path.join(TMP, 't.txt'), os.path.join(TMP, 'v.json')
    open(t, 'w').write(tpl); open(v, 'w').write(json.dumps(vars))
    try: want = jinja2.Template(tpl).render(**vars); werr=None
    except Exception as e: want=None; werr=repr(e)
    r = subprocess.run([RENDER, t, v], capture_output=True, text=True)
    got = r.stdout if r.returncode==0 else None
    if (want is None and got is None) or want == got: ok += 1
    else:
        bad += 1; print('MISMATCH', name, repr(want)[:300], '| got', repr(got)[:300], r.stderr[:200], werr)
for f in sorted(glob.glob(os.path.join(CONFORMANCE, 'prompts', '*.json'))):
    d = json.load(open(f)); y = yaml.safe_load(d['template_yaml'])
    vars = dict(d['vars'])
    for v in y.get('variables', []):
        if v.get('name') not in vars and v.get('default') is not None: vars[v['name']] = v['default']
    check(d['id'], y['template'], vars)
extra = [
 ("{{ 7 // 2 }} {{ -7 // 2 }} {{ 7 % -3 }} {{ 2 ** 10 }} {{ 1 / 3 }} {{ 10 / 2 }}", {}),
 ("{% for k, v in d.items() %}{{ loop.index }}:{{ k }}={{ v }}{{ ',' if not loop.last }}{% endfor %}", {"d": {"a": 1, "b": [1, 'x']}}),
 ("{{ x|tojson }} {{ x }} {{ 'it''s' }} {{ [1,2,3][1:] }} {{ 'abc'[::-1] }}", {"x": {"b": 1, "a": [1.5, None, True, "é<"]}}),
 ("{%- set ns = namespace(n=0) -%}{% for i in range(5) if i is odd %}{% set ns.n = ns.n + i %}{% endfor %}{{ ns.n }}", {}),
 ("{% macro greet(name, punct='!') %}Hi {{ name }}{{ punct }}{% endmacro %}{{ greet('Ada') }} {{ greet('Bob', punct='?') }}", {}),
 ("{{ '%s has %d items (%.2f%%)'|format('cart', 3, 12.345) }} {{ '{:>6}|{:.1f}'.format('ab', 2.25) }}", {}),
 ("{{ items|map(attribute='n')|join(', ') }} {{ items|selectattr('n', 'gt', 1)|list|length }} {{ items|sort(attribute='n', reverse=true)|first }}", {"items": [{"n": 2}, {"n": 1}, {"n": 3}]}),
 ("{{ 'hello world'|title }} {{ 'ÉCOLE straße'|lower }} {{ 'straße'|upper }} {{ long|truncate(20) }} {{ 'a b  c'|wordcount }}", {"long": "the quick brown fox jumps over the lazy dog"}),
 ("{% filter upper %}shout {{ x }}{% endfilter %} {% set b %}block {{ x }}{% endset %}[{{ b }}]", {"x": "it"}),
 ("  {% if true %}\n  yes\n  {% endif %}\n{# c #}\n{{- '  trimmed' }}\n", {}),
 ("{{ 3.0 }} {{ 1e20 }} {{ 0.1 + 0.2 }} {{ 2.5|round }} {{ 3.14159|round(2) }} {{ 7|float }} {{ '42'|int + 1 }} {{ none }} {{ true }}", {}),
 ("{{ text|indent(2) }}|{{ text|indent(2, true) }}", {"text": "a\nb\n\nc"}),
 ("{% for x in [] %}x{% else %}empty{% endfor %} {{ [3,1,2]|sort|join }} {{ ['b','A','a']|unique|list }} {{ {'b':1,'a':2}|dictsort }}", {}),
 ("{{ x is defined }} {{ y is not defined }} {{ 4 is divisibleby 2 }} {{ 'a' in 'cat' }} {{ 1 in [1,2] }} {{ none is none }}", {"x": 1}),
 ("{{ ghost.attr }}", {}),
 ("{% for i in x %}{% endfor %}", {"x": 5}),
]
for i,(t,v) in enumerate(extra): check('extra%d'%i, t, v)
print(ok, 'identical,', bad, 'different')
if ok < 30: print('too few cases ran'); sys.exit(1)
sys.exit(1 if bad else 0)
