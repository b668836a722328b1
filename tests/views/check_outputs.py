#!/usr/bin/env python3
"""Parses every view of the hostile samples with real parsers: Python's json (strict UTF-8, the JSON
tree and the Chrome trace) and xml.etree (the SVG flame graphs), and checks names survive.

Usage: check_outputs.py VIEWS-DUMP"""
import json
import os
import re
import shlex
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET

SVG = "{http://www.w3.org/2000/svg}"
failures = []


def check(ok, what):
    if not ok:
        failures.append(what)
        print("FAIL:", what)


def load_json(path):
    with open(path, "rb") as f:
        data = f.read()
    return json.loads(data.decode("utf-8"))  # strict: any byte that is not UTF-8 fails here


def xml_safe(name):
    """What an SVG can carry: control characters (but the newline) become U+FFFD."""
    return "".join("\ufffd" if (ord(c) < 0x20 and c != "\n") or c == "\x7f" else c for c in name)


def node_names(node, out):
    out.append(node["name"])
    for child in node["children"]:
        node_names(child, out)
    return out


def main():
    dump = sys.argv[1]
    with tempfile.TemporaryDirectory() as d:
        # A cross build's program runs under meson's exe wrapper (tests/cross: qemu-aarch64).
        subprocess.run(shlex.split(os.environ.get("MESON_EXE_WRAPPER", "")) + [dump, d], check=True)
        with open(d + "/names.hex") as f:
            raw = [bytes.fromhex(line) for line in f.read().split("\n")[:-1]]
        # The writers replace each byte that starts no valid UTF-8 sequence with U+FFFD, as Python does.
        names = [r.decode("utf-8", "replace") for r in raw]
        check(len(names) == 10, "ten hostile names")

        # JSON tree of a profile.
        profile = load_json(d + "/hostile-profile.json")
        check(profile["format"] == "tracetree" and profile["version"] == 1 and profile["kind"] == "profile",
              "profile header")
        threads = profile["threads"]
        check([t["thread_name"] for t in threads] == ['thread "name"\n\\ ;', names[5]], "thread names")
        got = []
        for t in threads:
            for root in t["roots"]:
                node_names(root, got)
        expected = [names[0]]
        for n in names[1:]:
            expected += [n, n + " sibling"]
        expected += [names[2]]
        check(sorted(got) == sorted(expected), "every node name of the profile, exactly")
        check(threads[0]["roots"][0]["file"] == 'dir\\file "x".cpp', "file with a backslash and quotes")
        check(threads[1]["exited"] is True and threads[0]["dropped_nodes"] == 4, "thread fields")

        # JSON tree of a trace.
        trace = load_json(d + "/hostile-trace.json")
        check(trace["kind"] == "trace" and trace["fields"] == [['k"\n', "v\\\x01"]], "trace fields")
        check(trace["root"]["name"] == names[0], "trace root")

        # Chrome trace events.
        chrome = load_json(d + "/hostile.chrome.json")
        events = chrome["traceEvents"]
        check(isinstance(events, list), "traceEvents is a list")
        for e in events:
            check(e["ph"] in ("X", "M", "i") and isinstance(e["pid"], int) and isinstance(e["tid"], int),
                  "event fields: %r" % (e,))
        spans = [e for e in events if e["ph"] == "X"]
        check([e["name"] for e in spans] == names, "span names, in start order")
        check([e["args"]["file"] for e in spans] == names, "span files")
        check(all(isinstance(e["ts"], (int, float)) and e["dur"] == 0.5 for e in spans), "ts and dur in us")
        check([e["ts"] for e in spans] == sorted(e["ts"] for e in spans), "ts ascending")
        meta = [e for e in events if e["ph"] == "M" and e["name"] == "thread_name"]
        check([(e["tid"], e["args"]["name"]) for e in meta] == [(7, 'thread "name"\n\\ ;')], "thread_name metadata")
        dropped = [e for e in events if e["ph"] == "i"]
        check(len(dropped) == 1 and dropped[0]["args"]["dropped"] == 3 and
              dropped[0]["name"].startswith("tracetree: 3 spans dropped") and dropped[0]["ts"] == spans[-1]["ts"] + 0.5,
              "dropped marker at the end of the last kept span")

        # SVG flame graphs: well-formed XML, no script, a tooltip per frame.
        for svg in ("hostile.svg", "hostile-diff.svg", "buggy.svg", "buggy-fixed.diff.svg"):
            root = ET.parse(d + "/" + svg).getroot()
            check(root.tag == SVG + "svg", svg + ": an svg root")
            check(not any(el.tag.endswith("script") for el in root.iter()), svg + ": no script")
            width = float(root.get("width"))
            frames = root.findall(SVG + "g")
            check(len(frames) > 3, svg + ": frames")
            for g in frames:
                title, rect = g.find(SVG + "title"), g.find(SVG + "rect")
                check(title is not None and rect is not None, svg + ": title and rect per frame")
                x, w = float(rect.get("x")), float(rect.get("width"))
                check(w > 0 and x >= 10 and x + w <= width - 10 + 0.002, svg + ": frame inside the graph")
            if svg.startswith("hostile"):
                titles = [g.find(SVG + "title").text or "" for g in frames]
                for n in names:
                    check(any(t.startswith(xml_safe(n) + "\n") for t in titles), svg + ": tooltip for %r" % n[:40])
        title = ET.parse(d + "/hostile.svg").getroot().find(SVG + "text").text
        check(title == names[8], "graph title escaped")

        # Folded stacks: valid UTF-8, no control characters, a number at the end of each line.
        with open(d + "/hostile.folded", "rb") as f:
            lines = f.read().decode("utf-8").split("\n")
        check(lines[-1] == "" and len(lines) == 21, "folded line count")
        for line in lines[:-1]:
            check(re.fullmatch(r"[^\x00-\x1f\x7f]* [0-9]+", line) is not None, "folded line %r" % line[:60])
    if failures:
        print("%d checks failed" % len(failures))
        return 1
    print("all parsed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
