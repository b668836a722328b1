#!/usr/bin/env bash
# Builds the consumer with nothing but the compiler and `pkg-config --cflags --libs tracetree`, the
# way a Makefile-based project would; PKG_CONFIG_PATH must point at the installed .pc file.
# Usage: build.sh OUTPUT [CXX]
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
out=$1
cxx=${2:-${CXX:-c++}}
# Word splitting of the pkg-config output is intended: it is a list of flags.
# shellcheck disable=SC2046
"$cxx" -std=c++17 -Wall -Wextra -Wpedantic -Wshadow -Wconversion -Wold-style-cast -Wundef -Werror \
    -o "$out" "$here/main.cpp" $(pkg-config --cflags --libs tracetree)
