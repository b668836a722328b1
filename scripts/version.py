#!/usr/bin/env python3
"""Prints the version defined in include/tracetree/core/version.hpp, e.g. "0.1.0".

Usage: scripts/version.py   (no arguments)

meson.build calls this from project(): the header's TRACETREE_VERSION_* macros are the single source
of the version, so C++ code, the pkg-config file and the CMake version file can never disagree.
Python because meson itself runs on it (meson runs python3 scripts with its own interpreter).
"""
import pathlib
import re
import sys

if sys.argv[1:] in (["-h"], ["--help"]):
    print(__doc__)
    sys.exit(0)
if sys.argv[1:]:
    print("version.py: unknown argument %s (scripts/version.py --help)" % sys.argv[1], file=sys.stderr)
    sys.exit(2)

header = pathlib.Path(__file__).resolve().parent.parent / "include" / "tracetree" / "core" / "version.hpp"
text = header.read_text(encoding="utf-8")
parts = []
for part in ("MAJOR", "MINOR", "PATCH"):
    match = re.search(r"^#define TRACETREE_VERSION_%s (\d+)\s*$" % part, text, re.MULTILINE)
    if match is None:  # fail the configure step loudly rather than install a package with no version
        sys.exit("version.py: no '#define TRACETREE_VERSION_%s <number>' line in %s" % (part, header))
    parts.append(match.group(1))
print(".".join(parts))
