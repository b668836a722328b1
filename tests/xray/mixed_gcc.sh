#!/usr/bin/env bash
# What docs/xray.md offers g++ users: a g++ program whose files to trace (and one file including
# tracetree/xray/xray.hpp) are built by clang++ with XRay, linked by g++ with clang's XRay runtime added.
# Builds it in a temporary folder and runs mixed_main.cpp's checks.
#   mixed_gcc.sh SOURCE_ROOT GXX CLANGXX
set -euo pipefail
root=$1 gxx=$2 clangxx=$3
here=$root/tests/xray
work=$(mktemp -d "${TMPDIR:-/tmp}/tracetree-xray-mixed-XXXXXX")
trap 'rm -rf "$work"' EXIT
flags=(-std=c++17 -O0 -I"$root/include" -Wall -Wextra -Wpedantic -Wshadow -Wconversion -Wold-style-cast -Wundef -Werror)
runtime=$("$clangxx" -print-runtime-dir)/libclang_rt.xray-x86_64.a
# 77: meson reports SKIP, with this reason in the log
[ -f "$runtime" ] || { echo "skipped: no XRay runtime at $runtime: apt-get install libclang-rt-14-dev"; exit 77; }
set -x
"$clangxx" "${flags[@]}" -fxray-instrument -fxray-instruction-threshold=1 -c "$here/traced_code.cpp" -o "$work/traced_code.o"
"$clangxx" "${flags[@]}" -fxray-instrument -c "$here/mixed_hook.cpp" -o "$work/mixed_hook.o"
"$gxx" "${flags[@]}" -c "$here/mixed_main.cpp" -o "$work/mixed_main.o"
"$gxx" "$work/mixed_main.o" "$work/traced_code.o" "$work/mixed_hook.o" -o "$work/mixed" -pthread -ldl \
  -Wl,--whole-archive "$runtime" -Wl,--no-whole-archive -lrt -lm
set +x
"$work/mixed"
