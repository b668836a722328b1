#!/usr/bin/env bash
# Every build and scratch folder of the scripts belongs to the tree they run from (issue 16).
#
# Copy A of this tree (as a clone with the uncommitted changes has it) runs scripts/load-test and the
# matcher fuzzer, by default in its own build/ and once more with TRACETREE_FUZZ_DIR set to a folder
# outside. Then A is copied with its build folders to B (a tree handed on as it is), A is deleted,
# and B runs the same. B must pass, and must have built B: each copy compiles in a marker of its own,
# and B's binaries, in B's build/ and in the shared folder, must hold B's marker and not A's. The
# scripts' temporary folders (TMPDIR) must all be gone when they exit.
#
# A fixed folder shared by every tree (the old /tmp/tracetree-load) fails here: B either builds in a
# folder configured for the deleted A (meson fails) or leaves no server in its own build/.
# Usage: tests/scripts/two-clones.sh   (scripts/test --platforms runs it; about 3 minutes on 2 cores)
set -euo pipefail

root=$(cd "$(dirname "$0")/../.." && pwd)
# shellcheck source=scripts/lib/tree.sh
. "$root/scripts/lib/tree.sh"
work=$(mktemp -d "${TMPDIR:-/tmp}/tracetree-two-clones.XXXXXX")
trap 'rm -rf "$work"' EXIT
fail() { echo "two-clones: FAIL: $*" >&2; exit 1; }

export TMPDIR=$work/tmp  # every scratch folder the scripts make goes here
mkdir "$TMPDIR"
unset TRACETREE_LOAD_DIR TRACETREE_FUZZ_DIR  # the defaults are under test
a=$work/clone-a
b=$work/clone-b
shared_fuzz=$work/shared-fuzz
marker_a="tracetree-clone-marker-A-$$-$RANDOM"
marker_b="tracetree-clone-marker-B-$$-$RANDOM"

mark() {  # TREE MARKER: compiles MARKER into the tree's demo server and matcher fuzzer
    local f
    for f in examples/demo/main.cpp fuzz/fuzz_matcher.cpp; do
        sed -i '/tracetree_clone_marker/d' "$1/$f"
        printf 'extern "C" const char tracetree_clone_marker[] = "%s";\n' "$2" >>"$1/$f"
    done
}

run() {  # TREE LABEL: the scripts under test, from TREE as its user would run them
    local tree=$1 label=$2 start=$SECONDS
    echo "two-clones: $label: scripts/load-test and scripts/fuzz (matcher) from $tree"
    (cd "$tree" && scripts/load-test --seconds 1) >"$work/$label.load.log" 2>&1 \
        || { tail -n 30 "$work/$label.load.log" >&2; fail "$label: scripts/load-test failed"; }
    (cd "$tree" && scripts/fuzz --seconds 1 --target matcher) >"$work/$label.fuzz.log" 2>&1 \
        || { tail -n 30 "$work/$label.fuzz.log" >&2; fail "$label: scripts/fuzz failed"; }
    (cd "$tree" && TRACETREE_FUZZ_DIR=$shared_fuzz scripts/fuzz --seconds 1 --target matcher) \
        >"$work/$label.fuzz-shared.log" 2>&1 \
        || { tail -n 30 "$work/$label.fuzz-shared.log" >&2; fail "$label: scripts/fuzz with TRACETREE_FUZZ_DIR failed"; }
    local left
    left=$(find "$TMPDIR" -mindepth 1 -maxdepth 1 | head -n 5)
    [[ -z $left ]] || fail "$label: the scripts left temporary files: $left"
    echo "two-clones: $label: passed ($((SECONDS - start)) s)"
}

holds() {  # BINARY MARKER [NOT-MARKER]: BINARY exists and was compiled with MARKER (and not NOT-MARKER)
    [[ -x $1 ]] || fail "no $1"
    grep -qaF "$2" "$1" || fail "$1 was not built from its tree (no $2 in it)"
    [[ -z ${3:-} ]] || ! grep -qaF "$3" "$1" || fail "$1 holds $3: built from the other tree"
}

configured_for() {  # BUILD: the source folder meson configured BUILD for
    python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["directories"]["source"])' \
        "$1/meson-info/meson-info.json"
}

tree_copy "$a"
mark "$a" "$marker_a"
run "$a" A
# The marker does reach the binaries (else the checks on B below could not fail).
holds "$a/build/load/examples/demo/demo-server" "$marker_a"
holds "$a/build/fuzz/fuzz_matcher" "$marker_a"
holds "$shared_fuzz/fuzz_matcher" "$marker_a"

cp -a "$a" "$b"  # with A's build/load and build/fuzz
rm -rf "$a"
mark "$b" "$marker_b"
run "$b" B
grep -qF "was set up for $a (gone)" "$work/B.load.log" || fail "B: the load test did not notice A's build/load"
grep -qF "was set up for $a (gone)" "$work/B.fuzz-shared.log" || fail "B: the fuzzer did not notice A's $shared_fuzz"
[[ $(configured_for "$b/build/load") == "$b" ]] || fail "B: build/load is configured for $(configured_for "$b/build/load")"
holds "$b/build/load/examples/demo/demo-server" "$marker_b" "$marker_a"
holds "$b/build/fuzz/fuzz_matcher" "$marker_b" "$marker_a"
holds "$shared_fuzz/fuzz_matcher" "$marker_b" "$marker_a"
echo "two-clones: passed: B built and tested B, in its own build/ and in the shared TRACETREE_FUZZ_DIR"
