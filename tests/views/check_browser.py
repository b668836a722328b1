#!/usr/bin/env python3
"""Renders flame graphs in headless Chromium (scripts/render-svg) and checks the pixels: each frame's
box is painted in its fill colour where the SVG puts it, and its label is drawn over it. A malformed
SVG would render Chromium's XML error page instead. Exit 77 (skip) when Chromium is not installed.

Usage: check_browser.py VIEWS-DUMP RENDER-SVG"""
import importlib.machinery
import importlib.util
import os
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET

SVG = "{http://www.w3.org/2000/svg}"
sys.dont_write_bytecode = True  # loading scripts/render-svg must leave no __pycache__ behind


def load_render_svg(path):
    loader = importlib.machinery.SourceFileLoader("render_svg", path)
    spec = importlib.util.spec_from_loader("render_svg", loader)
    module = importlib.util.module_from_spec(spec)
    loader.exec_module(module)
    return module


def rgb(fill):
    return tuple(int(v) for v in fill[4:-1].split(","))


def check_render(render, svg_path, png_path, frames_to_check):
    run = subprocess.run([sys.executable, render, svg_path, png_path])
    if run.returncode != 0:
        return ["render-svg failed on " + svg_path]
    size = os.path.getsize(png_path)
    root = ET.parse(svg_path).getroot()
    width, height, rows = load_render_svg(render).read_png(png_path)
    problems = []
    if (width, height) != (int(root.get("width")), int(root.get("height"))):
        return ["PNG is %dx%d, the SVG %sx%s" % (width, height, root.get("width"), root.get("height"))]
    if size < 5000:
        problems.append("PNG of %d bytes: nothing rendered?" % size)

    def pixel(x, y):
        return tuple(rows[y][4 * x:4 * x + 3])

    found = set()
    for g in root.findall(SVG + "g"):
        name = g.find(SVG + "title").text.split("\n")[0]
        prefixes = [prefix for prefix in frames_to_check if name.startswith(prefix)]
        if not prefixes:
            continue
        found.update(prefixes)
        rect = g.find(SVG + "rect")
        x, y, w, h = (float(rect.get(k)) for k in ("x", "y", "width", "height"))
        want = rgb(rect.get("fill"))
        # The right end of the box is clear of its label; away from the 0.5 px outline.
        px, py = int(x + w - 3), int(y + h / 2)
        if max(abs(a - b) for a, b in zip(pixel(px, py), want)) > 3:
            problems.append("%s: pixel (%d,%d) is %s, its fill %s" % (name, px, py, pixel(px, py), want))
        if g.find(SVG + "text") is not None:
            ink = sum(1 for yy in range(int(y) + 2, int(y + h) - 2) for xx in range(int(x) + 3, int(x) + 60)
                      if sum(abs(a - b) for a, b in zip(pixel(xx, yy), want)) > 150)
            if ink < 20:
                problems.append("%s: no label drawn (%d pixels of ink)" % (name, ink))
    if found != set(frames_to_check):
        problems.append("frames not drawn: %s" % sorted(set(frames_to_check) - found))
    return problems


def main():
    dump, render = sys.argv[1], sys.argv[2]
    if not os.access(os.environ.get("CHROMIUM", "/usr/bin/chromium"), os.X_OK):
        print("chromium is not installed: skipped (apt-get install -y chromium)")
        return 77
    problems = []
    with tempfile.TemporaryDirectory() as d:
        subprocess.run([dump, d], check=True)
        problems += check_render(render, d + "/buggy.svg", d + "/buggy.png",
                                 ["Http11Processor::service()", "TomcatJarInputStream::getNextJarEntry()",
                                  "UserRepository::findAll()"])
        problems += check_render(render, d + "/buggy-fixed.diff.svg", d + "/diff.png",
                                 ["TomcatJarInputStream::getNextJarEntry()", "Http11Processor::service()",
                                  "JsonWriter::write()"])
        problems += check_render(render, d + "/hostile.svg", d + "/hostile.png", ["quote\"d", "semi;colon"])
    for p in problems:
        print("FAIL:", p)
    if problems:
        return 1
    print("rendered by chromium as drawn")
    return 0


if __name__ == "__main__":
    sys.exit(main())
