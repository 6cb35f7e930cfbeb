#!/usr/bin/env bash
# Installs the build tree into a temporary prefix, then builds a C program against it twice:
# with find_package(nlccl) and with pkg-config. Also checks that only nlccl* symbols are exported.
set -euo pipefail
build=$1
src=$(cd "$(dirname "$0")" && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cmake --install "$build" --prefix "$tmp/prefix" >/dev/null
lib=$(ls "$tmp"/prefix/lib*/libnlccl.so)
bad=$(nm -D --defined-only "$lib" | awk '$2 ~ /[TDBRW]/ {print $3}' | grep -v '^nlccl' || true)
if [ -n "$bad" ]; then echo "symbols exported beyond nlccl*:"; echo "$bad" | head; exit 1; fi
cmake -S "$src/consumer" -B "$tmp/cm" -DCMAKE_PREFIX_PATH="$tmp/prefix" >/dev/null
cmake --build "$tmp/cm" >/dev/null
LD_LIBRARY_PATH=$(dirname "$lib") "$tmp/cm/consumer"
PKG_CONFIG_PATH=$(dirname "$lib")/pkgconfig cc -std=c99 "$src/consumer/main.c" -o "$tmp/pc" \
  $(PKG_CONFIG_PATH=$(dirname "$lib")/pkgconfig pkg-config --cflags --libs nlccl)
LD_LIBRARY_PATH=$(dirname "$lib") "$tmp/pc"
echo "packaging: 2 passed, 0 failed"
