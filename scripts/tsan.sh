#!/usr/bin/env bash
# Builds nlccl with ThreadSanitizer into build-tsan and runs the tests whose ranks are threads of
# one process, over loopback and over the neuronlink transport (its shared clock is the most
# concurrent code we have). ThreadSanitizer needs address-space randomisation off on this
# kernel, hence setarch -R (inherited by everything ctest starts, and by the test discovery the
# build runs). Extra arguments go to ctest.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/deps.sh
build=${NLCCL_TSAN_BUILD_DIR:-build-tsan}
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DNLCCL_TSAN=ON
setarch "$(uname -m)" -R cmake --build "$build" -j "$(nproc)"
export TSAN_OPTIONS=${TSAN_OPTIONS:-halt_on_error=1:second_deadlock_stack=1}
cd "$build"
# Left out as in sanitize.sh, among others: tests that fork while another thread of the test
# process runs (BootstrapProcess.*, ForkDuringHandshakeCryptography*).
if [ $# -eq 0 ]; then
  set -- -L "unit|multirank" -E "Process|SingleCopy|Bitwise|Killed|ShmTransport|collectives_suite|algorithms_suite|ForkDuringHandshakeCryptography"
fi
setarch "$(uname -m)" -R ctest --output-on-failure --timeout 900 -j 2 "$@"
