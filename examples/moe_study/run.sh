#!/usr/bin/env bash
# The MoE study (docs/fabric.md, "MoE studies"): the modelled table over skew, top-k and
# algorithm, then the same generator's counts run for real with nlcclAlltoAllv over shm by 4
# processes (nlccl-perf alltoallv --moe; every element checked, #wrong must be 0).
#   examples/moe_study/run.sh [BUILD_DIR] [moe_study flags...]
set -euo pipefail
build=${1:-build}
shift || true
"$build/examples/moe_study" "$@"
echo
echo "# the same routing (4 ranks, 2 experts each) run for real: nlccl-perf -np 4 alltoallv --moe"
printf "| %4s | %2s | %12s | %10s | %6s |\n" s k "size (B)" "time (us)" "#wrong"
for s in 0 0.5 1 1.5; do
  for k in 1 2 8; do
    dist=uniform
    [[ $s == 0 ]] || dist=zipf:$s
    out=$("$build/bench/perf/nlccl-perf" alltoallv -np 4 -b 4M -e 4M -n 5 -w 2 -d bfloat16 \
          --moe "tokens=2048,topk=$k,experts=8,dist=$dist")
    line=$(grep -v '^#' <<<"$out" | awk 'NF >= 9 {print $1, $6, $9; exit}')
    read -r size time wrong <<<"$line"
    printf "| %4s | %2s | %12s | %10s | %6s |\n" "$s" "$k" "$size" "$time" "$wrong"
    [[ $wrong == 0 ]] || { echo "wrong results"; exit 1; }
  done
done
