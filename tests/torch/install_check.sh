#!/usr/bin/env bash
# Installs the build tree into a temporary prefix and imports nlccl_torch from there (with no
# build-tree paths): the package must load the installed libnlccl.so through its RPATH and run a
# one-rank group. Usage: install_check.sh BUILD_DIR PYTHON
set -euo pipefail
build=$1
py=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cmake --install "$build" --prefix "$tmp/prefix" >/dev/null
pkg=$(find "$tmp/prefix" -type d -name nlccl_torch)
[ -n "$pkg" ] || { echo "nlccl_torch was not installed"; exit 1; }
echo "installed: ${pkg#$tmp/prefix/}"
cd "$tmp"
PYTHONPATH=$(dirname "$pkg") "$py" - "$tmp/prefix" <<'PY'
import datetime, sys, tempfile
import torch, torch.distributed as dist
import nlccl_torch
prefix = sys.argv[1]
assert nlccl_torch.__file__.startswith(prefix), nlccl_torch.__file__
libs = [l.split()[-1] for l in open("/proc/self/maps") if "libnlccl.so" in l]
assert libs and all(l.startswith(prefix) for l in libs), libs
store = dist.FileStore(tempfile.mktemp(dir="."), 1)
dist.init_process_group("nlccl", store=store, rank=0, world_size=1,
                        timeout=datetime.timedelta(seconds=30))
t = torch.arange(4.0)
dist.all_reduce(t)
assert t.tolist() == [0.0, 1.0, 2.0, 3.0], t
dist.destroy_process_group()
print("import nlccl_torch from the install prefix: ok (libnlccl from %s)" % libs[0])
PY
