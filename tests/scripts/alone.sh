#!/usr/bin/env bash
# Every script in scripts/ runs alone on a fresh clone (issue 43): in a copy of this tree as a clone
# with the uncommitted changes has it (no build folders), each script's -h and --help print its usage
# and exit 0, an unknown option exits 2 at once, and neither builds or leaves anything. Then the quick
# ones run for real from that copy: version.py, house --check, mutate --list, install-deps, and conformance (the W3C
# Trace Context harness, which configures and builds build/conformance first: about 15 s of the 2-core
# machine). The others build for minutes and run in their own steps of scripts/test; a script in
# neither list fails here, so a new one is classified when it is added.
# Usage: tests/scripts/alone.sh   (scripts/test runs it; the harness folder as scripts/conformance finds it)
set -euo pipefail

root=$(cd "$(dirname "$0")/../.." && pwd)
# shellcheck source=scripts/lib/tree.sh
. "$root/scripts/lib/tree.sh"
work=$(mktemp -d "${TMPDIR:-/tmp}/tracetree-alone.XXXXXX")
trap 'rm -rf "$work"' EXIT
fail() { echo "alone: FAIL: $*" >&2; exit 1; }

# The clone has no ../shared beside it: the harness is the one this tree would use.
export TRACETREE_SHARED=${TRACETREE_SHARED:-$root/../shared}
export TMPDIR=$work/tmp  # every scratch folder the scripts make goes here, and must be gone after
mkdir "$TMPDIR"
clone=$work/clone
tree_copy "$clone"
cd "$clone"

quick=(version.py mutate install-deps conformance house)
# Where the others run: each builds (scripts/test's steps; demo and demo-walk in suite end-to-end).
elsewhere=(bench consumer-test demo demo-walk fuzz load-test render-svg test)

scripts=()
for path in scripts/*; do
    [[ -f $path && -x $path ]] && scripts+=("${path#scripts/}")
done
((${#scripts[@]} >= 12)) || fail "only ${#scripts[@]} scripts found in scripts/"

for name in "${scripts[@]}"; do
    [[ " ${quick[*]} ${elsewhere[*]} " == *" $name "* ]] ||
        fail "scripts/$name is in neither list of this test: run it here if it is quick, else say where it runs"
    for help in -h --help; do
        status=0
        timeout 20 "scripts/$name" "$help" >"$work/out" 2>"$work/err" || status=$?
        ((status == 0)) || { cat "$work/err" >&2; fail "scripts/$name $help exited $status, not 0"; }
        grep -q "scripts/$name" "$work/out" || fail "scripts/$name $help printed no usage naming scripts/$name"
    done
    status=0
    timeout 20 "scripts/$name" --no-such-option >"$work/out" 2>"$work/err" || status=$?
    ((status == 2)) || { cat "$work/out" "$work/err" >&2; fail "scripts/$name --no-such-option exited $status, not 2"; }
    grep -q -- --no-such-option "$work/err" || fail "scripts/$name --no-such-option did not name the option on stderr"
done
left=$(find . -maxdepth 1 -name 'build*'; find "$TMPDIR" -mindepth 1 -maxdepth 1)
[[ -z $left ]] || fail "asking for usage made or left: $left"
echo "alone: ${#scripts[@]} scripts print their usage and refuse an unknown option"

run() {  # LABEL COMMAND...: runs it from the clone, its output kept for a failure
    local label=$1 start=$SECONDS
    shift
    "$@" >"$work/out" 2>&1 || { tail -n 40 "$work/out" >&2; fail "$label failed"; }
    echo "alone: $label: ok ($((SECONDS - start)) s)"
}
run "scripts/version.py" scripts/version.py
grep -qxE '[0-9]+\.[0-9]+\.[0-9]+' "$work/out" || fail "scripts/version.py printed no version"
run "scripts/house --check" scripts/house --check
run "scripts/mutate --list" scripts/mutate --list
grep -q '^ *1\. ' "$work/out" || fail "scripts/mutate --list listed no mutation"
run "scripts/install-deps" scripts/install-deps
run "scripts/conformance" scripts/conformance
grep -q '^conformance: [0-9]* tests, OK' "$work/out" || fail "scripts/conformance did not report its tests as passed"
left=$(find "$TMPDIR" -mindepth 1 -maxdepth 1)
[[ -z $left ]] || fail "the scripts left temporary files: $left"
echo "alone: passed"
