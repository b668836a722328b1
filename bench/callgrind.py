#!/usr/bin/env python3
"""Instructions per operation of the benchmark's kernels, counted by callgrind: run by scripts/bench.

    bench/callgrind.py --exe build-bench/bench/tracetree-bench --build build-bench [--breakdown K ...] [--only K ...]

Each kernel runs as `tracetree-bench --kernel NAME N` under `valgrind --tool=callgrind` for a small and
a large N; the difference in instructions over the difference in operations cancels start-up,
warm-up and the checks. Prints a Markdown table of every kernel, whether the per-scope count stays
flat as a parent's call sites grow from 2 to 1,000, then, for each kernel named after --breakdown (the
benchmark's missed targets), where its instructions go: by function, and by source line (the build
has debug information, so the lines of inlined code show).

Instruction counts do not move with the machine's load, so they are the figures to compare across
commits. Exit status 1 when a kernel fails (its counts are checked under callgrind too).
"""
import argparse
import concurrent.futures
import os
import re
import subprocess
import sys
import tempfile

# (kernel, small N, large N, label, function to count alone or None). N is in the kernel's operations:
# scopes, invocations, trees (new-node) or snapshots and renders (the last four).
KERNELS = [
    ("tsc-pair", 100000, 1100000, "two clock reads (`__builtin_ia32_rdtsc()`; baseline)", None),
    ("steady-pair", 10000, 110000, "two `steady_clock::now()` (under valgrind a system call each)", None),
    ("enabled", 100000, 1100000, "enabled scope, node exists", None),
    ("disabled", 100000, 1100000, "runtime-disabled scope", None),
    ("compiled-out", 100000, 1100000, "compiled-out scope", None),
    ("new-node", 1, 4, "scope that creates its node", "*build_trees*"),
    ("fib", 21891, 218910, "recursive fib(20), per scope", None),
    ("siblings-2-in-order", 20000, 220000, "2 call sites in order, per scope", None),
    ("siblings-20-in-order", 20000, 220000, "20 call sites in order", None),
    ("siblings-200-in-order", 20000, 220000, "200 call sites in order", None),
    ("siblings-1000-in-order", 20000, 220000, "1,000 call sites in order", None),
    ("siblings-2-shuffled", 20000, 220000, "2 call sites shuffled", None),
    ("siblings-20-shuffled", 20000, 220000, "20 call sites shuffled", None),
    ("siblings-200-shuffled", 20000, 220000, "200 call sites shuffled", None),
    ("siblings-1000-shuffled", 20000, 220000, "1,000 call sites shuffled", None),
    ("dynamic-50", 16384, 163840, "run-time names, 50 distinct", None),
    ("dynamic-5000", 16384, 163840, "run-time names, 5,000 distinct", None),
    ("with-watch", 100000, 1100000, "unwatched scope with a `TRACETREE_WATCH`", None),
    ("watched", 10000, 60000, "watched scope, min_cost never reached", None),
    ("monitored", 10000, 60000, "monitored scope", None),
    ("nested", 16384, 163840, "scope nested in an unwatched invocation", None),
    ("nested-watched", 16384, 163840, "scope nested in a watched invocation", None),
    ("handoff", 10000, 110000, "hand-off: `here()`, `Continue` and its end", None),
    ("handoff-function", 10000, 110000, "hand-off through `std::function` (`wrap()`)", None),
    ("continued", 100000, 1100000, "scope on a continued path", None),
    ("resumption", 10000, 110000, "coroutine resumed and suspended, a co-scope open", None),
    ("co-scope", 10000, 110000, "`TRACETREE_CO_SCOPE` inside a resumption", None),
    ("invocation", 500, 5500, "20-node invocation, unwatched (per invocation)", None),
    ("recorded", 500, 5500, "20-node invocation, flight recorder (per invocation)", None),
    ("two-watches", 10000, 110000, "scope with two `TRACETREE_WATCH`, unwatched (per invocation)", None),
    ("watch-session", 1000, 11000, "the same, `WatchSession` taking both (per invocation)", None),
    ("snapshot-10k", 0, 2, "`profile()`, 11,111 nodes (per node)", None),
    ("snapshot-100k", 0, 1, "`profile()`, 111,111 nodes (per node)", None),
    ("render-10k", 0, 2, "`render()`, 11,111 nodes (per node)", None),
    ("render-100k", 0, 1, "`render()`, 111,111 nodes (per node)", None),
]
SIBLINGS = [2, 20, 200, 1000]
# Flat: 1,000 sites cost per scope no more than 10% above 20 sites. Two shuffled sites are always
# neighbours in the ring of siblings, so they never reach the hash probe: from 2 to 20 the shuffled
# count steps up once, which is not growth with the number of sites.
FLAT = 0.10


def run_kernel(exe, workdir, kernel, n, function):
    out = os.path.join(workdir, f"{kernel}.{n}.cg")
    command = ["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}"]
    if function:
        command.append(f"--toggle-collect={function}")
    result = subprocess.run(command + [exe, "--kernel", kernel, str(n)], capture_output=True, text=True)
    ops = re.search(r"^ops (\S+)$", result.stdout, re.M)
    if result.returncode != 0 or not ops:
        sys.exit(f"callgrind.py: kernel {kernel} {n} failed under callgrind:\n{result.stdout}{result.stderr}")
    with open(out) as f:
        total = re.search(r"^(?:summary|totals): (\d+)", f.read(), re.M)
    return out, int(total.group(1)), float(ops.group(1))


def annotate(path, build):
    result = subprocess.run(["callgrind_annotate", "--threshold=100", "--inclusive=no", "--auto=yes",
                             "--show-percs=no", "--context=0", path], capture_output=True, text=True, cwd=build)
    if result.returncode != 0:
        sys.exit(f"callgrind.py: callgrind_annotate {path} failed:\n{result.stderr}")
    return result.stdout


