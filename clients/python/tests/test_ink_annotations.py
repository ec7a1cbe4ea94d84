"""Ink saved as standard PDF annotations (canvas/1.8, `inkForm: "annotations"`), judged by other
programs than canvasd: pdf.js in Chromium, poppler, MuPDF, pikepdf and qpdf.

The ink is real handwriting: the recorded UNIPEN words of Tests/Fixtures/strokes/unipen-atu.json
(CC BY 4.0), set on ruled lines as Sources/TestSupport/RecordedHandwriting.swift sets them and
rounded as clients send them, with a highlighter run under the first line and a two-line note.
Every line of words is one pen (one colour, one width), so each line is one run of strokes and
one /Ink annotation with an /InkList entry per word.

What a viewer must see: the annotation form drawn exactly as the paper form (the same page,
within 0.1% of pixels at 150 dpi, in three renderers, upright and rotated), the /Ink and
/FreeText annotations as standard ones (pdf.js's getAnnotations), and what another program did
to them read back on reopen, never silently written over."""

from __future__ import annotations

import base64
import io
import json
import math
import shutil
import subprocess
import tempfile
import threading
from decimal import Decimal
from functools import partial
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Dict, List, Tuple

import pytest

# Test extras (make python-deps installs them): a missing one fails the run, never skips it.
import pikepdf
from PIL import Image, ImageChops

from canvasbridge import CanvasError, ink_source
from conftest import CORPUS, ROOT

RECORDED = ROOT / "Tests" / "Fixtures" / "strokes" / "unipen-atu.json"
PDFJS = Path("/usr/share/javascript/pdf/build")   # Debian's libjs-pdf, as scripts/web-server.py serves it

# An upright corpus page with text and link annotations of its own (A4), and a page turned by
# /Rotate 90, whose display space is not user space turned upside down but turned a quarter.
UPRIGHT = ("basicapi.pdf", 0)
ROTATED = ("hello_world_rotated.pdf", 0)

DPI = 150
LEVELS = 16      # a pixel differs when its grey levels differ by more than this
BOUND = 0.001    # at most this share of pixels may differ: anti-aliasing, never a stroke

# Spec §4's colour names, to compare a colour read back from /C with the one submitted.
NAMED = {"black": "#000000", "blue": "#0000FF", "red": "#FF0000", "purple": "#800080", "green": "#008000",
         "yellow": "#FFFF00", "orange": "#FFA500", "white": "#FFFFFF"}


# -- the drawing ------------------------------------------------------------------------------

def recorded_words() -> List[List[List[float]]]:
    """The recorded words: each a list of [x, y, pressure], starting near the origin."""
    return [stroke["points"] for stroke in json.loads(RECORDED.read_text())["strokes"]]


def handwriting(words: int = 14) -> Dict:
    """`words` recorded words left to right on lines 34 pt apart from y = 180 (each word's
    lowest point on the line, 14 pt between words), a line one pen; two highlighter drags under
    the first line, drawn first as a hand would; a note in the top margin."""
    pens = [("black", 2.2), ("#1F3A93", 1.8), ("black", 2.6)]
    strokes, x, line = [], 48.0, 0
    for points in recorded_words()[:words]:
        low, high = min(p[0] for p in points), max(p[0] for p in points)
        bottom = max(p[1] for p in points)
        if x + (high - low) > 540:
            x, line = 48.0, line + 1
        dx, dy = x - low, 180 + 34 * line - bottom
        color, width = pens[line % len(pens)]
        # Rounded as the clients send them: positions to 0.01 pt, pressure to 0.001.
        strokes.append({"tool": "pen", "color": color, "width": width,
                        "points": [{"x": round(p[0] + dx, 2), "y": round(p[1] + dy, 2), "pressure": round(p[2], 3)}
                                   for p in points]})
        x += high - low + 14
    # A highlighter is dragged straight along a line, with no pressure: a point every 6 pt.
    highlighters = [{"tool": "highlighter", "color": "yellow", "width": 10,
                     "points": [{"x": float(px), "y": 176.5} for px in range(start, end + 1, 6)]}
                    for start, end in ((48, 246), (262, 400))]
    return {"strokes": highlighters + strokes,
            "texts": [{"text": "checked ✓ by hand\nsecond line", "x": 330, "y": 84, "fontSize": 14, "color": "#1F3A93"}]}


