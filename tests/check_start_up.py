#!/usr/bin/env python3
"""A file that only annotates runs nothing before main (README, "Which header"): compiled to an object
at -O0 and -O2, bench/compile/annotated.cpp must have no dynamic initialiser (an `.init_array` section,
a `_GLOBAL__sub_I_*` function) and no guard variable.

    check_start_up.py SOURCE INCLUDE_DIR STD COMPILER...
"""
import os
import subprocess
import sys
import tempfile


def main():
    source, include, std, compiler = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4:]
    failures = []
    with tempfile.TemporaryDirectory() as scratch:
        for level in ("-O0", "-O2"):
            obj = os.path.join(scratch, "annotated%s.o" % level)
            subprocess.run(compiler + ["-std=" + std, level, "-I", include, "-c", source, "-o", obj], check=True)
            sections = subprocess.run(["readelf", "-S", "-W", obj], check=True, capture_output=True, text=True).stdout
            symbols = subprocess.run(["nm", obj], check=True, capture_output=True, text=True).stdout
            if ".init_array" in sections:
                failures.append("%s: an .init_array section" % level)
            for line in symbols.splitlines():
                name = line.split()[-1]
                if name.startswith("_GLOBAL__sub_I") or name.startswith("_ZGV"):
                    failures.append("%s: %s" % (level, name))
    for failure in failures:
        print("runs before main:", failure)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
