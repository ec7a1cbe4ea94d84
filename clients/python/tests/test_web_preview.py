"""The ink preview (clients/web/ink.js) against what canvasd puts in the PDF: a page drawn in
headless Chromium with the module, the same drawing flattened and rendered by poppler, both at
144 dpi. A pen's preview stays inside the stroke's envelope (spec §4), and preview and PDF put
ink in the same places, texts included."""

from __future__ import annotations

import math

import pytest

from images import new_dark_pixels, render_page
from web import run_js

SCALE = 2   # pixels per point at 144 dpi


# Draws args.drawing with ink.js on a white canvas of args.width x args.height points at
# SCALE pixels per point, and returns the dark pixels as a flat [x0, y0, x1, y1, ...].
PREVIEW = """
  const ink = await import('/ink.js');
  const canvas = document.createElement('canvas');
  canvas.width = Math.round(args.width * args.scale);
  canvas.height = Math.round(args.height * args.scale);
  const context = canvas.getContext('2d');
  context.fillStyle = '#ffffff';
  context.fillRect(0, 0, canvas.width, canvas.height);
  context.setTransform(args.scale, 0, 0, args.scale, 0, 0);
  await document.fonts.load('24px "DejaVu Sans"');
  ink.drawInk(context, args.drawing);
  const data = context.getImageData(0, 0, canvas.width, canvas.height).data;
  const dark = [];
  for (let i = 0; i < data.length; i += 4) {
    if (0.299 * data[i] + 0.587 * data[i + 1] + 0.114 * data[i + 2] < 100) {
      const p = i / 4;
      dark.push(p % canvas.width, Math.floor(p / canvas.width));
    }
  }
  return dark;
"""


def pixels(flat):
    return {(flat[i], flat[i + 1]) for i in range(0, len(flat), 2)}


def near(a, b, reach: int):
    """The share of pixels of `a` with a pixel of `b` within `reach` pixels (a square)."""
    hits = sum(1 for (x, y) in a if any((x + dx, y + dy) in b for dx in range(-reach, reach + 1) for dy in range(-reach, reach + 1)))
    return hits / len(a)


def envelope_distance(x: float, y: float, stroke) -> float:
    """How far (x, y) lies outside the union of the tapered capsules of spec §4's envelope
    (each point's own pressure radius plus 0.5 pt, at most 0.85 x width); <= 0 inside."""
    def reach(point):
        pressure = point.get("pressure")
        factor = 1.0 if pressure is None else 0.3 + 1.4 * pressure
        return min(stroke["width"] * 1.7 / 2, stroke["width"] * factor / 2 + 0.5)
    points = stroke["points"]
    best = math.inf
    for a, b in zip(points, points[1:] or points):
        ra, rb = reach(a), reach(b)
        for k in range(41):
            t = k / 40
            cx, cy = a["x"] + t * (b["x"] - a["x"]), a["y"] + t * (b["y"] - a["y"])
            best = min(best, math.hypot(x - cx, y - cy) - (ra + t * (rb - ra)))
    return best


def test_the_pen_preview_stays_inside_the_envelope_of_spec_4(web, browser):
    # A hairpin (a Catmull-Rom curve through these points overshoots the turn by many points)
    # and a zigzag with pressure from 0 to 1.
    hairpin = {"tool": "pen", "color": "black", "width": 6,
               "points": [{"x": 100, "y": 100}, {"x": 300, "y": 100}, {"x": 100, "y": 104}]}
    zigzag = {"tool": "pen", "color": "blue", "width": 8,
              "points": [{"x": 80 + 20 * i, "y": 300 + (40 if i % 2 else 0), "pressure": i / 10} for i in range(11)]}
    strokes = [hairpin, zigzag]
    browser.get(f"{web.base}/harness.html")
    dark = pixels(run_js(browser, PREVIEW, width=612, height=792, scale=SCALE, drawing={"strokes": strokes, "texts": []}))
    assert len(dark) > 2000
    outside = [(x, y) for (x, y) in dark
               if min(envelope_distance((x + 0.5) / SCALE, (y + 0.5) / SCALE, s) for s in strokes) > 0.75 / SCALE]
    assert outside == [], f"{len(outside)} preview pixels outside the envelope, e.g. {outside[:5]}"
    # And it is ink where the points are: every input point is drawn.
    for stroke in strokes:
        for point in stroke["points"]:
            assert (int(point["x"] * SCALE), int(point["y"] * SCALE)) in dark, point


def test_the_preview_puts_ink_and_text_where_the_pdf_does(web, browser):
    drawing = {
        "strokes": [
            {"tool": "pen", "color": "black", "width": 3,
             "points": [{"x": 80 + 4 * i, "y": 200 + 30 * math.sin(i / 12), "pressure": 0.2 + 0.6 * (i % 40) / 40} for i in range(100)]},
            {"tool": "pen", "color": "#202020", "width": 5, "points": [{"x": 100, "y": 420}, {"x": 400, "y": 470}]},
            {"tool": "highlighter", "color": "blue", "width": 12, "points": [{"x": 90, "y": 520}, {"x": 450, "y": 520}]},
        ],
        "texts": [
            {"text": "Preview: Ågjpq 123", "x": 90, "y": 600, "fontSize": 24, "color": "black"},
            {"text": "two lines,\nthe second lower", "x": 300, "y": 300, "fontSize": 14, "color": "black"},
        ],
    }
    documents = web.canvasd.documents
    before = render_page(documents / "notes.pdf", 0, dpi=72 * SCALE)
    with web.canvasd.client() as client:
        info = client.call("document.info", {"name": "notes.pdf"})
        client.call("document.flatten", {"name": "notes.pdf", "page": 0, "drawing": drawing})
    after = render_page(documents / "notes.pdf", 0, dpi=72 * SCALE)
    pdf = set(new_dark_pixels(before, after))
    page = info["pages"][0]
    browser.get(f"{web.base}/harness.html")
    preview = pixels(run_js(browser, PREVIEW, width=page["width"], height=page["height"], scale=SCALE, drawing=drawing))
    assert len(pdf) > 3000 and len(preview) > 3000
    # Within 1 pt (2 px) of each other, both ways: the same strokes, and texts on the same
    # baselines in the same font (a baseline 2 pt off, or lines 1.17 instead of 1.164 em apart
    # at the second line, moves more than that).
    assert near(pdf, preview, 2) > 0.97, near(pdf, preview, 2)
    assert near(preview, pdf, 2) > 0.97, near(preview, pdf, 2)
    # Each text's ink starts on its own rows: the top of the 24 pt text's capitals (Å's ring
    # reaches highest) in the PDF and the preview within 1 pt.
    def top(ink, x0, x1, y0, y1):
        return min(y for (x, y) in ink if x0 <= x < x1 and y0 <= y < y1)
    box = (90 * SCALE, 400 * SCALE, 590 * SCALE, 640 * SCALE)
    assert abs(top(pdf, *box) - top(preview, *box)) <= 2
