#!/usr/bin/env python3
"""The README's first example is examples/quickstart.cpp, and the output shown under it is what the
program prints today, up to the numbers (times, dates, ids) that differ from run to run."""
import os
import re
import shlex
import subprocess
import sys

readme, source, program = sys.argv[1:4]
blocks = re.findall(r"```(\w*)\n(.*?)```", open(readme, encoding="utf-8").read(), re.S)
code_index = next(i for i, (lang, _) in enumerate(blocks) if lang == "cpp")
shown_code, shown_output = blocks[code_index][1], blocks[code_index + 1][1]

failures = []
if shown_code.strip() != open(source, encoding="utf-8").read().strip():
    failures.append("README's first C++ block differs from " + source)


def shape(text):
    text = re.sub(r"thread_name=[^;\n]*", "thread_name=T", text)
    return re.sub(r"\d+(\.\d+)?(E-?\d+)?", "N", text).strip()


# A cross build's program runs under meson's exe wrapper (tests/cross: qemu-aarch64).
wrapper = shlex.split(os.environ.get("MESON_EXE_WRAPPER", ""))
printed = subprocess.run(wrapper + [program], capture_output=True, text=True, check=True).stdout
if shape(printed) != shape(shown_output):
    failures.append("README's output sample no longer matches what the example prints:\n" + printed)
for failure in failures:
    print(failure)
sys.exit(1 if failures else 0)
