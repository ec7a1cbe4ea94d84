"""Hostile files: PDFs made to crash canvasd, to make it read for minutes, or to slip past its
checks, in the folder and uploaded. Each case runs beside a bystander (test_hostile's Watch):
afterwards canvasd is alive, the bystander was answered in time, and every answer was a
result or a clear error, never INTERNAL."""

from __future__ import annotations

import base64
import hashlib
import os
import re
import shutil
import subprocess
import threading
import time
from pathlib import Path
from typing import Dict, List, Optional, Tuple

import pytest

from canvasbridge import CanvasError
from conftest import CORPUS, ROOT, Server
from images import new_dark_pixels, render_page
from pdfs import tiny_pdf
from test_hostile import Watch, digest

CORRUPTED = ROOT / "Tests" / "Fixtures" / "corrupted"
STROKE = {"strokes": [{"tool": "pen", "color": "black", "width": 6,
                       "points": [{"x": 20, "y": 20}, {"x": 60, "y": 20}, {"x": 60, "y": 40}]}], "texts": []}


@pytest.fixture
def server(tmp_path: Path):
    running = Server(tmp_path, ["--log-level", "error"])
    yield running
    running.stop()


def assemble(objects: List[bytes]) -> bytes:
    """A PDF of `objects` (numbered from 1, the catalog first) with a right cross-reference table."""
    out = bytearray(b"%PDF-1.7\n")
    offsets = []
    for number, body in enumerate(objects, start=1):
        offsets.append(len(out))
        out += b"%d 0 obj\n%s\nendobj\n" % (number, body)
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f\r\n" % (len(objects) + 1)
    out += b"".join(b"%010d 00000 n\r\n" % offset for offset in offsets)
    out += b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (len(objects) + 1, xref)
    return bytes(out)


def deep_page_tree(levels: int) -> bytes:
    """A valid one-page PDF whose page tree is `levels` /Pages nodes deep, one inside the other
    (about 100 bytes a level)."""
    objects = [b"<< /Type /Catalog /Pages 2 0 R >>"]
    for level in range(levels):
        number = 2 + level
        parent = b" /Parent %d 0 R" % (number - 1) if level else b""
        objects.append(b"<< /Type /Pages /Kids [%d 0 R] /Count 1%s >>" % (number + 1, parent))
    objects.append(b"<< /Type /Page /Parent %d 0 R /MediaBox [0 0 612 792] >>" % (1 + levels))
    return assemble(objects)


def refused(call, *args, **kwargs) -> CanvasError:
    with pytest.raises(CanvasError) as error:
        call(*args, **kwargs)
    return error.value


# 1. A deep page tree never crashes canvasd.

def test_a_deep_page_tree_in_the_folder_is_refused_not_a_crash(server: Server):
    (server.documents / "deep.pdf").write_bytes(deep_page_tree(25_000))
    (server.documents / "nested.pdf").write_bytes(deep_page_tree(1_000))
    before = digest(server.documents / "deep.pdf")
    with Watch(server) as watch, server.client(timeout=60, retries=0) as client:
        listed = {d["name"]: d for d in client.call("document.list")["documents"]}
        assert listed["deep.pdf"]["problem"]["reason"] == "damaged", listed
        assert "page tree" in listed["deep.pdf"]["problem"]["message"]
        assert listed["nested.pdf"]["pageCount"] == 1   # deep, but within the limit: served
        for method, params in [("document.info", {"name": "deep.pdf"}),
                               ("document.flatten", {"name": "deep.pdf", "page": 0, "drawing": STROKE})]:
            error = refused(client.call, method, params)
            assert (error.code, error.data["reason"]) == ("UNAVAILABLE", "damaged"), error
        session = client.open_session()
        error = refused(session.open, document="deep.pdf", page=0)
        assert (error.code, error.data["reason"]) == ("UNAVAILABLE", "damaged"), error
    watch.check("a page tree 25,000 levels deep")
    assert digest(server.documents / "deep.pdf") == before


def test_a_deep_page_tree_uploaded_is_refused_at_the_commit(server: Server):
    with Watch(server) as watch, server.client(timeout=60, retries=0) as client:
        error = refused(client.upload_document, "deep.pdf", deep_page_tree(30_000))
        assert (error.code, error.data["reason"]) == ("INVALID_PARAMS", "damaged"), error
        assert client.call("document.list")["documents"] == []
    watch.check("an upload of a page tree 30,000 levels deep")


