"""scripts/xopp-cost.py (`make xopp-cost`): a Xournal++ page through a real canvasd in both ink
forms. The page is written here in Xournal++'s format from the recorded UNIPEN words
(Tests/Fixtures/strokes, CC BY 4.0): each word a pen whose width follows its pressure, as
Xournal++ writes one (a nominal width, then one width a point), with a highlighter and a
whiteout ("eraser") stroke, the three tools a Xournal++ page holds."""

from __future__ import annotations

import gzip
import importlib.util
import json
import re
import subprocess
import sys
from pathlib import Path

from conftest import ROOT, canvasd_path

SCRIPT = ROOT / "scripts" / "xopp-cost.py"
RECORDED = ROOT / "Tests" / "Fixtures" / "strokes" / "unipen-atu.json"


def xopp_cost():
    spec = importlib.util.spec_from_file_location("xopp_cost", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def write_page(path: Path) -> list:
    """Six recorded words as Xournal++ pens (1.41 pt), then a highlighter and a whiteout; the
    words' own pressures, to compare with what the script reads back."""
    words = [stroke["points"] for stroke in json.loads(RECORDED.read_text())["strokes"]][:6]
    elements, pressures = [], []
    for index, points in enumerate(words):
        x0, y0 = 60 + 80 * (index % 6), 120 + 40 * (index // 6)
        coordinates = " ".join(f"{x0 + x:.5f} {y0 + y:.5f}" for x, y, _ in points)
        # Xournal++: the nominal width, then one for each point but the last.
        widths = " ".join(["1.41"] + [f"{1.41 * (0.3 + 1.4 * p):.8f}" for _, _, p in points[:-1]])
        elements.append(f'<stroke tool="pen" ts="0" fn="" color="#1f3a93ff" width="{widths}" capStyle="round">{coordinates}</stroke>')
        pressures.append([p for _, _, p in points[:-1]] + [points[-2][2]])
    elements.append('<stroke tool="highlighter" color="#ffff007f" width="8.5">60 130 300.25 131.5 420 129</stroke>')
    elements.append('<stroke tool="eraser" color="#ffffffff" width="4.25">100 100 104.5 102.125</stroke>')
    page = ('<?xml version="1.0" standalone="no"?>\n<xournal creator="xournalpp 1.2.8" fileversion="4">'
            '<page width="595.27559" height="841.88976"><background type="solid" color="#ffffffff" style="lined"/>'
            f'<layer>{"".join(elements)}</layer></page></xournal>')
    path.write_bytes(gzip.compress(page.encode()))
    return pressures


def test_a_page_is_read_as_xournal_writes_it(tmp_path):
    pressures = write_page(tmp_path / "page.xopp")
    strokes = xopp_cost().strokes_of(tmp_path / "page.xopp")
    assert [(s["tool"], s["color"], s["width"]) for s in strokes] == \
        [("pen", "#1F3A93", 1.41)] * 6 + [("highlighter", "#FFFF00", 8.5), ("pen", "#FFFFFF", 4.25)]
    for stroke, expected in zip(strokes, pressures):
        # Each point's width back as the pressure that draws it, on the grid (0.001).
        assert [p["pressure"] for p in stroke["points"]] == [round(min(max(p, 0), 1) + 1e-12, 3) for p in expected]
        assert all(round(p["x"], 2) == p["x"] and round(p["y"], 2) == p["y"] for p in stroke["points"])
    assert strokes[6]["points"][1] == {"x": 300.25, "y": 131.5}
    assert all("pressure" not in p for p in strokes[6]["points"] + strokes[7]["points"])


def test_both_forms_are_saved_and_reopen_exactly(tmp_path):
    write_page(tmp_path / "page.xopp")
    result = subprocess.run([sys.executable, str(SCRIPT), str(tmp_path / "page.xopp"), "--canvasd", str(canvasd_path())],
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr
    costs = dict(re.findall(r"^\s+(paper|annotations)\s+[\d,]+ bytes appended,\s+([\d.]+) a point; reopened exactly as sent$",
                            result.stdout, re.MULTILINE))
    assert set(costs) == {"paper", "annotations"}, result.stdout
    # What the annotations add to paper: their /InkList and an object or two (spec 5.3).
    assert float(costs["paper"]) < float(costs["annotations"]) < float(costs["paper"]) + 8, result.stdout
