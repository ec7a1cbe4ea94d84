"""Other programs' ink reopened as strokes (issue 45, spec 5.2 `reopen: "all"`), over a real
canvasd, on files other tools made: MuPDF's `mutool run` drawing /Ink annotations as an editor
does (with an appearance, on pdf.js's rotated hello_world_rotated.pdf), pikepdf writing one
without an appearance on a page with a CropBox offset (pdf.js's bug1947248_text.pdf), pdf.js's
own annotation-caret-ink.pdf (an /Ink with an appearance and no /InkList: nothing to load), and
a pressure-sensitive outline (canvasd's own annotation with its stored drawing taken away, so
that only what any viewer sees is left). What is checked is what the page shows, in poppler
and MuPDF, and what the file holds, with pikepdf."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from typing import List, Tuple

import pytest

from canvasbridge import CanvasError
from conftest import CORPUS, Server
from test_reopen import DARK, PX, RENDERERS, darkest_near, handwriting

pikepdf = pytest.importorskip("pikepdf")

MUTOOL_INK = """
var doc = new PDFDocument(scriptArgs[0]);
var page = doc.loadPage(0);
var lines = [
    [[100, 100], [120, 130], [150, 140], [180, 120], [215, 150]],
    [[300, 320], [330, 380], [360, 330], [400, 390]],
];
var colors = [[1, 0, 0], [0, 0, 0.6]];
for (var i = 0; i < 2; i++) {
    var annot = page.createAnnotation("Ink");
    annot.setInkList([lines[i]]);
    annot.setBorder(3 + i);
    annot.setColor(colors[i]);
    annot.setAuthor("Editor " + i);
    annot.setContents("note " + i);
    annot.update();
}
doc.save(scriptArgs[1], "incremental");
"""


def mutool_inked(folder: Path) -> Path:
    """pdf.js's hello_world_rotated.pdf (/Rotate 90) with two /Ink annotations MuPDF drew."""
    target = folder / "mutool.pdf"
    shutil.copy(CORPUS / "hello_world_rotated.pdf", target)
    script = folder.parent / "ink.js"
    script.write_text(MUTOOL_INK)
    subprocess.run(["mutool", "run", str(script), str(target), str(target)], check=True, capture_output=True)
    return target


def pikepdf_inked(folder: Path) -> Path:
    """pdf.js's bug1947248_text.pdf (UserUnit 3) cropped away from the origin, as an editor's
    crop leaves a page, with two /Ink annotations written by pikepdf as a script would, without
    appearances: a green line with its /Popup, and a translucent yellow mark (/CA 0.4) across
    the page's words "Hello PDF.js World"."""
    target = folder / "pikepdf.pdf"
    with pikepdf.open(CORPUS / "bug1947248_text.pdf") as pdf:
        page = pdf.pages[0]
        page.obj.CropBox = [50, 60, 562, 752]
        x0, y0 = 90.0, 100.0
        ink = pdf.make_indirect(pikepdf.Dictionary(
            Type=pikepdf.Name.Annot, Subtype=pikepdf.Name.Ink, Rect=[x0 - 5, y0 - 5, x0 + 130, y0 + 90],
            InkList=[[x0, y0, x0 + 30.125, y0 + 40.5, x0 + 60.333, y0 + 20.25, x0 + 120.0625, y0 + 80]],
            BS=pikepdf.Dictionary(W=2.5), C=[0, 0.5, 0], T=pikepdf.String("Script"),
            M=pikepdf.String("D:20240101120000Z"), NM=pikepdf.String("ink-1")))
        popup = pdf.make_indirect(pikepdf.Dictionary(Type=pikepdf.Name.Annot, Subtype=pikepdf.Name.Popup,
                                                     Rect=[x0 + 140, y0, x0 + 240, y0 + 60], Parent=ink))
        ink.Popup = popup
        # The words sit at y 555 to 572 of user space, x 142 to 238.
        mark = pdf.make_indirect(pikepdf.Dictionary(
            Type=pikepdf.Name.Annot, Subtype=pikepdf.Name.Ink, Rect=[125, 555, 255, 575],
            InkList=[[132, 564, 190, 565.5, 248, 564]], BS=pikepdf.Dictionary(W=12), C=[1, 1, 0], CA=0.4,
            T=pikepdf.String("Script")))
        page.obj.Annots = pdf.make_indirect(pikepdf.Array(list(page.obj.get("/Annots", [])) + [ink, popup, mark]))
        pdf.save(target)
    return target


def inks(pdf_path: Path, page: int = 0) -> List[pikepdf.Dictionary]:
    with pikepdf.open(pdf_path) as pdf:
        return [dict(annot.items()) for annot in pdf.pages[page].obj.get("/Annots", [])]


