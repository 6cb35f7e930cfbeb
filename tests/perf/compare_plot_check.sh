#!/bin/sh
# bench/perf/nlccl-compare --json (medians of launches, with a memcpy_bw bound, with Open MPI over
# vader and over tcp) read by bench/plot/nlccl-plot: the three series it holds come out, with the
# sizes they should have, as two PNGs. Exit 77 (skipped) without matplotlib.
compare=$1 plot=$2 perf=$3
python3 -c 'import matplotlib' 2>/dev/null || /usr/bin/python3 -c 'import matplotlib' 2>/dev/null ||
  { echo "matplotlib missing: skipped"; exit 77; }
d=$(mktemp -d)
trap 'rm -rf "$d"' EXIT
set -e
# memcpy_bw's FINAL table: size, then memcpy_2t in column 4 and reduce3_2t in column 8.
printf '# FINAL\n1048576 0 0 10 0 0 0 20\n4194304 0 0 10 0 0 0 20\n' >"$d/bw.txt"
python3 "$compare" -np 2 -L 2 --perf "$perf" --bound "$d/bw.txt" --json "$d/shm.json" -- \
  allreduce -b 512K -e 2M -f 2 -n 2 -w 1 >"$d/shm.txt"
python3 "$compare" -np 2 -L 1 --perf "$perf" --btl self,tcp --env NLCCL_TRANSPORT=ofi \
  --env FI_PROVIDER=tcp --env FI_TCP_IFACE=lo --json "$d/ofi.json" -- \
  sendrecv -b 8 -e 64 -f 8 -n 2 -w 1 >"$d/ofi.txt"
"$plot" -o "$d/out" --title test "$d/shm.json" "$d/ofi.json=ofi" >"$d/plot.txt"
cat "$d/shm.txt" "$d/ofi.txt" "$d/plot.txt"
# 6.67 GB/s: 1 / (1/20 + 1/10), from 1 MiB (the bound starts there).
grep -q '^ *1048576 .* 6\.67 ' "$d/shm.txt" || { echo "no bound at 1 MiB"; exit 1; }
# 2 MiB lies between memcpy_bw's sizes: its bound is interpolated, and the output says so.
grep -q '^# bound not measured at 2097152 B' "$d/shm.txt" || { echo "no interpolation note"; exit 1; }
for want in "series nlccl allreduce, 2 ranks, median of 2 launches (measured, 3 sizes)" \
            "series MPI allreduce, 2 ranks, median of 2 launches (mpi, 3 sizes)" \
            "series memory-traffic bound (bound, 2 sizes)" \
            "series ofi (measured, 2 sizes)" "series ofi MPI (mpi, 2 sizes)"; do
  grep -qF "$want" "$d/plot.txt" || { echo "missing: $want"; exit 1; }
done
for f in "$d/out-busbw.png" "$d/out-time.png"; do
  [ -s "$f" ] || { echo "missing $f"; exit 1; }
  head -c 8 "$f" | od -An -c | grep -q "P   N   G" || { echo "$f is not a PNG"; exit 1; }
done
echo "medians plotted"