def runs(drawing: Dict) -> List[List[int]]:
    """The indexes of the strokes of each run: consecutive strokes of one tool, colour and width."""
    out: List[List[int]] = []
    for index, stroke in enumerate(drawing["strokes"]):
        style = (stroke["tool"], stroke["color"], stroke["width"])
        if out and style == tuple(drawing["strokes"][out[-1][0]][k] for k in ("tool", "color", "width")):
            out[-1].append(index)
        else:
            out.append([index])
    return out


# -- documents --------------------------------------------------------------------------------

def save(server, client, fixture: Tuple[str, int], drawing: Dict, form: str, name: str) -> Path:
    """A copy of the corpus `fixture` as document `name`, with `drawing` saved on its page in
    `form`; the annotation form is checked to be one (/Ink and /FreeText beside an untouched
    page), so a server that saved paper instead fails here, not by accident further on."""
    document, page = fixture
    shutil.copy(CORPUS / document, server.documents / name)
    client.call("document.flatten", {"name": name, "page": page, "drawing": drawing, "inkForm": form})
    path = server.documents / name
    if form == "annotations":
        assert content_of(path, page) == content_of(CORPUS / document, page), \
            "the annotation form changed the page's content: the ink went into the page, not beside it"
        inks, texts = ours(path, page, "/Ink"), ours(path, page, "/FreeText")
        assert (len(inks), len(texts)) == (len(runs(drawing)), len(drawing["texts"])), \
            f"{len(inks)} /Ink and {len(texts)} /FreeText of ours, not one per run ({len(runs(drawing))}) and text"
    return path


def content_of(path: Path, page: int) -> bytes:
    """The page's content streams, decoded and joined: what the page draws, annotations aside."""
    with pikepdf.open(path) as pdf:
        contents = pdf.pages[page].obj.get("/Contents")
        streams = contents if isinstance(contents, pikepdf.Array) else [contents]
        return b"\n".join(stream.read_bytes() for stream in streams if stream is not None)


def ours(path: Path, page: int, subtype: str) -> List[Dict]:
    """canvasd's annotations of `subtype` on the page (the ones with /CanvasBridgeHash), in
    /Annots order, as plain values: InkList as lists of floats, BS /W, C, Contents."""
    with pikepdf.open(path) as pdf:
        found = []
        for annot in pdf.pages[page].obj.get("/Annots", pikepdf.Array()):
            if annot.get("/Subtype") != pikepdf.Name(subtype) or "/CanvasBridgeHash" not in annot:
                continue
            found.append({
                "inkList": [[float(v) for v in entry] for entry in annot.get("/InkList", [])],
                "width": float(annot.BS.W) if "/BS" in annot else None,
                "color": [float(v) for v in annot.get("/C", [])],
                "contents": str(annot.get("/Contents", "")),
            })
        return found


def annotation_count(path: Path, page: int) -> int:
    """How many annotations the page has, ours and the document's own."""
    with pikepdf.open(path) as pdf:
        return len(pdf.pages[page].obj.get("/Annots", pikepdf.Array()))


def user_space(path: Path, page: int):
    """Display points to default user space, for an upright page (no /Rotate): y turned over
    from the top of the visible box (CropBox, else MediaBox)."""
    with pikepdf.open(path) as pdf:
        obj = pdf.pages[page].obj
        assert int(obj.get("/Rotate", 0)) % 360 == 0, "user_space is for upright pages"
        box = [float(v) for v in obj.get("/CropBox", obj.MediaBox)]
    return lambda x, y: (x + box[0], box[3] - y)


def centre_line(stroke: Dict, to_user) -> List[float]:
    """The stroke's points as an /InkList entry: x1 y1 x2 y2 … in user space."""
    return [v for p in stroke["points"] for v in to_user(p["x"], p["y"])]


