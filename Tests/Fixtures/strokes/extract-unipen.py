#!/usr/bin/env python3
"""Picks recorded pen strokes out of the UNIPEN train_r01_v07 set (the atu part: cursive German
words written on a WACOM SD-420E at 1270 lines per inch, 200 samples a second, with pressure)
and writes them as unipen-atu.json: display points (1/72 inch, y down), each stroke moved to
start near the origin, pressure scaled to 0...1 by the largest value in the files read.

Usage: extract-unipen.py GIT_DIR > unipen-atu.json   (GIT_DIR: a clone of the data set's repository)
"""
import json
import subprocess
import sys

git = sys.argv[1]
files = subprocess.run(["git", "--git-dir", git, "ls-tree", "-r", "--name-only", "HEAD", "include/atu/data"],
                       check=True, capture_output=True, text=True).stdout.split()
strokes, largest = [], 0
for name in files:
    text = subprocess.run(["git", "--git-dir", git, "show", "HEAD:" + name], capture_output=True, text=True).stdout
    current = None
    for line in text.splitlines() + [".END"]:
        if line.startswith("."):
            if current is not None and 97 <= len(current) <= 675:
                strokes.append((name, current))
            current = [] if line.startswith(".PEN_DOWN") else None
            continue
        fields = line.split()
        if current is not None and len(fields) == 4:
            x, y, _, p = (int(f) for f in fields)
            largest = max(largest, p)
            if p > 0:
                current.append((x, y, p))
            elif current:
                # The tablet reports a lifted pen as zero pressure: a stroke ends there.
                if 97 <= len(current) <= 675:
                    strokes.append((name, current))
                current = []
# One stroke from each of 24 files spread over the set, the longest in each.
by_file = {}
for name, points in strokes:
    if len(points) > len(by_file.get(name, [])):
        by_file[name] = points
names = sorted(by_file)
chosen = [names[i * len(names) // 24] for i in range(24)]
out = []
for name in chosen:
    points = by_file[name]
    x0 = min(p[0] for p in points)
    y1 = max(p[1] for p in points)
    out.append({"source": name, "points": [[round((x - x0) * 72 / 1270, 2), round((y1 - y) * 72 / 1270, 2), round(p / largest, 3)]
                                           for x, y, p in points]})
json.dump({"from": "UNIPEN train_r01_v07, atu (CC BY 4.0)", "pressureScale": largest, "strokes": out}, sys.stdout, separators=(",", ":"))
print()
