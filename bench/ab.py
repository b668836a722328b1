#!/usr/bin/env python3
"""Two builds of the run-time benchmark, before and after a change, compared in one run.

    bench/ab.py BEFORE-BENCH AFTER-BENCH [--runs 4] [--rounds 101]

Each argument is a `tracetree-bench` built by scripts/bench (or a release folder with
-Dbenchmarks=true) from one tree. The two run alternately, `--runs` times each, so that the machine's
changes of speed fall on both; each run's rows are ratios to two clock reads of the same round, and
the table gives each row's median ratio per build and after / before. When the builds ran spall as a
peer, a second table gives its ratio (median over both builds' runs) beside each build's tracetree one.
"""
import argparse
import re
import statistics
import subprocess

ROW = re.compile(r"\| (.+?) \| [0-9.]+ [nµm]?s \| .*? \| ([0-9.]+)x \|")
# The "against spall" table (when the builds found spall): tracetree's ratio, spall's, their difference.
TWIN = re.compile(r"\| (.+?) \| ([0-9.]+)x \| ([0-9.]+)x \| [+-][0-9.]+ \|$")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("before")
    parser.add_argument("after")
    parser.add_argument("--runs", type=int, default=4)
    parser.add_argument("--rounds", type=int, default=101)
    args = parser.parse_args()
    ratios = {}  # row -> (before ratios, after ratios)
    twins = {}  # spall twin row -> (before's tracetree, after's tracetree, spall in either run)
    for run in range(args.runs):
        order = [(0, args.before), (1, args.after)]
        for side, exe in order if run % 2 == 0 else reversed(order):
            out = subprocess.run([exe, "--rounds", str(args.rounds)], capture_output=True, text=True, check=True).stdout
            for line in out.splitlines():
                match = ROW.match(line)
                if match:
                    ratios.setdefault(match.group(1), ([], []))[side].append(float(match.group(2)))
                match = TWIN.match(line)
                if match:
                    twin = twins.setdefault(match.group(1), ([], [], []))
                    twin[side].append(float(match.group(2)))
                    twin[2].append(float(match.group(3)))
    print(f"Medians of {args.runs} alternating runs of {args.rounds} rounds each; ratios to two clock reads.")
    print()
    print("| row | before | after | after / before |")
    print("| --- | ---: | ---: | ---: |")
    for row, (before, after) in ratios.items():
        if before and after:
            b, a = statistics.median(before), statistics.median(after)
            print(f"| {row} | {b:.2f}x | {a:.2f}x | {a / b:.3f} |")
    if twins:  # spall ran in the same processes: its ratio beside tracetree's, both builds' runs
        print()
        print("| against spall (same processes) | before | after | spall |")
        print("| --- | ---: | ---: | ---: |")
        for row, (before, after, spall) in twins.items():
            if before and after:
                b, a, p = statistics.median(before), statistics.median(after), statistics.median(spall)
                print(f"| {row} | {b:.2f}x | {a:.2f}x | {p:.2f}x |")


if __name__ == "__main__":
    main()
