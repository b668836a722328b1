# shellcheck shell=bash
# Sourced by scripts/demo and scripts/demo-walk: the demo server started on the article's ports.
#
#   demo_server_start WORK SERVER EPHEMERAL ARG...   starts SERVER ARG... on ports 7744-7746 as in the
#       article, or on ephemeral ones when those are taken (or at once, when EPHEMERAL is --ephemeral).
#       Its first line (the ports, or why it cannot listen) is read from a pipe in WORK, so the wait ends
#       as soon as the server has said it. Sets SERVER_PID, SERVER_LINE (that line), SERVER_PORTS (the
#       port options given), APP_URL and ADMIN_URL (its tracetree::AdminHandler, docs/admin.md); exits
#       with the server's errors when it does not start.
#   demo_server_stop                                 stops it, then closes the pipe it printed to (its
#       last line, on stopping, still fits in it).

# shellcheck disable=SC2034  # SERVER_PORTS, APP_URL, ADMIN_URL: for the script that sources this
demo_server_start() {
  local work=$1 server=$2 ephemeral=$3 ports
  shift 3
  local candidates=("--port=7744 --channel-port=7745 --admin-port=7746" "--port=0 --channel-port=0 --admin-port=0")
  [ "$ephemeral" != --ephemeral ] || candidates=("${candidates[1]}")
  for ports in "${candidates[@]}"; do
    rm -f "$work/server.out"
    mkfifo "$work/server.out"
    # shellcheck disable=SC2086
    "$server" "$@" $ports >"$work/server.out" 2>"$work/server.err" &
    SERVER_PID=$!
    exec {DEMO_SERVER_OUT}<"$work/server.out"
    SERVER_LINE=
    read -r -t 30 -u "$DEMO_SERVER_OUT" SERVER_LINE || true  # the ports, or nothing when it exits
    if [[ $SERVER_LINE == "demo-server: mode="* ]]; then
      SERVER_PORTS=$ports
      APP_URL=$(sed -n 's/.* app=\(http:\/\/127.0.0.1:[0-9]*\).*/\1/p' <<<"$SERVER_LINE")
      ADMIN_URL=$(sed -n 's/.* admin=\(http:\/\/127.0.0.1:[0-9]*\).*/\1/p' <<<"$SERVER_LINE")/debug/tracetree
      return 0
    fi
    demo_server_stop
    grep -q 'cannot listen' "$work/server.err" ||
      { echo "$(basename "$0"): demo-server did not start:" >&2; cat "$work/server.err" >&2; exit 1; }
  done
  echo "$(basename "$0"): no ports to listen on:" >&2
  cat "$work/server.err" >&2
  exit 1
}

demo_server_stop() {
  kill "$SERVER_PID" 2>/dev/null || true
  wait "$SERVER_PID" 2>/dev/null || true
  SERVER_PID=
  exec {DEMO_SERVER_OUT}<&-
}