def same_line(a: List[float], b: List[float], within: float = 0.011) -> bool:
    """Two centre lines alike point for point, to the 0.01 pt /InkList is written to."""
    return len(a) == len(b) and all(abs(u - v) <= within for u, v in zip(a, b))


def hex_color(color) -> str:
    """A colour as #RRGGBB: a name or hex from a drawing, or a /C array of 0 to 1."""
    if isinstance(color, list):
        return "#" + "".join(f"{round(v * 255):02X}" for v in color)
    return NAMED.get(color, color).upper()


# -- renderers --------------------------------------------------------------------------------

def poppler(path: Path, page: int) -> Image.Image:
    with tempfile.TemporaryDirectory() as folder:
        subprocess.run(["pdftoppm", "-r", str(DPI), "-f", str(page + 1), "-l", str(page + 1), "-gray",
                        "-singlefile", str(path), f"{folder}/page"], check=True)
        return Image.open(f"{folder}/page.pgm").convert("L")


def mupdf(path: Path, page: int) -> Image.Image:
    with tempfile.TemporaryDirectory() as folder:
        subprocess.run(["mutool", "draw", "-q", "-r", str(DPI), "-c", "gray", "-o", f"{folder}/page.pgm",
                        str(path), str(page + 1)], check=True, capture_output=True)
        return Image.open(f"{folder}/page.pgm").convert("L")


def differing(a: Image.Image, b: Image.Image) -> float:
    """The share of pixels whose grey levels differ by more than LEVELS."""
    assert a.size == b.size, f"renders of different sizes: {a.size} and {b.size}"
    over = ImageChops.difference(a, b).point(lambda v: 255 if v > LEVELS else 0)
    return over.histogram()[255] / (a.size[0] * a.size[1])


class PdfJs:
    """Debian's pdf.js in the headless Chromium of the `browser` fixture: a loopback web server
    gives it pdf.js and the documents folder, as the demo page is given them."""

    PAGE = b"<!doctype html><meta charset=utf-8><script src=/pdfjs/pdf.js></script>"

    def __init__(self, browser, documents: Path):
        if not (PDFJS / "pdf.js").exists():
            pytest.skip(f"no pdf.js at {PDFJS}: install libjs-pdf (make system-deps does)")
        page = self.PAGE

        class Handler(SimpleHTTPRequestHandler):
            def translate_path(self, path: str) -> str:
                clean = path.split("?", 1)[0]
                if clean.startswith("/pdfjs/"):
                    return str(PDFJS / Path(clean).name)
                return str(documents / Path(clean).name)

            def do_GET(self) -> None:
                if self.path == "/":
                    self.send_response(200)
                    self.send_header("Content-Type", "text/html")
                    self.send_header("Content-Length", str(len(page)))
                    self.end_headers()
                    self.wfile.write(page)
                    return
                super().do_GET()

            def end_headers(self) -> None:
                # The same name is saved again between renders: never a cached copy.
                self.send_header("Cache-Control", "no-store")
                super().end_headers()

            def log_message(self, *args) -> None:
                pass

        self.http = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.http.serve_forever, daemon=True).start()
        self.browser = browser
        browser.get(f"http://127.0.0.1:{self.http.server_address[1]}/")
        browser.execute_script("pdfjsLib.GlobalWorkerOptions.workerSrc = '/pdfjs/pdf.worker.js';")

    def close(self) -> None:
        self.http.shutdown()
        self.http.server_close()

    def run(self, body: str, name: str, page: int):
        """Runs `body` with `page` (pdf.js's page object of document `name`) in scope."""
        script = """
const done = arguments[arguments.length - 1];
(async () => {
  const pdf = await pdfjsLib.getDocument({url: '/' + encodeURIComponent(arguments[0])}).promise;
  const page = await pdf.getPage(arguments[1] + 1);
  %s
})().then((value) => done({ok: true, value}), (error) => done({ok: false, error: String(error)}));
""" % body
        outcome = self.browser.execute_async_script(script, name, page)
        assert outcome["ok"], f"pdf.js: {outcome['error']}"
        return outcome["value"]

    def render(self, name: str, page: int) -> Image.Image:
        """The page at DPI with its annotations drawn onto the canvas (annotationMode ENABLE:
        each annotation's /AP /N painted, as when printing)."""
        data = self.run("""
  const viewport = page.getViewport({scale: %r});
  const canvas = document.createElement('canvas');
  canvas.width = Math.floor(viewport.width);
  canvas.height = Math.floor(viewport.height);
  await page.render({canvasContext: canvas.getContext('2d'), viewport,
                     annotationMode: pdfjsLib.AnnotationMode.ENABLE}).promise;
  return canvas.toDataURL('image/png');
""" % (DPI / 72), name, page)
        png = base64.b64decode(data.split(",", 1)[1])
        return Image.open(io.BytesIO(png)).convert("RGB").convert("L")

    def annotations(self, name: str, page: int) -> List[Dict]:
        return self.run("""
  return (await page.getAnnotations()).map((a) => ({
    subtype: a.subtype, inkLists: a.inkLists ?? null,
    contents: a.contentsObj ? a.contentsObj.str : (a.contents ?? null)}));
""", name, page)


