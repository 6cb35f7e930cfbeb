#!/bin/sh
# nlccl-sim moe writes the issue's JSON fields, refuses bad flags naming them, and --heatmap
# writes a PNG (that part skipped when no python3 has matplotlib).
sim=$1
d=$(mktemp -d)
trap 'rm -rf "$d"' EXIT
set -e
"$sim" moe -t flat:8 --tokens 256 --hidden 512 --topk 2 --dist hot:4:1 --capacity-factor 1.5 \
  --algo auto --json "$d/moe.json" >"$d/out.txt"
grep -q "dispatch" "$d/out.txt" && grep -q "combine" "$d/out.txt"
python3 - "$d/moe.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
for k in ("dispatch_us", "combine_us", "bound_us", "efficiency", "imbalance", "dropped_tokens",
          "bytes", "algorithm"):
    assert k in d, k
for p in ("dispatch", "combine"):
    assert 0 < d["bound_us"][p] <= d["%s_us" % p] * (1 + 1e-9), (p, d)
    assert d["algorithm"][p] in ("direct", "hier"), d["algorithm"]
    assert set(d["candidates_us"][p]) == {"direct", "hier"}
assert d["dropped_tokens"] > 0, d["dropped_tokens"]
PY
"$sim" moe -t flat:8 --tokens 64 --hidden 64 --algo direct,hier --json "$d/ab.json" >/dev/null
python3 -c 'import json,sys; a=json.load(open(sys.argv[1]))["algorithm"]; assert a == {"dispatch": "direct", "combine": "hier"}, a' "$d/ab.json"
# Dispatch and combine on two threads (-j 2, the default on two CPUs) print what one thread does.
for j in 1 2; do
  "$sim" moe -t flat:16 --tokens 256 --hidden 512 --topk 4 --dist zipf:1 -j $j --json "$d/j$j.json" \
    >"$d/j$j.txt"
done
cmp "$d/j1.txt" "$d/j2.txt"
python3 - "$d/j1.json" "$d/j2.json" <<'PY'
import json, sys
a, b = (json.load(open(f)) for f in sys.argv[1:])
for d in (a, b):
    d.pop("wall_s")  # the one field that differs
assert a == b, "-j 1 and -j 2 differ"
PY
if "$sim" moe --tokens 4 --hidden 4 -j 3 >/dev/null 2>"$d/err"; then exit 1; fi
grep -q -- "--jobs" "$d/err"
if "$sim" moe --tokens 4 --hidden 4 --dist zipf:x >/dev/null 2>"$d/err"; then exit 1; fi
grep -q "zipf" "$d/err"
if "$sim" moe --tokens 4 --hidden 4 --algo ring >/dev/null 2>"$d/err"; then exit 1; fi
grep -q -- "--algo" "$d/err"
if python3 -c 'import matplotlib' 2>/dev/null || /usr/bin/python3 -c 'import matplotlib' 2>/dev/null; then
  "$sim" moe -t flat:8 --tokens 64 --hidden 64 --topk 2 --heatmap "$d/hm.png" >/dev/null
  head -c 8 "$d/hm.png" | od -An -c | grep -q "P   N   G" || { echo "no PNG"; exit 1; }
  echo "json fields and heat map ok"
else
  echo "json fields ok; heat map skipped (no matplotlib)"
fi
