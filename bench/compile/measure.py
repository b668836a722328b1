#!/usr/bin/env python3
"""What including tracetree costs a file, for each compiler: run by scripts/bench.

    bench/compile/measure.py --include include --compilers g++ clang++ [--rounds 7]

Prints Markdown: per file, the -std=c++17 -fsyntax-only CPU time (user + sys of the compiler, from
wait4), the CPU time of an -O2 object (-c, what a release build pays), and the preprocessed line
count (-E), each as a ratio to baseline.cpp (<string> + <vector>);
the standard headers tracetree's own headers include; the annotated file's object at -O0 and -O2
with and without TRACETREE_DISABLE (size, and whether anything runs before main); then the targets.

Method, as in the run-time benchmark: every round compiles every file once, in an order that
rotates by one each round, and a ratio is the median of the per-round ratios, so that a neighbour's
build slows both sides of a ratio alike. Exit status 1 when a compiler fails on a file.
"""
import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))

# (label, source, extra flags); the first one named "baseline" is what ratios divide by.
FILES = [
    ("empty file", "empty.cpp", []),
    ("`<string>` + `<vector>` (baseline)", "baseline.cpp", []),
    ("annotated: `tracetree.hpp`, 3 scope macros, WATCH, THROW", "annotated.cpp", []),
    ("annotated, `-DTRACETREE_DISABLE`", "annotated.cpp", ["-DTRACETREE_DISABLE"]),
    ("`tracetree/all.hpp`, header-only", "all.cpp", []),
    ("`tracetree/all.hpp` with tracetree-runtime (`-DTRACETREE_SEPARATE_RUNTIME`)", "all.cpp", ["-DTRACETREE_SEPARATE_RUNTIME"]),
    ("`tracetree/control.hpp` and one annotated function, header-only", "control.cpp", []),
]
BASELINE = 1
ANNOTATED = 2
DISABLED = 3
ALL_RUNTIME = 5
CONTROL = 6
BEFORE = "before"  # the extra flag of the row that compiles control.cpp against --before's headers
STD = "-std=c++17"
BEFORE_INCLUDE = None


def fail(message):
    print(f"measure.py: {message}", file=sys.stderr)
    sys.exit(1)


PEAK = {}  # command -> the largest peak resident size (KB) seen for it


def cpu_seconds(command):
    """User + system CPU seconds of one run of `command` (the compiler and the tools it starts); the
    peak resident size of the largest of them goes to PEAK."""
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(process.pid, 0)
    errors = process.stderr.read().decode(errors="replace")
    process.stderr.close()
    process.returncode = os.waitstatus_to_exitcode(status)
    if process.returncode != 0:
        fail(f"{' '.join(command)} failed:\n{errors}")
    PEAK[tuple(command)] = max(PEAK.get(tuple(command), 0), usage.ru_maxrss)
    return usage.ru_utime + usage.ru_stime


def run(command):
    result = subprocess.run(command, capture_output=True, text=True)
    if result.returncode != 0:
        fail(f"{' '.join(command)} failed:\n{result.stderr}")
    return result


def compile_flags(include, source, extra):
    if BEFORE in extra:  # the same file against the older tree's headers
        include, extra = BEFORE_INCLUDE, [e for e in extra if e != BEFORE]
    return [STD, f"-I{include}", *extra, os.path.join(HERE, source)]


def median_ratio(values, base):
    return statistics.median(v / b for v, b in zip(values, base))


def std_headers(compiler, include, source, extra):
    """(headers tracetree's own headers include that the compiler opened, how many files outside
    tracetree were opened in all). `-H` prints each header it opens, one dot per level of nesting; a
    header already included elsewhere is not opened again, so the first list can miss one."""
    result = run([compiler, *compile_flags(include, source, extra), "-fsyntax-only", "-H"])
    ours = os.path.realpath(os.path.join(include, "tracetree"))
    stack, direct, opened = [os.path.join(HERE, source)], [], set()
    for line in result.stderr.splitlines():
        match = re.match(r"^(\.+) (.*)$", line)
        if not match:
            continue
        depth, path = len(match.group(1)), os.path.realpath(match.group(2))
        del stack[depth:]
        parent = stack[depth - 1] if depth - 1 < len(stack) else ""
        stack.append(path)
        if path.startswith(ours):
            continue
        opened.add(path)
        if parent.startswith(ours) and short_header(path) not in direct:
            direct.append(short_header(path))
    return direct, len(opened)