@pytest.fixture
def pdfjs(browser, server):
    viewer = PdfJs(browser, server.documents)
    yield viewer
    viewer.close()


# -- 1. the same pixels -----------------------------------------------------------------------

@pytest.mark.parametrize("fixture", [UPRIGHT, ROTATED], ids=["upright", "rotated"])
def test_the_annotation_form_renders_as_the_paper_form_in_pdfjs_poppler_and_mupdf(server, client, pdfjs, fixture):
    """Each annotation's appearance is the outline the paper form draws, placed by the page's
    matrix: any viewer that paints appearances shows the same page. A misplaced or missing
    appearance (or one drawn upright on a turned page) moves whole strokes: far over 0.1%."""
    drawing = handwriting()
    paper = save(server, client, fixture, drawing, "paper", "paper.pdf")
    annotated = save(server, client, fixture, drawing, "annotations", "annotated.pdf")
    shutil.copy(CORPUS / fixture[0], server.documents / "original.pdf")
    page = fixture[1]
    renderers = {"pdf.js": lambda path: pdfjs.render(path.name, page), "poppler": partial(poppler, page=page),
                 "MuPDF": partial(mupdf, page=page)}
    figures = {}
    for label, render in renderers.items():
        ink, annotations = render(paper), render(annotated)
        # The ink shows at all in this renderer: otherwise two blank pages would agree.
        assert differing(render(server.documents / "original.pdf"), ink) > 10 * BOUND, f"{label} drew no ink"
        figures[label] = differing(ink, annotations)
    print(f"\n{fixture[0]} page {page} at {DPI} dpi, pixels differing by more than {LEVELS} levels, "
          f"annotations vs paper: " + ", ".join(f"{k} {v * 100:.5f}%" for k, v in figures.items()))
    for label, share in figures.items():
        assert share <= BOUND, f"{label}: {share:.4%} of pixels differ between the annotations and the paper form"


# -- 2. standard annotations ------------------------------------------------------------------

def test_pdfjs_lists_an_ink_annotation_per_run_with_an_inklist_entry_per_stroke(server, client, pdfjs):
    """pdf.js (a viewer that knows nothing of canvasd) finds the ink as /Ink annotations: one
    per run, an /InkList entry per stroke with every point of its centre line, in user space;
    and the note as a /FreeText whose contents are its text."""
    drawing = handwriting()
    path = save(server, client, UPRIGHT, drawing, "annotations", "annotated.pdf")
    listed = pdfjs.annotations(path.name, UPRIGHT[1])
    inks = [a for a in listed if a["subtype"] == "Ink"]
    to_user = user_space(path, UPRIGHT[1])
    assert len(inks) == len(runs(drawing)), f"{len(inks)} /Ink annotations for {len(runs(drawing))} runs"
    for ink, run in zip(inks, runs(drawing)):
        assert len(ink["inkLists"]) == len(run), "an /InkList entry per stroke of the run"
        for entry, index in zip(ink["inkLists"], run):
            stroke = drawing["strokes"][index]
            assert len(entry) == len(stroke["points"]), f"stroke {index}: {len(entry)} points listed"
            listed_line = [v for point in entry for v in (point["x"], point["y"])]
            assert same_line(listed_line, centre_line(stroke, to_user)), f"stroke {index}'s centre line moved"
    texts = [a for a in listed if a["subtype"] == "FreeText"]
    assert [t["contents"] for t in texts] == [t["text"] for t in drawing["texts"]]
    # The corpus page's own annotations (links) are still there beside ours.
    assert len(listed) == annotation_count(CORPUS / UPRIGHT[0], UPRIGHT[1]) + len(inks) + len(texts)


