#!/usr/bin/env python3
"""What a Xournal++ page costs in a PDF through canvasd, set against Xournal++'s own file
(`make xopp-cost XOPP=notes.xopp`).

Reads the first page of an .xopp file (gzipped XML) that has strokes and sends them to a real
canvasd as one `document.flatten` into page 1 of samples/notes.pdf, once as paper and once as
annotations (spec §5.3), then prints what each save appended, in bytes a point, beside the
.xopp file's own size a point. Each form is reopened (`canvas.open` with `reopen: true`) and
must give back exactly the drawing sent.

The strokes are sent as a client on the ink grid sends them (the web client does): positions
to 0.01 pt, pressure to 0.001. Xournal++ writes a pressure-sensitive stroke's width as its
nominal width followed by one width a point; a point's pressure is then the one whose ink width
(spec §4: width × (0.3 + 1.4 × pressure)) is that width, within 0 to 1, and the last point,
which has none of its own, takes the one before it. Xournal++'s highlighter is ours; its pen and
its whiteout ("eraser" strokes, drawn in white) are pens. Colours lose their alpha; widths are
held to 0.1 to 200, texts are left out.

    .venv/bin/python scripts/xopp-cost.py notes.xopp [--canvasd .build/release/canvasd]
"""

from __future__ import annotations

import argparse
import gzip
import shutil
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ElementTree
from pathlib import Path
from typing import Dict, List

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "clients" / "python"))

from canvasbridge import CanvasClient, CanvasTimeout, ink_source  # noqa: E402


def grid(value: float, steps: int) -> float:
    """`value` on the ink grid as a client sends it, a -0 as 0."""
    return ink_source.on_grid(value, steps) + 0.0


def strokes_of(path: Path) -> List[Dict]:
    """The strokes of the file's first page that has any, as `document.flatten` takes them."""
    root = ElementTree.fromstring(gzip.decompress(path.read_bytes()))
    for page in root.iter("page"):
        strokes = []
        for element in page.iter("stroke"):
            numbers = [float(n) for n in (element.text or "").split()]
            widths = [float(w) for w in element.get("width", "1").split()]
            nominal = min(max(widths[0], 0.1), 200)
            tool = "highlighter" if element.get("tool") == "highlighter" else "pen"
            points = []
            for index in range(len(numbers) // 2):
                point = {"x": grid(numbers[2 * index], 100), "y": grid(numbers[2 * index + 1], 100)}
                if len(widths) > 1 and tool == "pen":
                    own = widths[min(index + 1, len(widths) - 1)]
                    point["pressure"] = grid(min(max((own / widths[0] - 0.3) / 1.4, 0.0), 1.0), 1000)
                points.append(point)
            if points:
                strokes.append({"tool": tool, "color": "#" + element.get("color", "#000000")[1:7].upper(),
                                "width": grid(nominal, 100), "points": points})
        if strokes:
            return strokes
    raise SystemExit(f"{path}: no page with strokes")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("xopp", type=Path)
    parser.add_argument("--canvasd", type=Path, default=ROOT / ".build" / "release" / "canvasd")
    arguments = parser.parse_args()
    strokes = strokes_of(arguments.xopp)
    points = sum(len(stroke["points"]) for stroke in strokes)
    drawing = {"strokes": strokes, "texts": []}
    print(f"{arguments.xopp.name}: {len(strokes)} strokes, {points} points; the .xopp file "
          f"{arguments.xopp.stat().st_size:,} bytes, {arguments.xopp.stat().st_size / points:.2f} a point")
    with tempfile.TemporaryDirectory() as scratch:
        folder = Path(scratch)
        documents = folder / "documents"
        documents.mkdir()
        endpoint = f"ipc://{folder}/requests"
        with open(folder / "canvasd.log", "wb") as log:
            process = subprocess.Popen([str(arguments.canvasd), "--endpoint", endpoint, "--events", f"ipc://{folder}/events",
                                        "--documents", str(documents)], stdout=log, stderr=subprocess.STDOUT)
        try:
            with CanvasClient(endpoint, timeout=0.5, retries=0) as probe:
                for _ in range(40):
                    try:
                        probe.hello()
                        break
                    except CanvasTimeout:
                        time.sleep(0.05)
            with CanvasClient(endpoint, timeout=60) as client:
                for form in ("paper", "annotations"):
                    name = f"{form}.pdf"
                    shutil.copy(ROOT / "samples" / "notes.pdf", documents / name)
                    before = (documents / name).stat().st_size
                    client.call("document.flatten", {"name": name, "page": 0, "drawing": drawing, "inkForm": form})
                    appended = (documents / name).stat().st_size - before
                    session = client.open_session()
                    session.open(document=name, page=0, reopen=True)
                    back = session.get_drawing()
                    exact = back["strokes"] == strokes
                    print(f"  {form:12} {appended:8,} bytes appended, {appended / points:6.2f} a point; "
                          f"reopened {'exactly as sent' if exact else 'NOT as sent'}")
                    if not exact:
                        raise SystemExit(1)
        finally:
            process.terminate()
            process.wait()


if __name__ == "__main__":
    main()