def test_canvasctl_flatten_refuses_a_deep_page_tree(tmp_path: Path):
    source = tmp_path / "deep.pdf"
    source.write_bytes(deep_page_tree(100_000))
    (tmp_path / "drawing.json").write_text(json_of(STROKE))
    done = subprocess.run([str(ROOT / ".build" / "debug" / "canvasctl"), "flatten", "--document", str(source), "--page", "0",
                           "--drawing", str(tmp_path / "drawing.json"), "--out", str(tmp_path / "out.pdf")],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 2, (done.returncode, done.stderr)
    assert "page tree is more than 1024 levels deep" in done.stderr
    assert not (tmp_path / "out.pdf").exists()


def json_of(value) -> str:
    import json
    return json.dumps(value)


# 2. Files with a budget.

def sparse_pdf(path: Path, size: int) -> None:
    """A valid one-page PDF of `size` bytes, nearly all of them a hole (a stream of zeros that
    takes no room on disk): cheap to make, costly to read in full."""
    objects = [b"<< /Type /Catalog /Pages 2 0 R >>", b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
               b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 4 0 R >>",
               b"<< /Length 23 >>\nstream\n0.5 g 50 600 80 80 re f\nendstream"]
    head = bytearray(b"%PDF-1.7\n")
    offsets = []
    for number, body in enumerate(objects, start=1):
        offsets.append(len(head))
        head += b"%d 0 obj\n%s\nendobj\n" % (number, body)
    offsets.append(len(head))
    hole = size - len(head)
    head += b"5 0 obj\n<< /Length %d >>\nstream\n" % hole
    tail_at = len(head) + hole
    tail = bytearray(b"\nendstream\nendobj\n")
    xref = tail_at + len(tail)
    tail += b"xref\n0 6\n0000000000 65535 f\r\n" + b"".join(b"%010d 00000 n\r\n" % offset for offset in offsets)
    tail += b"trailer\n<< /Size 6 /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % xref
    with open(path, "wb") as out:
        out.write(head)
        out.seek(tail_at)
        out.write(tail)


def test_a_huge_sparse_pdf_is_refused_before_it_is_read(server: Server):
    huge = server.documents / "huge.pdf"
    sparse_pdf(huge, 40 << 30)
    size = os.stat(huge).st_size
    assert size > 40 << 30 and os.stat(huge).st_blocks * 512 < 1 << 20   # 40 GiB that take a few KiB of disk
    (server.documents / "fine.pdf").write_bytes(tiny_pdf(1))
    opened: List[float] = []

    def bystander() -> None:
        # Another client opens a canvas on a good document while the attacker lists.
        with server.client(timeout=300, retries=0) as other:
            session = other.open_session()
            started = time.monotonic()
            session.open(document="fine.pdf", page=0)
            opened.append(time.monotonic() - started)

    with Watch(server) as watch, server.client(timeout=30, retries=0) as client, \
            server.client(timeout=30, retries=0) as second:
        attack = threading.Thread(target=lambda: second.call("document.list"))
        attack.start()
        beside = threading.Thread(target=bystander)
        beside.start()
        listed = {d["name"]: d for d in client.call("document.list")["documents"]}
        attack.join()
        beside.join()
        assert listed["huge.pdf"]["problem"]["reason"] == "tooLarge", listed
        assert str(size) in listed["huge.pdf"]["problem"]["message"]
        assert listed["fine.pdf"]["revision"] == 1   # the others are listed as ever
        for method, params in [("document.info", {"name": "huge.pdf"}),
                               ("document.get", {"name": "huge.pdf", "length": 16}),
                               ("document.flatten", {"name": "huge.pdf", "page": 0, "drawing": STROKE})]:
            error = refused(client.call, method, params)
            assert (error.code, error.data["reason"]) == ("UNAVAILABLE", "tooLarge"), (method, error)
        error = refused(client.open_session().open, document="huge.pdf", page=0)
        assert (error.code, error.data["reason"]) == ("UNAVAILABLE", "tooLarge"), error
    watch.check("document.list beside a 40 GiB sparse PDF")
    print(f"another client's canvas.open beside two listings: {opened[0] * 1000:.1f} ms")
    assert os.stat(huge).st_size == size and os.stat(huge).st_blocks * 512 < 1 << 20   # not written


def test_canvasctl_flatten_refuses_a_huge_sparse_pdf_without_copying_it(tmp_path: Path):
    source = tmp_path / "huge.pdf"
    sparse_pdf(source, 40 << 30)
    (tmp_path / "drawing.json").write_text(json_of(STROKE))
    done = subprocess.run([str(ROOT / ".build" / "debug" / "canvasctl"), "flatten", "--document", str(source), "--page", "0",
                           "--drawing", str(tmp_path / "drawing.json"), "--out", str(tmp_path / "out.pdf")],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 2 and "documents over 1073741824 bytes are not read" in done.stderr, (done.returncode, done.stderr)
    assert not (tmp_path / "out.pdf").exists()


# 3. A name's history outlives its document: a deleted document's revisions stay, and a file
# under its name continues them.

def fetch(client, name: str, revision: int) -> bytes:
    got = client.call("document.get", {"name": name, "revision": revision})
    data = base64.b64decode(got["data"])
    assert got["size"] == len(data) and hashlib.sha256(data).hexdigest() == got["sha256"]
    assert got["revision"] == revision
    return data


def listed_revisions(client, name: str) -> List[Tuple[int, bool, str]]:
    return [(r["revision"], r["current"], r["sha256"]) for r in client.call("document.revisions", {"name": name})["revisions"]]


def test_a_document_under_a_deleted_ones_name_continues_its_history(tmp_path: Path):
    """Two servers on one folder, then a third started afterwards: a deleted document keeps its
    history (listed with none current, every revision fetchable, restorable), and whatever is put
    under its name again (an upload, a restore, a file copied in by hand) is its next revision.
    No number is ever handed out twice, and there is no `.ended/`."""
    folder = tmp_path / "documents"
    first = Server(tmp_path / "a", ["--log-level", "error"], documents=folder)
    second = Server(tmp_path / "b", ["--log-level", "error"], documents=folder)
    third = None
    # revision -> its bytes, for every revision acknowledged or seen taken.
    kept: Dict[int, bytes] = {}

    def everything_kept(client, current: Optional[int]) -> None:
        """Every revision in `kept` listed, oldest first, with its sha256; `current` the one
        current (None: the document is deleted); each fetched with its own bytes."""
        listed = listed_revisions(client, "doc.pdf")
        assert listed == [(n, n == current, hashlib.sha256(kept[n]).hexdigest()) for n in sorted(kept)], listed
        for number, data in kept.items():
            assert fetch(client, "doc.pdf", number) == data, f"revision {number}"

    def deleted(client) -> None:
        assert "doc.pdf" not in {d["name"] for d in client.call("document.list")["documents"]}
        for method, params in (("document.info", {"name": "doc.pdf"}),
                               ("document.flatten", {"name": "doc.pdf", "page": 0, "drawing": STROKE}),
                               ("document.get", {"name": "doc.pdf"})):
            error = refused(client.call, method, params)
            assert (error.code, error.data.get("name")) == ("NOT_FOUND", "doc.pdf"), (method, error)
        everything_kept(client, None)

    try:
        original = tiny_pdf(1)
        (folder / "doc.pdf").write_bytes(original)
        kept[1] = original
        with first.client(timeout=30, retries=0) as a, second.client(timeout=30, retries=0) as b:
            for revision in (2, 3):
                assert a.call("document.flatten", {"name": "doc.pdf", "page": 0, "drawing": STROKE})["revision"] == revision
                kept[revision] = (folder / "doc.pdf").read_bytes()
            everything_kept(b, 3)
            (folder / "doc.pdf").unlink()
            for client in (a, b):
                deleted(client)

            # Uploaded through one server under the deleted document's name: its next revision.
            uploaded = tiny_pdf(2)
            summary = b.upload_document("doc.pdf", uploaded)
            assert (summary["revision"], summary["sha256"]) == (4, hashlib.sha256(uploaded).hexdigest())
            assert (folder / "doc.pdf").read_bytes() == uploaded
            kept[4] = uploaded
            for client in (a, b):
                everything_kept(client, 4)
            # Its history goes on from there, on either server.
            assert a.call("document.restore", {"name": "doc.pdf", "revision": 3})["revision"] == 5
            kept[5] = kept[3]
            assert b.call("document.flatten", {"name": "doc.pdf", "page": 0, "drawing": STROKE})["revision"] == 6
            kept[6] = (folder / "doc.pdf").read_bytes()
            everything_kept(a, 6)

            # Deleted again, and restored while deleted: it is back, as the next revision.
            (folder / "doc.pdf").unlink()
            deleted(b)
            restored = a.call("document.restore", {"name": "doc.pdf", "revision": 2})
            assert (restored["revision"], restored["sha256"]) == (7, hashlib.sha256(kept[2]).hexdigest())
            assert (folder / "doc.pdf").read_bytes() == kept[2]
            kept[7] = kept[2]
            everything_kept(b, 7)

            # Deleted again, and another file copied in by hand: the next revision, its own bytes.
            (folder / "doc.pdf").unlink()
            copied = tiny_pdf(3)
            (folder / "doc.pdf").write_bytes(copied)
            listed = {d["name"]: d for d in a.call("document.list")["documents"]}
            assert (listed["doc.pdf"]["revision"], listed["doc.pdf"]["sha256"]) == (8, hashlib.sha256(copied).hexdigest()), listed
            kept[8] = copied
            for client in (a, b):
                everything_kept(client, 8)

        # A server started now agrees, and goes on counting.
        third = Server(tmp_path / "c", ["--log-level", "error"], documents=folder)
        with third.client(timeout=30, retries=0) as c:
            everything_kept(c, 8)
            assert c.call("document.flatten", {"name": "doc.pdf", "page": 2, "drawing": STROKE})["revision"] == 9
            kept[9] = (folder / "doc.pdf").read_bytes()
            everything_kept(c, 9)
        # No history ended, none moved aside.
        assert not (folder / ".canvas-revisions" / ".ended").exists()
    finally:
        for server in (first, second, third):
            if server:
                server.stop()


def test_a_document_replaced_by_a_copy_of_itself_is_still_its_revision(tmp_path: Path):
    server = Server(tmp_path / "a", ["--log-level", "error"])
    try:
        original = tiny_pdf(1)
        (server.documents / "doc.pdf").write_bytes(original)
        with server.client(timeout=30, retries=0) as client:
            assert client.call("document.flatten", {"name": "doc.pdf", "page": 0, "drawing": STROKE})["revision"] == 2
            # The current file replaced by a copy of itself (a backup restored; cp without -a):
            # another file, the same bytes, so the same revision, not a new one.
            current = (server.documents / "doc.pdf").read_bytes()
            (server.documents / "doc.pdf").unlink()
            (server.documents / "doc.pdf").write_bytes(current)
            revisions = [(r["revision"], r["current"]) for r in client.call("document.revisions", {"name": "doc.pdf"})["revisions"]]
            assert revisions == [(1, False), (2, True)], revisions
            assert fetch(client, "doc.pdf", 1) == original and fetch(client, "doc.pdf", 2) == current
            saved = client.call("document.flatten", {"name": "doc.pdf", "page": 0, "drawing": STROKE})
            assert saved["revision"] == 3
            assert fetch(client, "doc.pdf", 1) == original and fetch(client, "doc.pdf", 2) == current
    finally:
        server.stop()


# 4. Every real PDF flattened or refused clearly.

def variants(name: str, data: bytes) -> List[Tuple[str, bytes]]:
    """The file, and copies damaged as files are in the wild."""
    stem = name[:-4]
    out = [(name, data), (f"{stem}-cut.pdf", data[: len(data) * 2 // 3])]
    # A stream's own /Length (the dictionary ends, and the stream starts, after it).
    lengths = list(re.finditer(rb"/Length (\d+)(?=[^<>]*>>\s*stream)", data))
    for index, match in enumerate(lengths[:3]):
        for delta in (-5, 9):
            wrong = b"/Length %d" % max(0, int(match.group(1)) + delta)
            out.append((f"{stem}-length{index}{delta:+d}.pdf", data[: match.start()] + wrong + data[match.end():]))
    at = data.rfind(b"startxref")
    if at >= 0:
        out.append((f"{stem}-xref.pdf", data[:at] + b"startxref\n17\n%%EOF\n"))
    return out


def across(page: dict) -> dict:
    """A black stroke across the top margin of the displayed page (where pages are blank: one
    in the corpus is black almost to its edges)."""
    width, height = page["width"], page["height"]
    points = [{"x": width * 0.2, "y": height * 0.04}, {"x": width * 0.8, "y": height * 0.04}]
    return {"strokes": [{"tool": "pen", "color": "black", "width": min(20.0, max(0.1, height / 40)), "points": points}], "texts": []}


def sharp(pdf: Path) -> int:
    """A resolution at which poppler renders page 1 at least 200 pixels on its shorter side
    (poppler ignores /UserUnit: a page of 8.5 by 11 units of 72 pt is 8 by 11 pixels at 72 dpi)."""
    info = subprocess.run(["pdfinfo", "-f", "1", "-l", "1", str(pdf)], capture_output=True, text=True).stdout
    size = re.search(r"Page +1 size: +([\d.]+) x ([\d.]+)", info)
    shorter = min(float(size.group(1)), float(size.group(2))) if size else 612.0
    return max(72, int(72 * 200 / max(1.0, shorter)))


def test_every_fixture_pdf_and_its_damaged_copies_flatten_or_are_refused(server: Server, tmp_path: Path):
    sources = sorted(CORPUS.glob("*.pdf")) + sorted(CORRUPTED.glob("*.pdf"))
    files = [variant for path in sources for variant in variants(path.name, path.read_bytes())]
    for name, data in files:
        (server.documents / name).write_bytes(data)
    outcomes = {}
    with server.client(timeout=120, retries=0) as client:
        for name, data in files:
            try:
                page = client.call("document.info", {"name": name})["pages"][0]
                saved = client.call("document.flatten", {"name": name, "page": 0, "drawing": across(page)})
            except CanvasError as error:
                assert error.code == "UNAVAILABLE", (name, error)
                assert (server.documents / name).read_bytes() == data, f"{name} changed by a refused save"
                outcomes[name] = error.data["reason"]
                continue
            assert saved["revision"] == 2, (name, saved)
            result = server.documents / name
            assert hashlib.sha256(result.read_bytes()).hexdigest() == saved["sha256"]
            # qpdf reads the result, without a warning where it read the input without one (a
            # stream whose damage qpdf finds only when it reads it stays as it was: the save
            # appends, it does not read every stream).
            original = tmp_path / "original.pdf"
            original.write_bytes(data)
            check = subprocess.run(["qpdf", "--check", str(result)], capture_output=True, text=True)
            was = subprocess.run(["qpdf", "--check", str(original)], capture_output=True, text=True)
            assert check.returncode in (0, was.returncode), (name, check.stdout[-500:], check.stderr[-500:])
            # The ink renders: new dark pixels wherever poppler can render the input at all.
            try:
                before = render_page(original, 0)
            except subprocess.CalledProcessError:
                before = None
            if before is not None:
                dpi = sharp(original)
                assert new_dark_pixels(render_page(original, 0, dpi), render_page(result, 0, dpi)), f"{name}: no ink rendered"
            outcomes[name] = "flattened"
    assert server.process.poll() is None
    # The fixture made from a real file's failure flattens (its ink is checked below).
    assert outcomes["issue8125-wrong-length.pdf"] == "flattened"
    assert outcomes["basicapi.pdf"] == outcomes["issue8125.pdf"] == "flattened"
    print(f"\n{sum(v == 'flattened' for v in outcomes.values())} of {len(outcomes)} flattened; refused: "
          f"{sorted((k, v) for k, v in outcomes.items() if v != 'flattened')}")


def test_the_wrong_length_fixture_gets_its_ink_where_drawn(server: Server, tmp_path: Path):
    name = "issue8125-wrong-length.pdf"
    shutil.copy(CORRUPTED / name, server.documents / name)
    shutil.copy(CORRUPTED / name, tmp_path / "before.pdf")
    with server.client(timeout=30, retries=0) as client:
        saved = client.call("document.flatten", {"name": name, "page": 0, "drawing": STROKE})
    assert saved["revision"] == 2
    # qpdf reads it, with the one warning it had about the stream (kept as it was: the save
    # appends its ink, it does not rewrite the page's content).
    check = subprocess.run(["qpdf", "--check", str(server.documents / name)], capture_output=True, text=True)
    assert check.returncode == 3 and "recovered stream length" in check.stderr, check.stdout + check.stderr
    assert check.stderr.count("WARNING") == 3, check.stderr
    # The page is 275 x 50 pt shown upside down (/Rotate 180 on its parent): the stroke drawn
    # at (20..60, 20..40) from the displayed top-left lands there in the rendered image.
    added = new_dark_pixels(render_page(tmp_path / "before.pdf", 0), render_page(server.documents / name, 0))
    assert added, "no ink rendered"
    xs, ys = [x for x, _ in added], [y for _, y in added]
    assert 14 <= min(xs) and max(xs) <= 66 and 14 <= min(ys) and max(ys) <= 46, (min(xs), max(xs), min(ys), max(ys))