# -- 3. another program's change --------------------------------------------------------------

def test_an_ink_annotation_moved_by_another_program_reopens_moved_and_stale_sessions_conflict(server, client):
    """pikepdf moves one run's /InkList 20 pt right: a reopen loads that run from its /InkList
    (no pressure, /BS /W, /C) and everything else bit for bit from the stored drawings; a
    session that reopened before the change must not write over it (CONFLICT inkChanged)."""
    drawing = handwriting()
    path = save(server, client, UPRIGHT, drawing, "annotations", "doc.pdf")
    stale = client.open_session()
    opened = stale.call("canvas.open", {"document": "doc.pdf", "page": UPRIGHT[1], "reopen": True})
    assert opened.get("reopened") == {"edits": len(runs(drawing)) + 1, "strokes": len(drawing["strokes"]),
                                      "texts": 1}, f"canvas.open reopen answered {opened}"

    # The second line of words: a pen run of several strokes, away from the highlighters.
    moved_run = runs(drawing)[2]
    assert len(moved_run) > 1 and drawing["strokes"][moved_run[0]]["tool"] == "pen"
    with pikepdf.open(path, allow_overwriting_input=True) as pdf:
        annots = [a for a in pdf.pages[UPRIGHT[1]].obj.Annots
                  if a.get("/Subtype") == pikepdf.Name("/Ink") and "/CanvasBridgeHash" in a]
        target = annots[2]
        target.InkList = pikepdf.Array([pikepdf.Array([Decimal(str(v)) + (20 if i % 2 == 0 else 0)
                                                       for i, v in enumerate(entry)]) for entry in target.InkList])
        width, color = float(target.BS.W), [float(v) for v in target.C]
        pdf.save(path)

    fresh = client.open_session()
    fresh.call("canvas.open", {"document": "doc.pdf", "page": UPRIGHT[1], "reopen": True})
    reopened = fresh.get_drawing()
    assert len(reopened["strokes"]) == len(drawing["strokes"])
    for index, (was, now) in enumerate(zip(drawing["strokes"], reopened["strokes"])):
        if index not in moved_run:
            assert now == was, f"stroke {index}, not moved, did not come back bit for bit"
            continue
        assert now["tool"] == "pen" and len(now["points"]) == len(was["points"])
        assert all(abs(n["x"] - w["x"] - 20) <= 0.011 and abs(n["y"] - w["y"]) <= 0.011
                   for n, w in zip(now["points"], was["points"])), f"stroke {index} is not 20 pt right of where it was"
        assert all(n.get("pressure") is None for n in now["points"]), "an /InkList has no pressure"
        assert abs(now["width"] - width) < 1e-9, f"width {now['width']}, not /BS /W {width}"
        assert hex_color(now["color"]) == hex_color(color) == hex_color(was["color"])
    assert reopened["texts"] == drawing["texts"]
    fresh.call("canvas.cancel")

    # The session that reopened before the change now edits and submits: refused, nothing written.
    before = path.read_bytes()
    stale.add_stroke([(500, 700, 0.5), (520, 705, 0.6)], color="red", width=2)
    with pytest.raises(CanvasError) as refused:
        stale.submit()
    assert refused.value.code == "CONFLICT" and (refused.value.data or {}).get("reason") == "inkChanged", \
        f"{refused.value.code} {refused.value.data}"
    assert path.read_bytes() == before, "a refused submit changed the document"
    # Nothing else changed either: the canvas stays open with its drawing, for the user to decide.
    assert stale.state()["state"] == "open" and len(stale.get_drawing()["strokes"]) == len(drawing["strokes"]) + 1


