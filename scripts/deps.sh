#!/usr/bin/env bash
# Installs the Debian 12 packages nlccl builds and tests with, when any is missing.
set -euo pipefail
pkgs=(build-essential cmake ninja-build pkg-config libgtest-dev libgmock-dev libbenchmark-dev
      libasio-dev libfabric-dev libfabric-bin libhwloc-dev openmpi-bin libopenmpi-dev
      nlohmann-json3-dev libcli11-dev libssl-dev python3 python3-matplotlib
      python3-torch libtorch-dev pybind11-dev python3-dev)
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "nlccl: installing missing packages: ${missing[*]}"
  sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${missing[@]}"
fi
