#!/usr/bin/env bash
# Builds nlccl with AddressSanitizer and UndefinedBehaviorSanitizer into build-asan and runs the
# tests that stay in one process (forked-process and mpirun tests are left out: forking after the
# bootstrap's thread starts is not safe under ASan's allocator, and Open MPI's own leaks would be
# reported). Extra arguments go to ctest.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/deps.sh
build=${NLCCL_ASAN_BUILD_DIR:-build-asan}
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Debug -DNLCCL_SANITIZE=ON
cmake --build "$build" -j "$(nproc)"
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=0}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
cd "$build"
if [ $# -eq 0 ]; then set -- -LE "slow|multiprocess|packaging" -E "Process|SingleCopy|Bitwise|Killed|ShmTransport"; fi
ctest --output-on-failure --timeout 600 -j 2 "$@"