def subtypes(pdf_path: Path, page: int = 0) -> List[str]:
    with pikepdf.open(pdf_path) as pdf:
        return [str(annot.get("/Subtype")) for annot in pdf.pages[page].obj.get("/Annots", [])]


def differing_share(a, b) -> float:
    width, height, rows = a
    _, _, other = b
    differ = sum(1 for y in range(height) for x in range(width) if abs(rows[y][x] - other[y][x]) > 16)
    return differ / (width * height)


@pytest.fixture
def server(tmp_path: Path):
    if shutil.which("mutool") is None:
        pytest.skip("mutool is not installed (Debian's mupdf-tools)")
    server = Server(tmp_path / "server")
    yield server
    server.stop()


def test_reopen_true_leaves_other_programs_ink_and_all_loads_it_number_for_number(server):
    path = mutool_inked(server.documents)
    with pikepdf.open(path) as pdf:
        lists = [[float(v) for v in annot.InkList[0]] for annot in pdf.pages[0].Annots]
        mediabox = [float(v) for v in pdf.pages[0].MediaBox]
    with server.client() as client:
        plain = client.open_session()
        assert plain.open(document="mutool.pdf", page=0, reopen=True)["reopened"] == {"edits": 0, "strokes": 0, "texts": 0}
        plain.cancel()
        session = client.open_session()
        opened = session.open(document="mutool.pdf", page=0, reopen="all")
        assert opened["reopened"] == {"edits": 2, "otherInk": 2, "strokes": 2, "texts": 0}
        strokes = session.get_drawing()["strokes"]
    # /Rotate 90 on a 612 x 792 page: display x is user y, display y is user x.
    assert mediabox == [0, 0, 612, 792]
    for stroke, numbers in zip(strokes, lists):
        users = [(p["y"], p["x"]) for p in stroke["points"]]
        assert users == list(zip(numbers[0::2], numbers[1::2])), "the centre line is not the /InkList's numbers"
        assert all("pressure" not in p for p in stroke["points"])   # a stroked appearance: one width
    assert [s["width"] for s in strokes] == [3, 4]
    assert [s["color"] for s in strokes] == ["#FF0000", "#000099"]
    assert [s["tool"] for s in strokes] == ["pen", "pen"]


@pytest.mark.parametrize("maker", ["mutool", "pikepdf"])
def test_submitted_unchanged_as_annotations_the_page_looks_the_same_and_carries_the_authors(server, maker):
    path = mutool_inked(server.documents) if maker == "mutool" else pikepdf_inked(server.documents)
    name = path.name
    before = {renderer: render(path, 0) for renderer, render in RENDERERS.items()}
    kinds = subtypes(path)
    with server.client() as client:
        session = client.open_session()
        opened = session.open(document=name, page=0, reopen="all", ink_form="annotations")
        assert opened["reopened"]["otherInk"] == 2
        saved = session.submit()
        assert saved["document"]["revision"] == 2
    assert subprocess.run(["qpdf", "--check", str(path)], capture_output=True).returncode in (0, 3)
    after_kinds = subtypes(path)
    # The other programs' /Ink (and the script's /Popup) left; ours came in their place, the rest stayed.
    assert after_kinds.count("/Ink") == kinds.count("/Ink")
    assert after_kinds.count("/Popup") == kinds.count("/Popup") - (1 if maker == "pikepdf" else 0)
    ours = [a for a in inks(path) if str(a.get("/Subtype")) == "/Ink"]
    assert all("/CanvasBridgeDrawing" in a for a in ours)
    authors = sorted(str(a["/T"]) for a in ours if "/T" in a)
    assert authors == (["Editor 0", "Editor 1"] if maker == "mutool" else ["Script", "Script"])
    if maker == "pikepdf":
        assert str(ours[0]["/NM"]) == "ink-1" and str(ours[0]["/M"]) == "D:20240101120000Z"
    for renderer, render in RENDERERS.items():
        share = differing_share(before[renderer], render(path, 0))
        print(f"\n{maker}, {renderer}: {share * 100:.3f}% of pixels differ")
        assert share <= 0.005, f"{renderer}: {share * 100:.2f}% of pixels differ"


