#!/usr/bin/env bash
# scripts/demo --xray (docs/xray.md): the demo's bug found without annotations. demo-server-xray's
# Tomcat replica (tomcat.cpp, zip.cpp, fatjar.cpp) has no tracetree macros; clang's XRay left sleds in
# its functions, and a live trace patches them only while it runs. Shows what is patched before, during
# and after a live trace of Http11Processor::service, the trace itself, and the /send latency unpatched,
# patched, and unpatched again. Every number printed is measured here by curl or by the server.
#
#   scripts/demo --xray        install what is missing (apt-get), build into build-demo-xray/ with clang++
#   DEMO_XRAY_BUILD_DIR=dir    build elsewhere
#   DEMO_BUILT=dir             use demo-server-xray as built in the meson folder dir (no install, no
#                              build), on ports picked by the system (tests/demo/modes.sh)
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/../.." && pwd)
BUILD=${DEMO_BUILT:-${DEMO_XRAY_BUILD_DIR:-$ROOT/build-demo-xray}}
WORK=$(mktemp -d "${TMPDIR:-/tmp}/tracetree-demo-xray-XXXXXX")
CALLS=21
SERVER_PID=

cleanup() {
  if [ -n "$SERVER_PID" ]; then
    kill "$SERVER_PID" 2>/dev/null || true
    wait "$SERVER_PID" 2>/dev/null || true
  fi
  rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

say() { printf '\n\033[1m== %s\033[0m\n' "$*"; }

# ---- tools and build ----------------------------------------------------------------------------------
build() {
  missing=()
  for tool in meson:meson ninja:ninja-build clang++:clang curl:curl pkg-config:pkg-config; do
    command -v "${tool%%:*}" >/dev/null 2>&1 || missing+=("${tool#*:}")
  done
  for package in libclang-rt-14-dev libclang-common-14-dev zlib1g-dev libasio-dev doctest-dev; do
    dpkg -s "$package" >/dev/null 2>&1 || missing+=("$package")
  done
  if [ ${#missing[@]} -gt 0 ]; then
    say "Installing ${missing[*]}"
    SUDO=; [ "$(id -u)" -eq 0 ] || SUDO=sudo
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
  fi

  say "Building demo-server-xray with clang++ into ${BUILD#"$ROOT"/}"
  # shellcheck source=scripts/lib/tree.sh
  . "$ROOT/scripts/lib/tree.sh"
  CXX=clang++ builddir_setup "$BUILD" -Dbenchmarks=false -Dtests=false -Ddemo_xray=enabled || exit 1
  meson compile -C "$BUILD" -j2 demo-server-xray >"$WORK/build.log" 2>&1 || { tail -40 "$WORK/build.log"; exit 1; }
}
[ -n "${DEMO_BUILT:-}" ] || build
SERVER=$BUILD/examples/demo-xray/demo-server-xray
[ -x "$SERVER" ] || { echo "no $SERVER" >&2; exit 1; }
echo "built $SERVER"
echo "its Tomcat replica, checked: no tracetree symbol in the objects, XRay sleds in each"
python3 "$ROOT/tests/xray/check_objects.py" "$BUILD"/examples/demo-xray/libtracetree-demo-xray-{tomcat,zip}.a |
  sed 's|'"$BUILD"'/||'

# ---- the server: TTL and gc cut to 100 ms, so that a call 300 ms after the last is slow every time ----
LOG=$WORK/server.log
candidates=("--port=7744 --channel-port=7745 --admin-port=7746" "--port=0 --channel-port=0 --admin-port=0")
[ -z "${DEMO_BUILT:-}" ] || candidates=("${candidates[1]}")
for ports in "${candidates[@]}"; do
  : >"$LOG"  # read at once below, before the background job may have opened it
  # shellcheck disable=SC2086
  "$SERVER" --cache-ttl=100ms --gc-period=100ms $ports >"$LOG" 2>&1 &
  SERVER_PID=$!
  for _ in $(seq 100); do
    grep -q '^demo-server: mode=' "$LOG" && break
    kill -0 "$SERVER_PID" 2>/dev/null || break
    sleep 0.1
  done
  grep -q '^demo-server: mode=' "$LOG" && break
  wait "$SERVER_PID" 2>/dev/null || true
  SERVER_PID=
  grep -q 'cannot listen' "$LOG" || { cat "$LOG"; exit 1; }
done
[ -n "$SERVER_PID" ] || { cat "$LOG"; exit 1; }
APP=$(sed -n 's/.* app=http:\/\/127.0.0.1:\([0-9]*\).*/\1/p' "$LOG")
ADMIN=$(sed -n 's/.* admin=http:\/\/127.0.0.1:\([0-9]*\).*/\1/p' "$LOG")
ADMIN_URL=http://127.0.0.1:$ADMIN/debug/tracetree  # tracetree::AdminHandler (docs/admin.md)
grep '^demo-server: mode=' "$LOG" | cut -c1-100
patched() { grep '^xray:' "$LOG" | tail -1; }

# batch: CALLS calls of /send, 300 ms apart (each after the TTL and a gc); MEDIAN in ms, with the 25th
# and 75th percentiles (the machine may be shared: the spread says how much a difference means).
batch() {
  : >"$WORK/times.txt"
  for _ in $(seq $CALLS); do
    sleep 0.3
    curl -s -o /dev/null -w '%{time_total}\n' "http://127.0.0.1:$APP/send" >>"$WORK/times.txt"
  done
  MEDIAN=$(sort -n "$WORK/times.txt" | awk -v n=$CALLS '
    NR == int(n / 4) + 1 { p25 = $1 } NR == int(n / 2) + 1 { p50 = $1 } NR == int(3 * n / 4) + 1 { p75 = $1 }
    END { printf "%.1f ms (%.1f-%.1f)", p50 * 1000, p25 * 1000, p75 * 1000 }')
}

say "Nothing is patched at start: the sleds cost next to nothing"
echo "server: $(patched)"
batch; BEFORE=$MEDIAN; BEFORE_PATCHED=$(patched)
echo "median /send over $CALLS calls: $BEFORE"

say "A live trace (Arthas: trace Http11Processor service '#cost > 10'): it patches Tomcat's functions"
# depth=16: the jar walk is 12 calls below service() (the default, 2, patches the top of the tree only).
curl -s "$ADMIN_URL/trace?pattern=Http11Processor::service&cost=10&n=1&depth=16&timeout=20" >"$WORK/trace.txt" &
TRACE=$!
echo "\$ curl '$ADMIN_URL/trace?pattern=Http11Processor::service&cost=10&n=1&depth=16' &"
sleep 0.5
echo "\$ curl http://127.0.0.1:$APP/send"
curl -s -o /dev/null "http://127.0.0.1:$APP/send"
wait "$TRACE"
echo
cat "$WORK/trace.txt"
echo
for name in getNextJarEntry closeEntry createZipEntry; do
  line=$(grep "TomcatJarInputStream::$name()" "$WORK/trace.txt" | head -1 || true)
  [ -n "$line" ] || { echo "the trace did not find TomcatJarInputStream::$name"; exit 1; }
  echo "found without annotations: ${line#*---}"
done
echo
echo "what the server said each time the sessions changed:"
grep '^xray:' "$LOG" | tail -3 | sed 's/^/  /'

say "The latency while a trace captures every call ($CALLS calls, cost >= 0)"
curl -s -o /dev/null "$ADMIN_URL/trace?pattern=Http11Processor::service&cost=0&n=$CALLS&depth=16&timeout=120" &
TRACE=$!
sleep 0.5
DURING_PATCHED=$(patched)
batch; DURING=$MEDIAN
wait "$TRACE"
echo "median /send over $CALLS calls: $DURING"

say "The trace has ended: everything is unpatched again"
AFTER_PATCHED=$(patched)
echo "server: $AFTER_PATCHED"
batch; AFTER=$MEDIAN
echo "median /send over $CALLS calls: $AFTER"
# A function still running on some thread when the trace ended (its caller's frame) stays patched
# until it returns, and the server reports only when sessions change: a session that matches nothing
# makes it report again, after the batch's calls have returned through those frames (a name that
# matches nothing is answered 404 without a session: this one patches service() alone, for 1 ms).
curl -s -o /dev/null "$ADMIN_URL/trace?pattern=Http11Processor::service&depth=0&timeout=0.001"
AFTER_PATCHED=$(patched)
echo "server, after the calls: $AFTER_PATCHED"
echo "$AFTER_PATCHED" | grep -q '^xray: 0 of' || { echo "functions left patched"; exit 1; }

say "Side by side: $CALLS calls to /send each, every one after the cache TTL and a gc"
printf '%-40s %-26s %s\n' "" "median /send (p25-p75)" "the server's last report"
printf '%-40s %-26s %s\n' "before the trace (unpatched)" "$BEFORE" "$BEFORE_PATCHED"
printf '%-40s %-26s %s\n' "a trace capturing every call (patched)" "$DURING" "$DURING_PATCHED"
printf '%-40s %-26s %s\n' "after the trace (unpatched again)" "$AFTER" "$AFTER_PATCHED"
echo
echo "Done: the server this script started has been stopped."
