#!/usr/bin/env bash
# Builds nlccl and runs the main job on local ranks: the C all-reduce example over threads, then
# nlccl-perf's all-reduce sweep on 4 processes.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/build.sh
build=${NLCCL_BUILD_DIR:-build}
"$build/examples/01-allreduce-threads" 4
if [ -x "$build/bench/perf/nlccl-perf" ]; then
  "$build/bench/perf/nlccl-perf" allreduce -np 4 -b 8 -e 64M -f 4
fi
