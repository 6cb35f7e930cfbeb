#!/bin/sh
# bench/plot/nlccl-plot turns an nlccl-perf -J file (with its modelled series) and an nlccl-sim
# --json file into two non-empty PNGs. Exit 77 (skipped) when no python3 has matplotlib.
plot=$1 perf=$2 sim=$3
python3 -c 'import matplotlib' 2>/dev/null || /usr/bin/python3 -c 'import matplotlib' 2>/dev/null ||
  { echo "matplotlib missing: skipped"; exit 77; }
d=$(mktemp -d)
trap 'rm -rf "$d"' EXIT
set -e
NLCCL_TRANSPORT=neuronlink NLCCL_NEURONLINK_REALTIME=0 \
  "$perf" allreduce -t 2 -b 1K -e 64K -f 8 -n 2 -w 1 -J "$d/perf.json" >/dev/null
"$sim" allreduce -n 2 -b 1K -e 64K -f 8 --json "$d/sim.json" >/dev/null
"$plot" -o "$d/out" --title test "$d/perf.json=measured" "$d/sim.json"
for f in "$d/out-busbw.png" "$d/out-time.png"; do
  [ -s "$f" ] || { echo "missing $f"; exit 1; }
  head -c 8 "$f" | od -An -c | grep -q "P   N   G" || { echo "$f is not a PNG"; exit 1; }
done
echo "plots written"