# -- 4. erase and submit ----------------------------------------------------------------------

def test_a_stroke_erased_after_reopen_leaves_no_annotation_and_no_ink(server, client):
    """Reopen, erase one word whole, submit as annotations: the word's /InkList entry is gone
    (its run keeps the others), its pixels are the page's own again, and the file is sound."""
    drawing = handwriting()
    path = save(server, client, UPRIGHT, drawing, "annotations", "doc.pdf")
    shutil.copy(CORPUS / UPRIGHT[0], server.documents / "original.pdf")
    inked = poppler(path, UPRIGHT[1])

    session = client.open_session()
    opened = session.call("canvas.open", {"document": "doc.pdf", "page": UPRIGHT[1], "reopen": True,
                                          "inkForm": "annotations"})
    assert "reopened" in opened, f"canvas.open reopen answered {opened}"
    assert session.get_drawing()["strokes"] == drawing["strokes"]

    # The word, within a run of several, with the point farthest from every other stroke, so
    # the eraser (reach: radius + width / 2 from the centre line, spec §4) touches it alone.
    strokes = drawing["strokes"]
    candidates = [i for run in runs(drawing) if len(run) > 2 and strokes[run[0]]["tool"] == "pen" for i in run[1:-1]]

    def clearance(index: int, point: Dict) -> float:
        return min(math.dist((point["x"], point["y"]), (q["x"], q["y"]))
                   for other, stroke in enumerate(strokes) if other != index for q in stroke["points"])

    victim, spot = max(((i, p) for i in candidates for p in strokes[i]["points"]), key=lambda c: clearance(*c))
    assert clearance(victim, spot) > 6
    erased = session.erase(spot["x"], spot["y"], 1.0, mode="stroke")
    assert erased["strokes"] == len(strokes) - 1
    kept = strokes[:victim] + strokes[victim + 1:]
    assert session.get_drawing()["strokes"] == kept
    session.submit()

    to_user = user_space(path, UPRIGHT[1])
    inks = ours(path, UPRIGHT[1], "/Ink")
    lines = [entry for ink in inks for entry in ink["inkList"]]
    assert not any(same_line(entry, centre_line(strokes[victim], to_user)) for entry in lines), \
        "the erased word is still in an /InkList"
    assert len(lines) == len(kept) and all(any(same_line(entry, centre_line(s, to_user)) for entry in lines) for s in kept)
    assert len(inks) == len(runs(drawing)), "the erased word's run lost more than the word"
    assert annotation_count(path, UPRIGHT[1]) == \
        annotation_count(CORPUS / UPRIGHT[0], UPRIGHT[1]) + len(runs(drawing)) + len(drawing["texts"]), \
        "the replaced annotations are not all gone from /Annots (or the page's links went with them)"

    # Where the word was, the page is as it was before any ink (the corpus page's text
    # included); the same pixels were dark with the word, so this can tell.
    after, blank = poppler(path, UPRIGHT[1]), poppler(server.documents / "original.pdf", UPRIGHT[1])
    scale = DPI / 72
    where = {(round(p["x"] * scale), round(p["y"] * scale)) for p in strokes[victim]["points"]
             if clearance(victim, p) > 2 * max(s["width"] for s in strokes if s["tool"] == "pen")}
    assert len(where) > 20
    was_inked = sum(1 for xy in where if abs(inked.getpixel(xy) - blank.getpixel(xy)) > LEVELS)
    still = [xy for xy in where if abs(after.getpixel(xy) - blank.getpixel(xy)) > LEVELS]
    assert was_inked > len(where) // 2, "the word was not drawn where its points are"
    assert not still, f"{len(still)} of {len(where)} pixels of the erased word still inked, e.g. {still[:3]}"
    check = subprocess.run(["qpdf", "--check", str(path)], capture_output=True, text=True)
    assert check.returncode == 0, check.stdout + check.stderr


# -- 5. flattened by qpdf ---------------------------------------------------------------------