def short_function(entry):
    """'file:ns::f(args) [object]' -> 'ns::f', without the library's versioned namespace."""
    entry = re.sub(r" \[[^\]]*\]$", "", entry)
    entry = re.sub(r"^[^:]*(\.[A-Za-z]+|\?\?\?):", "", entry)
    entry = entry.replace("(anonymous namespace)", "{anon}")
    entry = re.sub(r"\(.*$", "", entry)
    entry = entry.replace("tracetree::v0_2::", "tracetree::").replace("std::__cxx11::", "std::")
    return re.sub(r"<.*>", "<...>", entry)


def own_counts(text):
    """({function: own instructions}, {(file:line, source): own instructions}) from callgrind_annotate."""
    functions, lines = {}, {}
    source, number = None, 0
    in_functions = False
    for line in text.splitlines():
        if line.startswith("-- Auto-annotated source:"):
            source, number, in_functions = line.split(":", 1)[1].strip(), 0, False
            continue
        if re.match(r"^Ir\s+file:function", line):
            in_functions = True
            continue
        marker = re.match(r"^-- line (\d+) -+$", line)
        if marker:
            number = int(marker.group(1))
            continue
        if in_functions:
            match = re.match(r"^\s*([\d,]+)\s+(\S.*)$", line)
            if match and "PROGRAM TOTALS" not in line:
                name = short_function(match.group(2))
                functions[name] = functions.get(name, 0) + int(match.group(1).replace(",", ""))
            continue
        if source is None or " => " in line or line.rstrip().endswith("events annotated"):
            continue
        match = re.match(r"^\s*([\d,]+|\.)  (.*)$", line)
        if not match:
            continue
        if match.group(1) != ".":
            key = (f"{os.path.basename(source)}:{number}", match.group(2).strip())
            lines[key] = lines.get(key, 0) + int(match.group(1).replace(",", ""))
        number += 1
    return functions, lines


def per_op(small, large, ops):
    return {k: (large.get(k, 0) - small.get(k, 0)) / ops for k in set(small) | set(large)}


def print_breakdown(kernel, label, runs, build, top=10):
    (small_cg, _, small_ops), (large_cg, _, large_ops) = runs
    small_f, small_l = own_counts(annotate(small_cg, build))
    large_f, large_l = own_counts(annotate(large_cg, build))
    ops = large_ops - small_ops
    functions, lines = per_op(small_f, large_f, ops), per_op(small_l, large_l, ops)
    total = sum(functions.values())
    print(f"#### `{kernel}`: {label}, {total:.0f} instructions per operation")
    print()
    print("| function (own instructions, inlined code included) | per operation |")
    print("| --- | ---: |")
    for name, value in sorted(functions.items(), key=lambda item: -item[1])[:top]:
        if value >= 0.5:
            print(f"| `{name}` | {value:.1f} |")
    print()
    print("| source line | per operation |")
    print("| --- | ---: |")
    for (where, text), value in sorted(lines.items(), key=lambda item: -item[1])[:top + 5]:
        if value >= 0.5:
            text = text.replace("|", "\\|")
            print(f"| {where} `{text[:90]}` | {value:.1f} |")
    print()


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--exe", required=True)
    parser.add_argument("--build", required=True)
    parser.add_argument("--breakdown", nargs="*", default=[])
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--only", nargs="*", default=[], help="these kernels alone (comparing a change by hand)")
    args = parser.parse_args()
    exe, build = os.path.abspath(args.exe), os.path.abspath(args.build)
    if os.uname().machine != "x86_64":
        del KERNELS[0]
    if args.only:
        KERNELS[:] = [k for k in KERNELS if k[0] in args.only]

    with tempfile.TemporaryDirectory() as workdir:
        with concurrent.futures.ThreadPoolExecutor(args.jobs) as pool:
            futures = {(kernel, n): pool.submit(run_kernel, exe, workdir, kernel, n, function)
                       for kernel, small, large, _, function in KERNELS for n in (small, large)}
            runs = {kernel: (futures[kernel, small].result(), futures[kernel, large].result())
                    for kernel, small, large, _, _ in KERNELS}
        per = {}
        print("| operation (callgrind, instructions) | kernel | per operation |")
        print("| --- | --- | ---: |")
        for kernel, _, _, label, _ in KERNELS:
            (_, a, a_ops), (_, b, b_ops) = runs[kernel]
            per[kernel] = (b - a) / (b_ops - a_ops)
            print(f"| {label} | `{kernel}` | {per[kernel]:,.1f} |")
        print()
        print("Loop overhead is in every row (about 3 instructions: the compiled-out row).")
        print()
        for order in ("in-order", "shuffled"):
            if any(f"siblings-{k}-{order}" not in per for k in SIBLINGS):
                continue
            counts = [per[f"siblings-{k}-{order}"] for k in SIBLINGS]
            growth = counts[-1] / counts[1] - 1
            print(f"- instructions per scope for 2, 20, 200 and 1,000 call sites, {order.replace('-', ' ')}: "
                  f"{', '.join(f'{c:.1f}' for c in counts)}; 1,000 sites vs 20: {growth * 100:+.1f}%: "
                  f"{'flat' if growth <= FLAT else 'NOT flat'} (flat: at most +{FLAT * 100:.0f}%)")
        print()
        labels = {kernel: label for kernel, _, _, label, _ in KERNELS}
        for kernel in args.breakdown:
            if kernel in runs:
                print_breakdown(kernel, labels[kernel], runs[kernel], build)
    return 0


if __name__ == "__main__":
    sys.exit(main())
