#!/usr/bin/env bash
# One mode of scripts/demo, the README's commands, run end to end on this build's programs
# (DEMO_BUILT: no install, no build, ephemeral ports) and checked: it exits 0, prints what the mode is
# for, and no admin call in it was refused (a wrong path or parameter answers 4xx with its reason).
#   tests/demo/modes.sh SCRIPTS_DEMO BUILD_DIR [--xray|--otlp]   (meson passes them; --walk is walk.sh, --load load.sh)
set -uo pipefail

DEMO=${1:?usage: modes.sh scripts/demo BUILD_DIR [--xray|--otlp]}
BUILD=${2:?usage: modes.sh scripts/demo BUILD_DIR [--xray|--otlp]}
MODE=${3:-}
OUT=$(mktemp "${TMPDIR:-/tmp}/tracetree-demo-mode-XXXXXX")
trap 'rm -f "$OUT"' EXIT

DEMO_BUILT=$BUILD "$DEMO" ${MODE:+"$MODE"} >"$OUT" 2>&1 </dev/null
status=$?
sed -i 's/\x1b\[[0-9;]*m//g' "$OUT"  # the headings' bold
cat "$OUT"  # the run itself, for the test log
echo "---- checks"

failures=0
check() {  # check WHAT PATTERN: PATTERN (grep -E) occurs in the output
  if grep -Eq -- "$2" "$OUT"; then echo "ok:   $1"; else echo "FAIL: $1 (no line matching /$2/)"; failures=$((failures + 1)); fi
}
if [ "$status" -eq 0 ]; then echo "ok:   scripts/demo $MODE exits 0"; else echo "FAIL: scripts/demo $MODE exited $status"; failures=$((failures + 1)); fi
if grep -Eq '^[0-9]{3} (Bad Request|Unauthorized|Forbidden|Not Found|Method Not Allowed|Conflict|Unsupported Media Type|Service Unavailable)' "$OUT"; then
  echo "FAIL: an admin call was refused:"
  grep -E '^[0-9]{3} [A-Z]' "$OUT" | head -5
  failures=$((failures + 1))
else
  echo "ok:   no admin call was refused"
fi
case "$MODE" in
  "")
    check "the live trace found a call" 'thread_name=http-nio-[0-9]+-exec-'
    check "the monitor printed rows" 'demo::Http11Processor +service +[0-9]+ '
    check "the monitor marked a jar walk after a gc" '<- slow: the jar walk'
    check "the flight recorder kept a slow call" "^Flight recorder for 'Http11Processor::service' .*: [1-9][0-9]* recorded, 1 kept"
    check "the batch printed its table" '^createZipEntry calls per request'
    check "the views were written" 'demo-views|\.svg'
    check "the run finished" '^Done: every server this script started has been stopped'
    ;;
  --xray)
    check "the trace found the jar walk without annotations" '^found without annotations: .*createZipEntry'
    check "the run finished" '^Done: the server this script started has been stopped'
    ;;
  --otlp)
    check "the joined trace is whole" '^the trace is whole$'
    ;;
  *) echo "FAIL: unknown mode $MODE"; failures=$((failures + 1)) ;;
esac
[ "$failures" -eq 0 ]
