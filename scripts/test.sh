#!/usr/bin/env bash
# Builds nlccl and runs the default test suite (everything not labelled "slow").
# Extra arguments go to ctest, e.g. scripts/test.sh -L slow for the long sweeps.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/build.sh
build=${NLCCL_BUILD_DIR:-build}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
cd "$build"
if [ $# -eq 0 ]; then set -- -LE slow; fi
ctest --output-on-failure --timeout 300 -j 2 "$@"
