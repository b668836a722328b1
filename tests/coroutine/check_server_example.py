#!/usr/bin/env python3
"""Runs examples/coroutine_server and checks the trees it prints: in the merged profile the co-scopes
nested as written, their counts (two sessions of three requests), and the waits in them as `[suspended]`
nodes; then the trace of one request's `handle`, its look_up and the query's wait."""
import re
import subprocess
import sys

out = subprocess.run([sys.argv[1]], check=True, capture_output=True, text=True, timeout=60).stdout
# The merged profile, then the trace of the first request's `handle`.
profile, _, trace = out.partition("\n\n")
trace_lines = list(filter(None, trace.splitlines()))
if len(trace_lines) != 4 or not re.match(r"^ +`---\[[\d.E-]+ms\] handle$", trace_lines[1]) \
        or not re.match(r"^ +`---\[[\d.]+% [\d.E-]+ms \] look_up #\d+$", trace_lines[2]) \
        or not re.match(r"^ +`---\[[\d.]+% [\d.E-]+ms \] \[suspended\]$", trace_lines[3]):
    sys.exit(f"not the trace of one request's handle:\n{out}")
counts = {}  # path -> count, from lines such as `|   +---[12.5% min=...,count=6] handle #31`
stack = []
for line in filter(None, profile.splitlines()[1:]):
    match = re.match(r"^([ |]*)[`+]---\[([^\]]*)\] (.*?)(?: #\d+)?(?: \[total includes [^\]]*\])?$", line)
    if not match:
        sys.exit(f"not a node: {line!r}\n{out}")
    depth = len(match.group(1)) // 4 - 1  # the root line has one level of indent
    del stack[depth:]
    stack.append(match.group(3))
    count = re.search(r"count=(\d+)", match.group(2))
    counts[tuple(stack)] = int(count.group(1)) if count else 1
expected = {
    ("server", "listen"): 1,
    ("server", "listen", "session"): 2,
    ("server", "listen", "session", "handle"): 6,
    ("server", "listen", "session", "handle", "look_up"): 6,
    ("server", "listen", "session", "handle", "look_up", "[suspended]"): 6,  # one timer each
    ("server", "listen", "session", "[suspended]"): 14,  # each read and write, and each end of stream
}
wrong = {path: (counts.get(path), count) for path, count in expected.items() if counts.get(path) != count}
if wrong:
    sys.exit(f"counts (seen, expected): {wrong}\n{out}")
print(out, end="")