def test_erasing_one_other_programs_stroke_leaves_none_of_it_and_the_rest(server):
    path = mutool_inked(server.documents)
    with server.client() as client:
        session = client.open_session()
        session.open(document="mutool.pdf", page=0, reopen="all")
        strokes = session.get_drawing()["strokes"]
        victim, kept = strokes[1], strokes[0]
        middle = victim["points"][1]
        erased = session.erase(middle["x"], middle["y"], 1.0, mode="stroke")
        assert erased["changed"] is True and erased["strokes"] == 1
        session.submit()
    for renderer, render in RENDERERS.items():
        after = render(path, 0)
        gone = [p for p in victim["points"] if darkest_near(after, p["x"], p["y"], 2.0) < DARK]
        assert gone == [], f"{renderer}: ink left where the erased stroke was: {gone}"
        stays = [p for p in kept["points"] if darkest_near(after, p["x"], p["y"], 2.0) < 200]
        assert len(stays) == len(kept["points"]), f"{renderer}: the other stroke is gone"
    assert subtypes(path).count("/Ink") == 0   # paper: the kept stroke is in the content now


def test_an_other_programs_ink_changed_after_the_reopen_is_a_conflict(server):
    path = mutool_inked(server.documents)
    move = server.documents.parent / "move.js"
    move.write_text("""
var doc = new PDFDocument(scriptArgs[0]);
var annot = doc.findPage(0).Annots[0];
var ink = annot.InkList;
var moved = [];
for (var j = 0; j < ink[0].length; j++) moved.push(j % 2 == 0 ? ink[0][j] + 10 : ink[0][j]);
annot.InkList = [moved];
doc.save(scriptArgs[0], "incremental");
""")
    with server.client() as client:
        session = client.open_session()
        session.open(document="mutool.pdf", page=0, reopen="all")
        subprocess.run(["mutool", "run", str(move), str(path)], check=True, capture_output=True)
        with pytest.raises(CanvasError) as refused:
            session.submit()
        assert refused.value.code == "CONFLICT" and refused.value.data.get("reason") == "inkChanged", refused.value
        assert session.state()["state"] == "open"


def test_acrobats_pencil_annotation_reopens_and_is_replaced_with_its_author_and_popup(server):
    """pdf.js's annotation-caret-ink.pdf, made with Acrobat 11: a "Pencil" /Ink by its author,
    with a /Popup, dates and a name, beside a /Caret. Reopened with "all" its centre line comes
    back as the file writes it; submitted unchanged as annotations, the /Popup leaves with it,
    ours carries its author, subject, dates, name and note, the /Caret stays, and the page looks
    the same."""
    path = server.documents / "caret.pdf"
    shutil.copy(CORPUS / "annotation-caret-ink.pdf", path)
    with pikepdf.open(path) as pdf:
        page = pdf.pages[0]
        height = float(page.MediaBox[3])
        acrobat = next(a for a in page.Annots if a.Subtype == "/Ink")
        numbers = [[float(v) for v in line] for line in acrobat.InkList]
        carried = {key: str(acrobat[key]) for key in ("/T", "/Subj", "/M", "/NM", "/CreationDate", "/Contents", "/RC")}
        assert carried["/Contents"] == "Ink content"
        caret = next(a for a in page.Annots if a.Subtype == "/Caret").unparse()
    before = {renderer: render(path, 0) for renderer, render in RENDERERS.items()}
    with server.client() as client:
        session = client.open_session()
        opened = session.open(document="caret.pdf", page=0, reopen="all", ink_form="annotations")
        assert opened["reopened"] == {"edits": 1, "otherInk": 1, "strokes": len(numbers), "texts": 0}
        strokes = session.get_drawing()["strokes"]
        for stroke, line in zip(strokes, numbers):
            users = [(p["x"], height - p["y"]) for p in stroke["points"]]
            assert all(abs(u[0] - x) < 1e-9 and abs(u[1] - y) < 1e-9 for u, x, y in zip(users, line[0::2], line[1::2]))
            assert len(users) * 2 == len(line)
            assert stroke["width"] == 2 and stroke["color"] == "#0000BF" and stroke["tool"] == "pen"
        assert session.submit()["document"]["revision"] == 2
    with pikepdf.open(path) as pdf:
        annots = list(pdf.pages[0].Annots)
        assert sorted(str(a.Subtype) for a in annots) == ["/Caret", "/Ink", "/Popup"]   # the Caret's own popup stays
        ours = next(a for a in annots if a.Subtype == "/Ink")
        assert "/CanvasBridgeDrawing" in ours
        assert {key: str(ours[key]) for key in carried} == carried
        assert next(a for a in annots if a.Subtype == "/Caret").unparse() == caret
    for renderer, render in RENDERERS.items():
        share = differing_share(before[renderer], render(path, 0))
        print(f"\nAcrobat's pencil, {renderer}: {share * 100:.3f}% of pixels differ")
        assert share <= 0.005, f"{renderer}: {share * 100:.2f}% of pixels differ"