@pytest.mark.parametrize("fixture", [UPRIGHT, ROTATED], ids=["upright", "rotated"])
def test_qpdf_flattening_the_annotations_gives_the_paper_form(server, client, fixture):
    """A program that flattens annotations (qpdf, by the appearance's /BBox, /Matrix and the
    annotation's /Rect, as the PDF spec says) makes the page the paper form is: the appearance
    streams are placed by the standard rule, not by one viewer's habits."""
    drawing = handwriting()
    paper = save(server, client, fixture, drawing, "paper", "paper.pdf")
    annotated = save(server, client, fixture, drawing, "annotations", "annotated.pdf")
    flattened = server.folder / "flattened.pdf"
    subprocess.run(["qpdf", "--flatten-annotations=all", str(annotated), str(flattened)], check=True)
    assert not ours(flattened, fixture[1], "/Ink") and not ours(flattened, fixture[1], "/FreeText"), \
        "qpdf left our annotations as annotations"
    share = differing(poppler(paper, fixture[1]), poppler(flattened, fixture[1]))
    print(f"\n{fixture[0]} page {fixture[1]}, poppler at {DPI} dpi: {share * 100:.5f}% of pixels differ by more than "
          f"{LEVELS} levels between qpdf's flattening of the annotations and the paper form")
    assert share <= BOUND


def test_the_stored_drawings_read_back_without_a_server(server, client):
    """canvasbridge.ink_source reads the drawing stored with each save, paper form and
    annotations alike, as drawing.get shows it; damaged bytes are an error, never a wrong drawing."""
    drawing = handwriting()
    paper = save(server, client, ("basicapi.pdf", 0), drawing, "paper", "source-paper.pdf")
    annotated = save(server, client, ("basicapi.pdf", 0), drawing, "annotations", "source-annotated.pdf")
    with pikepdf.open(paper) as pdf:
        forms = pdf.pages[0].obj["/CanvasBridgeInk"]["/Forms"]
        stored = [ink_source.decode(form["/CanvasBridgeDrawing"].read_bytes()) for form in forms]
    assert stored == [drawing]
    with pikepdf.open(annotated) as pdf:
        page = pdf.pages[0].obj
        assert int(page.get("/Rotate", 0)) == 0 and "/UserUnit" not in page
        box = [float(v) for v in page.get("/CropBox", page["/MediaBox"])]
        ours = [annotation for annotation in page["/Annots"] if "/CanvasBridgeDrawing" in annotation]
        raws = [annotation["/CanvasBridgeDrawing"].read_bytes() for annotation in ours]
        # An /Ink's drawing takes its positions from the /InkList, a stroke whose numbers give
        # them back exactly (version 3): all of them here, the client's points on the grid.
        lists = [[[float(n) for n in entry] for entry in annotation.get("/InkList", [])] for annotation in ours]
    place = {"height": box[3] - box[1], "matrix": (1, 0, 0, 1, box[0], box[1])}
    pieces = [ink_source.decode(raw, ink_source.inklist_positions(inklist, **place)) for raw, inklist in zip(raws, lists)]
    assert [s for piece in pieces for s in piece["strokes"]] == drawing["strokes"]
    assert [t for piece in pieces for t in piece["texts"]] == drawing["texts"]
    inks = [(raw, inklist) for raw, inklist in zip(raws, lists) if inklist]
    assert inks and all(raw[3] == 3 for raw, _ in inks)
    raw, inklist = inks[0]
    # Without the /InkList's positions, or with one number moved by 0.01, it is an error.
    with pytest.raises(ink_source.InkSourceError, match="/InkList"):
        ink_source.decode(raw)
    moved = [list(entry) for entry in inklist]
    moved[0][0] += 0.01
    with pytest.raises(ink_source.InkSourceError, match="/InkList"):
        ink_source.decode(raw, ink_source.inklist_positions(moved, **place))
    with pikepdf.open(paper) as pdf:
        raw = pdf.pages[0].obj["/CanvasBridgeInk"]["/Forms"][0]["/CanvasBridgeDrawing"].read_bytes()
    for cut in (4, len(raw) // 2, len(raw) - 1):
        with pytest.raises(ink_source.InkSourceError):
            ink_source.decode(raw[:cut])
