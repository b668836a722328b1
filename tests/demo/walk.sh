#!/usr/bin/env bash
# `scripts/demo --walk` (scripts/demo-walk), the README's command, run on this build's demo-server
# (DEMO_BUILT: no install, no build, ephemeral ports) and checked step by step: what each admin call
# found, never how long anything took.
#   tests/demo/walk.sh SCRIPTS_DEMO BUILD_DIR     (meson passes both; see tests/demo/meson.build)
set -uo pipefail

DEMO=${1:?usage: walk.sh scripts/demo BUILD_DIR}
BUILD=${2:?usage: walk.sh scripts/demo BUILD_DIR}
OUT=$(mktemp "${TMPDIR:-/tmp}/tracetree-walk-test-XXXXXX")
trap 'rm -f "$OUT"' EXIT

DEMO_BUILT=$BUILD "$DEMO" --walk >"$OUT" 2>&1 </dev/null
status=$?
sed 's/\x1b\[[0-9;]*m//g' "$OUT"  # the walk itself, for the test log
echo "---- checks"

failures=0
# check WHAT STEP PATTERN: PATTERN (grep -E) must occur in the output of STEP ("== 1." ... "== 7.").
check() {
  local what=$1 step=$2 pattern=$3
  # grep reads the whole section (no -q): under pipefail, a grep that quits early leaves sed a SIGPIPE
  # that fails the pipeline whenever the section outgrows a pipe write.
  if sed -n "/== $step/,/== [0-9]\\./p" "$OUT" | grep -E -- "$pattern" >/dev/null; then
    echo "ok:   $what"
  else
    echo "FAIL: $what (step $step has no line matching /$pattern/)"
    failures=$((failures + 1))
  fi
}

if [ "$status" -eq 0 ]; then echo "ok:   the walk exits 0"; else echo "FAIL: the walk exited $status"; failures=$((failures + 1)); fi
if grep -Eq '^[0-9]{3} (Bad Request|Unauthorized|Forbidden|Not Found|Method Not Allowed|Conflict|Unsupported Media Type|Service Unavailable)' "$OUT"; then
  echo "FAIL: an admin call was refused:"
  grep -E '^[0-9]{3} [A-Z]' "$OUT" | head -5
  failures=$((failures + 1))
fi
check "step 1 times two calls to /send" "1\." '^\$ curl -w .*/send$'
check "step 1 shows curl's figures" "1\." 'time_total: +[0-9.]+s +\(HTTP 200\)'
check "step 2 traces the servlet" "2\." '`---\[[0-9.E-]+ms\] demo::DispatcherServlet::doDispatch\(\)'
check "step 2 prints the unaccounted time" "2\." '^curl: [0-9.]+ ms; DispatcherServlet: [0-9.]+ ms; unaccounted: -?[0-9.]+ ms'
check "step 3 is a stack of doDispatch" "3\." '@demo::DispatcherServlet::doDispatch\(\)'
check "step 3's stack reaches Http11Processor::service" "3\." '^ +at demo::Http11Processor::service\('
check "step 3's stack names the scope the request was handed off from" "3\." '^ +at AbstractEndpoint::processSocket\(net\.cpp:[0-9]+\)$'
check "step 4's trace holds the jar walk, folded" "4\." 'count=[0-9]+\] demo::TomcatJarInputStream::getNextJarEntry\(\)'
check "step 4 counts the entries" "4\." '^The jar walk: getNextJarEntry folded into one node \([0-9]+ calls, .*createZipEntry [0-9]+ times'
check "step 5 watches createZipEntry" "5\." '^method=demo::TomcatJarInputStream::createZipEntry location=AtExit'
check "step 5 names Swagger UI's files under META-INF/resources/" "5\." '^META-INF/resources/swagger-ui.html$'
check "step 5 names its webjars" "5\." '^META-INF/resources/webjars/springfox-swagger-ui/[^ ]+\.js$'
check "step 6 starts the fixed server" "6\." '^demo-server: mode=fixed'
check "step 6's trace has no jar walk" "6\." '^\(no getNextJarEntry: /send no longer looks in the jars\)'
check "step 6 compares before and after" "6\." '^a call after a gc +[0-9.]+ ms +[0-9.]+ ms +-?[0-9.]+ ms'
# Step 7: the trace of the poller's hand-off holds the queue wait and, under it, the worker's service
# (the indentation is the nesting: processSocket, then its children, then doRun's).
check "step 7's trace starts on the poller" "7\." '^`---ts=.*;thread_name=http-nio-[0-9]+-ClientPoller;'
check "step 7's trace is of processSocket" "7\." '^    `---\[[0-9.E-]+ms\] AbstractEndpoint::processSocket \[wall time; \[parallel\] work ran .*\]( \[on CPU [^]]*\])?$'
check "step 7 shows the queue wait under it" "7\." '^        \+---\[[0-9.]+% [0-9.E-]+ms \] \[queued\] \[parallel\]( \[off CPU >= [0-9.]+%\])?( <- hot)?$'
check "step 7 shows the worker's run under it" "7\." '^        `---\[[0-9.]+% [0-9.E-]+ms \] NioEndpoint::SocketProcessor::doRun #[0-9]+ \[parallel\]( \[off CPU >= [0-9.]+%\])?( <- hot)?$'
check "step 7 shows the service under the worker's run" "7\." '^            `---\[[0-9.]+% [0-9.E-]+ms \] demo::Http11Processor::service\(\) #[0-9]+( \[off CPU >= [0-9.]+%\])?( <- hot)?$'
check "step 7 sums up the waits" "7\." '^In the queue: [0-9.]+ ms, [0-9.]+ ms '
if grep -q 'once more' "$OUT"; then echo "note: a step ran twice (its admin call started after its /send)"; fi

[ "$failures" -eq 0 ] || { echo "$failures check(s) failed"; exit 1; }
echo "all checks passed"
