#!/usr/bin/env bash
# Builds nlccl with AddressSanitizer and UndefinedBehaviorSanitizer into build-asan and runs the
# unit, thread and forked-process tests under them (the forked ranks fork before any thread
# starts, so ASan's allocator is safe in them). Left out: the slow sweeps, the mpirun tests (Open
# MPI's own leaks would be reported), the packaging test (it installs and builds a consumer
# without the sanitizer runtime), the torch backend (it runs inside a Python interpreter that is
# not built with ASan), the fuzz target (already built with ASan and run in the default pass) and
# BootstrapProcess.* and BootstrapAuth.ForkDuringHandshakeCryptography* (they fork while another
# thread of the test process runs: the bootstrap root as its forked ranks die, or the handshake's
# cryptography, which ASan's allocator does not survive). Extra arguments go to ctest.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/deps.sh
build=${NLCCL_ASAN_BUILD_DIR:-build-asan}
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Debug -DNLCCL_SANITIZE=ON -DNLCCL_WITH_TORCH=OFF \
  -DNLCCL_BUILD_BENCH=ON
cmake --build "$build" -j "$(nproc)"
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=0}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
cd "$build"
if [ $# -eq 0 ]; then set -- -LE "slow|packaging|torch|fuzz|mpirun" -E "BootstrapProcess|ForkDuringHandshakeCryptography"; fi
ctest --output-on-failure --timeout 600 -j 2 "$@"
