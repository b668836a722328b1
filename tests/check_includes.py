#!/usr/bin/env python3
"""The house's rules for include/tracetree/, checked from the includes themselves (issue 37).

    tests/check_includes.py INCLUDE_DIR

Fails (exit 1, naming the files) when:
- the includes between tracetree's headers form a cycle anywhere;
- a room includes a room it must not: the hot path (core/) only itself; the runtime (runtime/) nothing
  of admin/, otel/, xray/, render.hpp or views.hpp (text/ helpers and the plain values are fine);
  text/ nothing of the runtime;
- a header at an old path (a forwarding header, "Moved to <tracetree/...>") names a file that is not
  there, or holds anything but its one include.
"""
import pathlib
import re
import sys

if len(sys.argv) != 2 or sys.argv[1] in ("-h", "--help"):
    print(__doc__)
    sys.exit(0 if sys.argv[1:] in (["-h"], ["--help"]) else 2)
root = pathlib.Path(sys.argv[1]) / "tracetree"
include = re.compile(r'^\s*#\s*include\s*"([^"]+)"', re.M)

graph = {}
for header in sorted(root.rglob("*.hpp")):
    name = header.relative_to(root).as_posix()
    targets = []
    for target in include.findall(header.read_text(encoding="utf-8")):
        path = (header.parent / target).resolve()
        if not path.is_file():
            graph.setdefault("!missing", []).append("%s -> %s" % (name, target))
            continue
        targets.append(path.relative_to(root.resolve()).as_posix())
    graph[name] = targets
failures = ["%s: includes a file that does not exist" % edge for edge in graph.pop("!missing", [])]

# Cycles: a depth-first walk; a file met again while it is still on the path closes one.
state = {}
def walk(name, path):
    state[name] = "open"
    for target in graph.get(name, []):
        if state.get(target) == "open":
            failures.append("include cycle: " + " -> ".join(path[path.index(target):] + [target]))
        elif target not in state:
            walk(target, path + [target])
    state[name] = "done"
for name in graph:
    if name not in state:
        walk(name, [name])

forbidden = {
    "core/": lambda t: not t.startswith("core/"),
    "runtime/": lambda t: t.split("/")[0] in ("admin", "otel", "xray") or t in ("render.hpp", "views.hpp"),
    "text/": lambda t: t.startswith("runtime/"),
}
for name, targets in graph.items():
    for room, bad in forbidden.items():
        if name.startswith(room):
            failures += ["%s includes %s: %s may not" % (name, t, room) for t in targets if bad(t)]

moved = re.compile(r"^// Moved to <tracetree/([^>]+)>.*\n#include \"([^\"]+)\"\n$")
forwards = 0
for header in root.glob("*.hpp"):
    text = header.read_text(encoding="utf-8")
    if not text.startswith("// Moved to"):
        continue
    forwards += 1
    match = moved.match(text)
    if match is None or match.group(1) != match.group(2) or not (root / match.group(1)).is_file():
        failures.append("%s: a forwarding header holds one comment and the include of the file it names" % header.name)

for failure in failures:
    print("check_includes: " + failure, file=sys.stderr)
print("check_includes: %d headers, %d forwarding, %d problem(s)" % (len(graph), forwards, len(failures)))
sys.exit(1 if failures else 0)
