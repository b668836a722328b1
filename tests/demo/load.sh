#!/usr/bin/env bash
# `scripts/demo --load` (scripts/demo-walk --load), the README's command, run on this build's
# demo-server (DEMO_BUILT: no install, no build, ephemeral ports) and checked: the slow call's trace
# beside the CPU hog says its thread was off CPU, and marks a call below the root as mostly off CPU.
# What the trace found, never how long anything took: the server and the hog share one CPU, so the
# jar walk (CPU work) is preempted on any machine.
#   tests/demo/load.sh SCRIPTS_DEMO BUILD_DIR     (meson passes both; see tests/demo/meson.build)
set -uo pipefail

DEMO=${1:?usage: load.sh scripts/demo BUILD_DIR}
BUILD=${2:?usage: load.sh scripts/demo BUILD_DIR}
OUT=$(mktemp "${TMPDIR:-/tmp}/tracetree-load-test-XXXXXX")
trap 'rm -f "$OUT"' EXIT

DEMO_BUILT=$BUILD "$DEMO" --load >"$OUT" 2>&1 </dev/null
status=$?
sed -i 's/\x1b\[[0-9;]*m//g' "$OUT"  # the headings' bold
cat "$OUT"  # the run itself, for the test log
echo "---- checks"

failures=0
fail() { echo "FAIL: $1"; failures=$((failures + 1)); }
# section STEP: the output of step STEP ("== 1." ...), up to the next heading or the closing table.
section() { sed -n "/^== $1/,/^\\(== [0-9]\\.\\|Http11Processor::service  \\)/p" "$OUT"; }

if [ "$status" -eq 0 ]; then echo "ok:   scripts/demo --load exits 0"; else fail "scripts/demo --load exited $status"; fi
if grep -Eq '^[0-9]{3} (Bad Request|Unauthorized|Forbidden|Not Found|Method Not Allowed|Conflict|Unsupported Media Type|Service Unavailable)' "$OUT"; then
  fail "an admin call was refused: $(grep -E '^[0-9]{3} [A-Z]' "$OUT" | head -1)"
fi

# Step 1, alone: a trace whose root says its time on and off CPU (its share depends on the machine).
if section 1 | grep -Eq '^    `---\[[0-9.E-]+ms\] demo::Http11Processor::service\(\) \[on CPU [0-9.]+%, off CPU [0-9.]+%'; then
  echo "ok:   step 1's trace gives the root's time on and off CPU"
else
  fail "step 1's trace has no root line with its time on and off CPU"
fi

# Step 2, beside the hog: the root was off CPU for part of the call (preempted: runnable, where the
# source can tell), and a call below it is marked as mostly off CPU.
root=$(section 2 | grep -m1 -E '^    `---\[[0-9.E-]+ms\] demo::Http11Processor::service\(\) \[on CPU')
off=$(sed -n 's/.*, off CPU \([0-9.]*\)%.*/\1/p' <<<"$root")
runnable=$(sed -n 's/.*: runnable \([0-9.]*\)%.*/\1/p' <<<"$root")
if [ -z "$root" ]; then
  fail "step 2's trace has no root line with its time on and off CPU"
elif awk -v off="$off" 'BEGIN { exit !(off > 0) }'; then
  echo "ok:   step 2's root was off CPU for part of the call ($off%)"
else
  fail "step 2's root says it was never off CPU: $root"
fi
if [ -n "$runnable" ]; then  # the context-switch source: it tells preempted from blocked
  if awk -v r="$runnable" 'BEGIN { exit !(r > 0) }'; then echo "ok:   step 2's root was preempted ($runnable% runnable)"
  else fail "step 2's root was never runnable off CPU: $root"; fi
fi
if section 2 | grep -Eq '^    [ |`+-]*---\[[0-9.]+% .*\] demo::.* \[off CPU >= [0-9.]+%\]( <- hot)?$'; then
  echo "ok:   step 2 marks a call below the root as mostly off CPU"
else
  fail "step 2's trace marks no call below the root with [off CPU >= P%]"
fi
if grep -Eq '^  runnable \(preempted\) +[0-9.]+ ms +[0-9.]+ ms$|^off CPU +[0-9.]+ ms +[0-9.]+ ms$' "$OUT"; then
  echo "ok:   the closing table compares both calls"
else
  fail "no closing table"
fi

[ "$failures" -eq 0 ] || { echo "$failures check(s) failed"; exit 1; }
echo "all checks passed"
