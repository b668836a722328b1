#!/usr/bin/env bash
# The OpenTelemetry JavaScript SDK as the reference (docs/otel.md): installs the pinned packages
# (package-lock.json) into tests/otel/node_modules with npm, then runs reference.js (the OTLP/JSON
# shape) and client.js (a Node client calling a tracetree server), or with --demo demo.js (the demo's
# live exports). Exits 77, which meson counts as skipped, with the reason printed, when node or npm is
# missing or the npm registry cannot be reached.
#   run-node-tests.sh PATH-TO-otel-dump PATH-TO-tracecontext-service
#   run-node-tests.sh --demo PATH-TO-demo-server
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
if [ "$1" = --demo ]; then
    demo=$(realpath "$2")
else
    dump=$(realpath "$1")
    service=$(realpath "$2")
fi
skip() { echo "SKIP: $*"; exit 77; }

command -v node >/dev/null 2>&1 || skip "node is not installed (apt-get install nodejs npm)"
command -v npm >/dev/null 2>&1 || skip "npm is not installed (apt-get install npm)"
major=$(node -p 'process.versions.node.split(".")[0]')
[ "$major" -ge 18 ] || skip "node $(node --version) is older than the SDK needs (18.19 or later)"

# One install at a time (several build folders may run this suite at once); npm ci only when the
# lock file changed since the last install.
exec 9>"$here/.npm-install.lock"
flock 9
stamp="$here/node_modules/.package-lock.json"
if [ ! -f "$stamp" ] || [ "$here/package-lock.json" -nt "$stamp" ]; then
    echo "installing the OpenTelemetry SDK into tests/otel/node_modules (npm ci)"
    if ! (cd "$here" && timeout 300 npm ci --no-audit --no-fund --loglevel=error); then
        skip "npm ci failed: the npm registry cannot be reached (see the npm error above)"
    fi
fi
flock -u 9

cd "$here"
if [ -n "${demo:-}" ]; then
    node demo.js "$demo"
else
    node reference.js "$dump"
    node client.js "$service"
fi
