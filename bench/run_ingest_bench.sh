#!/usr/bin/env bash
# Ingestion throughput (docs/PERFORMANCE.md, "Documents and code in"): `strata memory add` on a real tree
# nobody here wrote — by default the documentation Debian's packages install beside their programs,
# /usr/share/doc — timed as a whole process: the first add, then the same add again (nothing changed). Beside
# it, in the same run, the plain text extraction tools on the very files Strata added: pdftotext (poppler-
# utils) for PDFs, html2text for HTML, cat for the rest. Strata's figure also covers chunking, token counting,
# embedding (the local embedder) and the durable SQLite writes; the tools' only the text.
# Usage: bench/run_ingest_bench.sh [TREE]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
source "$root/scripts/lib.sh"
strata_install "${STRATA_PACKAGES[@]}" poppler-utils html2text time
strata_build dev strata >&2
tree=${1:-/usr/share/doc}
work=$(mktemp -d "${TMPDIR:-/tmp}/strata-ingest-XXXXXX")
trap 'rm -rf "$work"' EXIT
strata="$root/build/bin/strata"

run() {  # run NAME COMMAND...: wall seconds and peak RSS (KiB) of one process, into $work/NAME.time
  /usr/bin/time -f "%e %M" -o "$work/$1.time" "${@:2}"
}
run first "$strata" memory --data "$work/data" add "$tree" --uri strata://resources/doc >"$work/first.json" 2>/dev/null
run again "$strata" memory --data "$work/data" add "$tree" --uri strata://resources/doc >"$work/again.json" 2>/dev/null
read -r first_s first_kb <"$work/first.time"
read -r again_s again_kb <"$work/again.time"

# The files Strata added, by the tool that extracts their text.
python3 - "$work/first.json" "$tree" "$work" <<'PY'
import json, os, sys
report, tree, work = json.load(open(sys.argv[1])), sys.argv[2], sys.argv[3]
groups = {"pdf": [], "html": [], "text": []}
for path in report["added"]:
    ext = path.rsplit(".", 1)[-1].lower() if "." in path.rsplit("/", 1)[-1] else ""
    kind = "pdf" if ext == "pdf" else "html" if ext in ("html", "htm", "xhtml") else "text"
    groups[kind].append(os.path.join(tree, path))
for kind, files in groups.items():
    with open(os.path.join(work, kind + ".list"), "wb") as f:
        f.write(b"".join(p.encode() + b"\0" for p in files))
PY
peer_start=$(date +%s.%N)
xargs -0 -r -a "$work/pdf.list" -n 1 sh -c 'pdftotext -q "$0" - >/dev/null 2>&1 || true'
xargs -0 -r -a "$work/html.list" -n 1 sh -c 'html2text "$0" >/dev/null 2>&1 || true'
xargs -0 -r -a "$work/text.list" cat >/dev/null
peer_end=$(date +%s.%N)

python3 - "$work" "$first_s" "$first_kb" "$again_s" "$again_kb" "$peer_start" "$peer_end" "$tree" <<'PY'
import json, os, sys
work, first_s, first_kb, again_s, again_kb, p0, p1, tree = sys.argv[1:]
first = json.load(open(work + "/first.json"))
again = json.load(open(work + "/again.json"))
files = len(first["added"])
mb = sum(os.path.getsize(os.path.join(tree, p)) for p in first["added"]) / 1e6  # The added files' bytes.
first_s, again_s, peer_s = float(first_s), float(again_s), float(p1) - float(p0)
skipped = {}
for s in first["skipped"]:
    reason = s["reason"].split(" (")[0].split(":")[0]
    skipped[reason] = skipped.get(reason, 0) + 1
counts = {k: len(open(f"{work}/{k}.list", "rb").read().split(b"\0")) - 1 for k in ("pdf", "html", "text")}
print(json.dumps({
    "tree": tree, "files_added": files, "by_tool": counts, "chunks": first["chunks"], "mb_added": round(mb, 1),
    "mb_read": round(first["bytes"] / 1e6, 1),
    "skipped": skipped,
    "strata_first_add": {"s": round(first_s, 2), "files_per_s": round(files / first_s, 1),
                         "mb_per_s": round(mb / first_s, 2), "peak_rss_mb": round(int(first_kb) / 1024)},
    "strata_unchanged_add": {"s": round(again_s, 2), "unchanged": len(again["unchanged"]),
                             "chunks_written": again["chunks"]},
    "extraction_tools": {"s": round(peer_s, 2), "files_per_s": round(files / peer_s, 1) if peer_s else None,
                         "mb_per_s": round(mb / peer_s, 2) if peer_s else None},
}, indent=1))
PY
