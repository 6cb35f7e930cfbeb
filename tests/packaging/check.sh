#!/usr/bin/env bash
# Installs the build tree into a temporary prefix, then builds against it: a C program with
# find_package(nlccl) and with pkg-config, a C++ simulator program with nlccl::sim and with
# pkg-config nlccl-sim, and every public header alone (so none needs an internal one). Also checks
# that libnlccl.so exports only nlccl* symbols.
set -euo pipefail
build=$1
src=$(cd "$(dirname "$0")" && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cmake --install "$build" --prefix "$tmp/prefix" >/dev/null
lib=$(ls "$tmp"/prefix/lib*/libnlccl.so)
bad=$(nm -D --defined-only "$lib" | awk '$2 ~ /[TDBRW]/ {print $3}' | grep -v '^nlccl' || true)
if [ -n "$bad" ]; then echo "symbols exported beyond nlccl*:"; echo "$bad" | head; exit 1; fi
# Every function nlccl.h declares is exported (a declared but missing entry point breaks ports).
# (A here-string, not `echo | grep -q`: grep -q exits at the first match, echo then dies of SIGPIPE
# and pipefail turned that into a "missing" symbol now and then.)
syms=$(nm -D --defined-only "$lib" | awk '{print $3}')
missing=$(grep -oE '^(nlcclResult_t|const char\*|void) +nlccl[A-Za-z0-9]+' \
            "$tmp/prefix/include/nlccl.h" | awk '{print $NF}' | while read -r f; do
            grep -qx "$f" <<<"$syms" || echo "$f"; done)
if [ -n "$missing" ]; then echo "declared in nlccl.h but not exported: $missing"; exit 1; fi
# nccl-tests' names are installed as links to nlccl-perf.
if [ -e "$tmp/prefix/bin/nlccl-perf" ] && [ ! -L "$tmp/prefix/bin/all_reduce_perf" ]; then
  echo "all_reduce_perf is not installed as a link to nlccl-perf"; exit 1
fi
cmake -S "$src/consumer" -B "$tmp/cm" -DCMAKE_PREFIX_PATH="$tmp/prefix" >/dev/null
cmake --build "$tmp/cm" >/dev/null
libdir=$(dirname "$lib")
LD_LIBRARY_PATH=$libdir "$tmp/cm/consumer"
LD_LIBRARY_PATH=$libdir "$tmp/cm/sim_consumer"
export PKG_CONFIG_PATH=$libdir/pkgconfig
cc -std=c99 "$src/consumer/main.c" -o "$tmp/pc" $(pkg-config --cflags --libs nlccl)
LD_LIBRARY_PATH=$libdir "$tmp/pc"
c++ "$src/consumer/sim_main.cpp" -o "$tmp/pcsim" $(pkg-config --cflags --libs nlccl-sim)
LD_LIBRARY_PATH=$libdir "$tmp/pcsim" >/dev/null
n=0
for h in "$tmp"/prefix/include/nlccl/*.hpp; do
  echo "#include <nlccl/$(basename "$h")>" > "$tmp/alone.cpp"
  c++ -std=c++20 -fsyntax-only -I"$tmp/prefix/include" "$tmp/alone.cpp" \
    || { echo "public header $(basename "$h") does not compile alone"; exit 1; }
  n=$((n + 1))
done
[ "$n" -ge 4 ] || { echo "only $n public headers installed"; exit 1; }
echo "packaging: 4 programs and $n public headers passed, 0 failed"
