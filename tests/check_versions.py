#!/usr/bin/env python3
"""The version is said in one place, include/tracetree/core/version.hpp; everything else that names it
agrees: meson.build and CMakeLists.txt read it from the header (checked here by what they run), and
every `find_package(tracetree X.Y`, `dependency('tracetree', version: '>=X.Y')` and
`tracetree X.Y` request in the docs, the README, the CMake package template and the consumer tests
asks for the header's major.minor (before 1.0 a minor release is incompatible, so an older request
fails against the package)."""
import pathlib
import re
import sys

root = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else pathlib.Path(__file__).resolve().parent.parent)
header = (root / "include/tracetree/core/version.hpp").read_text(encoding="utf-8")
parts = [re.search(r"^#define TRACETREE_VERSION_%s (\d+)\s*$" % p, header, re.M) for p in ("MAJOR", "MINOR", "PATCH")]
if not all(parts):
    sys.exit("check_versions: core/version.hpp lacks a TRACETREE_VERSION_MAJOR/MINOR/PATCH line")
version = ".".join(p.group(1) for p in parts)
major_minor = ".".join(version.split(".")[:2])
failures = []

# The two build descriptions read the header rather than state a version.
meson = (root / "meson.build").read_text(encoding="utf-8")
if "run_command('scripts/version.py'" not in meson or re.search(r"project\([^)]*version:\s*'\d", meson, re.S):
    failures.append("meson.build: project()'s version must come from scripts/version.py")
cmake = (root / "CMakeLists.txt").read_text(encoding="utf-8")
if "TRACETREE_VERSION_" not in cmake or re.search(r"project\(tracetree\s+VERSION\s+\d", cmake):
    failures.append("CMakeLists.txt: project()'s version must come from the header")

requests = [
    re.compile(r"find_package\(\s*tracetree\s+(\d+(?:\.\d+)*)"),
    re.compile(r"dependency\(\s*'tracetree(?:-runtime)?'\s*,\s*version\s*:\s*'>=\s*(\d+(?:\.\d+)*)'"),
    re.compile(r"tracetree(?:Config)?\s+(\d+\.\d+(?:\.\d+)?)\b(?! ?(?:ms|ns|s|%|x)\b)"),
]
files = [root / "README.md", root / "CMakeLists.txt", *sorted((root / "docs").glob("*.md")),
         *sorted((root / "cmake").glob("*.in")), *sorted((root / "tests/consumers").rglob("*.txt")),
         *sorted((root / "tests/consumers").rglob("meson.build"))]
checked = 0
for path in files:
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        for pattern in requests:
            for found in pattern.finditer(line):
                checked += 1
                asked = found.group(1)
                if asked not in (version, major_minor, "99"):  # 99: the request the consumer test expects refused
                    failures.append("%s:%d: asks for tracetree %s, the header is %s: %s"
                                    % (path.relative_to(root), number, asked, version, line.strip()))
if checked < 5:  # the patterns still find the requests the docs make
    failures.append("only %d version requests found: a pattern no longer matches the docs" % checked)
for failure in failures:
    print(failure)
print("check_versions: %d requests checked against %s" % (checked, version))
sys.exit(1 if failures else 0)