def short_header(path):
    for prefix in ("/usr/include/c++/", "/usr/include/x86_64-linux-gnu/", "/usr/include/",
                   "/usr/lib/llvm-"):
        if prefix in path:
            tail = path.split(prefix, 1)[1]
            if prefix == "/usr/include/c++/":  # drop the version directory: 12/atomic -> atomic
                tail = tail.split("/", 1)[1] if "/" in tail else tail
            if prefix == "/usr/lib/llvm-":
                tail = tail.split("/include/", 1)[-1]
            return f"<{tail}>"
    return path


def object_facts(compiler, include, optimisation, extra, workdir):
    """(bytes of text + data + bss, what runs before main) of annotated.cpp compiled to an object."""
    name = f"{os.path.basename(compiler)}{optimisation}{'-disabled' if extra else ''}.o"
    out = os.path.join(workdir, name)
    run([compiler, *compile_flags(include, "annotated.cpp", extra), optimisation, "-c", "-o", out])
    sizes = run(["size", out]).stdout.splitlines()[1].split()
    symbols = run(["nm", out]).stdout
    sections = run(["readelf", "-S", "-W", out]).stdout
    initialisers = sorted(set(re.findall(r"_GLOBAL__sub_I_\S*|_ZNSt8ios_base4Init\S*|__cxx_global_var_init\S*",
                                         symbols)))
    if re.search(r"\.init_array|\.ctors", sections):
        initialisers.append(".init_array section")
    return int(sizes[3]), initialisers


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--include", required=True)
    parser.add_argument("--compilers", nargs="+", default=["g++", "clang++"])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--before", metavar="INCLUDE_DIR",
                        help="an older tree's include/: control.cpp is priced against it too, in the same rounds")
    args = parser.parse_args()
    include = os.path.abspath(args.include)
    if args.before:
        global BEFORE_INCLUDE
        BEFORE_INCLUDE = os.path.abspath(args.before)
        FILES.append(("`tracetree/control.hpp` and one annotated function, header-only, in the `--before` tree",
                      "control.cpp", [BEFORE]))

    cpu = {c: [[] for _ in FILES] for c in args.compilers}
    cpu_o2 = {c: [[] for _ in FILES] for c in args.compilers}
    lines = {}
    for compiler in args.compilers:
        for i, (_, source, extra) in enumerate(FILES):
            out = run([compiler, *compile_flags(include, source, extra), "-E"]).stdout
            lines[compiler, i] = out.count("\n")
    jobs = [(c, i) for c in args.compilers for i in range(len(FILES))]
    for r in range(args.rounds):
        for k in range(len(jobs)):
            compiler, i = jobs[(r + k) % len(jobs)]
            _, source, extra = FILES[i]
            cpu[compiler][i].append(cpu_seconds([compiler, *compile_flags(include, source, extra), "-fsyntax-only"]))
            cpu_o2[compiler][i].append(cpu_seconds([compiler, *compile_flags(include, source, extra), "-O2", "-c", "-o", os.devnull]))

    versions = {c: run([c, "--version"]).stdout.splitlines()[0] for c in args.compilers}
    print(f"Compilers: {'; '.join(f'`{c}`: {v}' for c, v in versions.items())}. `{STD} -fsyntax-only` and "
          f"`{STD} -O2 -c`, CPU time (user + sys), median of {args.rounds} interleaved rounds; lines of `-E` output.")
    print()
    header = "| file |" + "".join(f" {c} CPU | ratio | {c} -O2 CPU | ratio | {c} lines | ratio |" for c in args.compilers)
    print(header)
    print("| --- |" + " ---: | ---: | ---: | ---: | ---: | ---: |" * len(args.compilers))
    for i, (label, _, _) in enumerate(FILES):
        cells = []
        for c in args.compilers:
            cells.append(f"{statistics.median(cpu[c][i]) * 1000:.0f} ms")
            cells.append(f"{median_ratio(cpu[c][i], cpu[c][BASELINE]):.2f}x")
            cells.append(f"{statistics.median(cpu_o2[c][i]) * 1000:.0f} ms")
            cells.append(f"{median_ratio(cpu_o2[c][i], cpu_o2[c][BASELINE]):.2f}x")
            cells.append(f"{lines[c, i]:,}")
            cells.append(f"{lines[c, i] / lines[c, BASELINE]:.2f}x")
        print(f"| {label} | " + " | ".join(cells) + " |")
    print()

    headers = {}
    for c in args.compilers:
        for i in (ANNOTATED, DISABLED):
            _, source, extra = FILES[i]
            headers[c, i] = std_headers(c, include, source, extra)
        (direct, opened), (direct_off, opened_off) = headers[c, ANNOTATED], headers[c, DISABLED]
        print(f"- {c}: the light header includes {', '.join(direct) or 'nothing'} ({opened} files outside "
              f"tracetree opened in all); with `-DTRACETREE_DISABLE`: {', '.join(direct_off) or 'nothing'} "
              f"({opened_off} files)")
    print()

    objects = {}
    with tempfile.TemporaryDirectory() as workdir:
        print("| `annotated.cpp` as an object | -O0 size | -O2 size | runs before `main` (-O0, -O2) |")
        print("| --- | ---: | ---: | --- |")
        for c in args.compilers:
            for extra in ([], ["-DTRACETREE_DISABLE"]):
                o0 = object_facts(c, include, "-O0", extra, workdir)
                o2 = object_facts(c, include, "-O2", extra, workdir)
                objects[c, bool(extra)] = (o0, o2)
                runs = sorted(set(o0[1] + o2[1]))
                print(f"| {c}{', `-DTRACETREE_DISABLE`' if extra else ''} | {o0[0]:,} B | {o2[0]:,} B | "
                      f"{', '.join(runs) if runs else 'nothing'} |")
    print()
    print("Sizes are text + data + bss as `size` prints them; \"runs before `main`\" looks for "
          "`_GLOBAL__sub_I_*`, `ios_base::Init` and `__cxx_global_var_init` in `nm` and for an "
          "`.init_array` section.")
    print()

    print("| `-O2 -c`, peak memory of the compiler | " + " | ".join(args.compilers) + " |")
    print("| --- |" + " ---: |" * len(args.compilers))
    for i, (label, source, extra) in enumerate(FILES):
        if i >= ALL_RUNTIME - 1:
            peaks = [PEAK[tuple([c, *compile_flags(include, source, extra), "-O2", "-c", "-o", os.devnull])] for c in args.compilers]
            print(f"| {label} | " + " | ".join(f"{kb / 1024:.0f} MB" for kb in peaks) + " |")
    print()

    print("| compile target | measured | met |")
    print("| --- | --- | --- |")
    for c in args.compilers:
        if args.before:
            before = len(FILES) - 1
            ratio = median_ratio(cpu_o2[c][CONTROL], cpu_o2[c][before])
            print(f"| {c}: `control.hpp` header-only <= 0.5x its -O2 CPU before | {ratio:.2f}x | {'yes' if ratio <= 0.5 else 'no'} |")
            ratio = median_ratio(cpu_o2[c][ALL_RUNTIME], cpu_o2[c][before])
            peak = PEAK[tuple([c, *compile_flags(include, "all.cpp", FILES[ALL_RUNTIME][2]), "-O2", "-c", "-o", os.devnull])] / 1024
            met = ratio <= 0.15 and peak <= 200
            print(f"| {c}: `all.hpp` with tracetree-runtime <= 0.15x `control.hpp`'s -O2 CPU before, <= 200 MB | "
                  f"{ratio:.2f}x, {peak:.0f} MB | {'yes' if met else 'no'} |")
        ratio = median_ratio(cpu[c][ANNOTATED], cpu[c][BASELINE])
        met = "yes" + (" (aim 0.5x met too)" if ratio <= 0.5 else "") if ratio <= 1.0 else \
            f"no: {ratio - 1.0:.2f}x over"
        print(f"| {c}: annotated file <= 1.0x the baseline's CPU time (aim 0.5x) | {ratio:.2f}x | {met} |")
        direct_off, _ = headers[c, DISABLED]
        found = [h for h in direct_off if h != "<cstdint>"]
        print(f"| {c}: `-DTRACETREE_DISABLE` includes no standard header (or only `<cstdint>`) | "
              f"{', '.join(direct_off) or 'none'} | {'no' if found else 'yes'} |")
        runs = sorted(set(x for pair in objects[c, False] + objects[c, True] for x in pair[1]))
        print(f"| {c}: nothing runs before `main` in the annotated object (-O0, -O2, both switches) | "
              f"{', '.join(runs) or 'nothing'} | {'no' if runs else 'yes'} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