def test_an_ink_annotation_with_no_centre_lines_is_not_loaded_and_the_answer_says_so(server):
    # Acrobat's annotation with its /InkList taken away: an appearance alone, nothing to load.
    path = server.documents / "drawn-only.pdf"
    with pikepdf.open(CORPUS / "annotation-caret-ink.pdf") as pdf:
        del next(a for a in pdf.pages[0].Annots if a.Subtype == "/Ink")["/InkList"]
        pdf.save(path)
    before = path.read_bytes()
    with server.client() as client:
        session = client.open_session()
        opened = session.open(document="drawn-only.pdf", page=0, reopen="all")
        assert opened["reopened"] == {"edits": 0, "otherInk": 0, "strokes": 0, "texts": 0}
        session.cancel()
    assert path.read_bytes() == before


def test_pressure_comes_back_from_an_outline_whose_width_varies(server):
    """canvasd's own annotation of recorded handwriting (UNIPEN, CC BY 4.0; a tablet's pressure)
    with its stored drawing and digest taken away: what is left is what any pressure-sensitive
    tool writes, an /InkList and a filled outline. Reopened with "all", the pressure is read back
    from the outline; submitted unchanged, the page looks as it did within 1% of pixels."""
    from pdfs import tiny_pdf
    (server.documents / "pressure.pdf").write_bytes(tiny_pdf(1))
    words = handwriting(0, 3)
    with server.client() as client:
        session = client.open_session()
        session.open(document="pressure.pdf", page=0, ink_form="annotations")
        for stroke in words:
            session.call("drawing.addStroke", stroke)
        session.submit()
    path = server.documents / "pressure.pdf"
    with pikepdf.open(path, allow_overwriting_input=True) as pdf:
        for annot in pdf.pages[0].Annots:
            del annot["/CanvasBridgeDrawing"]
            del annot["/CanvasBridgeHash"]
        pdf.save(path)
    before = {renderer: render(path, 0) for renderer, render in RENDERERS.items()}
    with server.client() as client:
        session = client.open_session()
        assert session.open(document="pressure.pdf", page=0, reopen=True)["reopened"]["edits"] == 0
        session.cancel()
        session = client.open_session()
        opened = session.open(document="pressure.pdf", page=0, reopen="all", ink_form="annotations")
        # The three words, of one pen and colour and three widths, are one /Ink (5.3): read back
        # at its one /BS /W, each outline's width comes back as pressure.
        assert opened["reopened"]["otherInk"] == 1
        strokes = session.get_drawing()["strokes"]
        for got, drawn in zip(strokes, words):
            pressures = [p.get("pressure") for p in got["points"]]
            assert all(p is not None for p in pressures), "no pressure read back"
            # Where the pen pressed harder, the outline is wider: the order follows the tablet's.
            want = [p["pressure"] for p in drawn["points"]]
            assert max(pressures) - min(pressures) > 0.2
            high = [i for i, p in enumerate(want) if p > 0.8 * max(want)]
            low = [i for i, p in enumerate(want) if p < 1.2 * min(want) + 0.05]
            if high and low:
                assert sum(pressures[i] for i in high) / len(high) > sum(pressures[i] for i in low) / len(low)
        session.submit()
    for renderer, render in RENDERERS.items():
        share = differing_share(before[renderer], render(path, 0))
        print(f"\npressure outline, {renderer}: {share * 100:.3f}% of pixels differ")
        assert share <= 0.01, f"{renderer}: {share * 100:.2f}% of pixels differ"


@pytest.mark.parametrize("maker", ["acrobat", "mutool", "pikepdf"])
def test_pdfjs_shows_the_page_as_before_once_other_ink_is_replaced_by_ours(server, browser, maker):
    """The third renderer: pdf.js (Debian's, in headless Chromium) paints each annotation's
    appearance, or draws an /Ink without one itself; after a reopen with "all" submitted
    unchanged as annotations, the page it shows differs from the original in at most 0.5% of
    pixels at 150 dpi."""
    from test_ink_annotations import PdfJs, differing

    if maker == "acrobat":
        path = server.documents / "acrobat.pdf"
        shutil.copy(CORPUS / "annotation-caret-ink.pdf", path)
    else:
        path = mutool_inked(server.documents) if maker == "mutool" else pikepdf_inked(server.documents)
    viewer = PdfJs(browser, server.documents)
    try:
        shutil.copy(path, server.documents / "before.pdf")
        before = viewer.render("before.pdf", 0)
        with server.client() as client:
            session = client.open_session()
            assert session.open(document=path.name, page=0, reopen="all", ink_form="annotations")["reopened"]["otherInk"] >= 1
            assert session.submit()["document"]["revision"] == 2
        share = differing(before, viewer.render(path.name, 0))
        print(f"\n{maker}, pdf.js: {share * 100:.3f}% of pixels differ")
        assert share <= 0.005, f"pdf.js: {share * 100:.2f}% of pixels differ"
    finally:
        viewer.close()
