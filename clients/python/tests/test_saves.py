"""Saves run beside the serving loop: a long save holds up only the session that asked for it."""

from __future__ import annotations

import json
import time
from pathlib import Path

import zmq

from conftest import Server


def big_pdf(path: Path, megabytes: int) -> None:
    """A one-page PDF carrying an unused stream of `megabytes` MB, so that a save, which copies
    the file, takes a while."""
    content = b"BT /F1 12 Tf 72 720 Td (big) Tj ET"
    filler = b"0" * (megabytes << 20)
    objects = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
        b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Resources << /Font << /F1 5 0 R >> >> /Contents 4 0 R >>",
        b"<< /Length %d >>\nstream\n" % len(content) + content + b"\nendstream",
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
        b"<< /Length %d >>\nstream\n" % len(filler) + filler + b"\nendstream",
    ]
    with open(path, "wb") as out:
        out.write(b"%PDF-1.7\n")
        offsets = []
        position = 9
        for number, body in enumerate(objects, 1):
            offsets.append(position)
            chunk = b"%d 0 obj\n" % number + body + b"\nendobj\n"
            out.write(chunk)
            position += len(chunk)
        out.write(b"xref\n0 %d\n0000000000 65535 f\r\n" % (len(objects) + 1))
        for offset in offsets:
            out.write(b"%010d 00000 n\r\n" % offset)
        out.write(b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (len(objects) + 1, position))


def test_a_long_save_blocks_nobody_else(tmp_path: Path):
    server = Server(tmp_path, ["--log-level", "error"])
    big_pdf(server.documents / "big.pdf", 400)
    context = zmq.Context.instance()
    try:
        with server.client(timeout=30) as saver, server.client() as other:
            session = saver.open_session()
            session.open(document="big.pdf", page=0)
            session.add_stroke([(10, 10), (50, 50)], color="red", width=3)
            bystander = other.open_session()
            bystander.open()

            # The saving client pipelines its submit and two more requests on its session.
            dealer = context.socket(zmq.DEALER)
            dealer.setsockopt(zmq.LINGER, 0)
            dealer.connect(server.endpoint)
            started = time.monotonic()
            for id, method in [(1, "canvas.submit"), (2, "canvas.state"), (3, "drawing.get")]:
                dealer.send(json.dumps({"id": id, "method": method, "session": session.id}).encode())
            # Meanwhile another client's requests are answered at once, many times over.
            quick = []
            while not dealer.poll(0):
                before = time.monotonic()
                assert bystander.state()["state"] == "open"
                quick.append(time.monotonic() - before)
                if time.monotonic() - started > 30:
                    raise AssertionError("the save did not finish in 30 s")
            save_seconds = time.monotonic() - started
            replies = []
            while len(replies) < 3 and dealer.poll(10_000):
                replies.append(json.loads(dealer.recv()))
            dealer.close(0)
        print(f"\nsave of a 400 MB document: {save_seconds:.2f}s; meanwhile {len(quick)} requests of another "
              f"session, slowest {max(quick) * 1000:.1f} ms")
        # The session's own requests waited for the save and came back in order, after it.
        assert [r["id"] for r in replies] == [1, 2, 3]
        assert replies[0]["result"]["document"]["revision"] == 2 and replies[0]["result"]["state"] == "closed"
        assert replies[1]["result"]["state"] == "closed"
        assert replies[2]["error"]["code"] == "INVALID_STATE"
        assert len(quick) >= 5, "the save was too quick to show anything; make the document bigger"
        # Saved in the loop, one of these would have waited the whole save.
        assert max(quick) < save_seconds / 2, "another session's request waited for the save"
        assert sorted(quick)[len(quick) // 2] < 0.05
    finally:
        server.stop()
        # Hundreds of MB each: not left for pytest's kept temporary folders.
        for path in [server.documents / "big.pdf", *(server.documents / ".canvas-revisions").rglob("*")]:
            if path.is_file():
                path.unlink()


def test_a_long_save_holds_up_no_other_document_nor_a_second_server(tmp_path: Path):
    """A save into a large document runs beside saves into other documents, and a second canvasd
    started on the folder meanwhile leaves the first one's save alone."""
    first = Server(tmp_path / "first", ["--log-level", "error"])
    documents = first.documents
    big_pdf(documents / "big.pdf", 600)
    big_pdf(documents / "small.pdf", 0)
    context = zmq.Context.instance()
    second = None
    dot = {"strokes": [{"tool": "pen", "color": "red", "width": 4, "points": [{"x": 50, "y": 50}]}], "texts": []}
    try:
        dealer = context.socket(zmq.DEALER)
        dealer.setsockopt(zmq.LINGER, 0)
        dealer.connect(first.endpoint)
        dealer.send(json.dumps({"id": 1, "method": "document.flatten",
                                "params": {"name": "big.pdf", "page": 0, "drawing": dot}}).encode())
        started = time.monotonic()
        # Another document's save, sent after the big one, is answered first.
        with first.client(timeout=30) as client:
            small = client.call("document.flatten", {"name": "small.pdf", "page": 0, "drawing": dot})
        small_done = time.monotonic() - started
        big_still_saving = not dealer.poll(0)
        # A second server on the same folder, started while the big save is being written.
        second = Server(tmp_path / "second", ["--log-level", "error"], documents=documents)
        second_up = not dealer.poll(0)
        assert dealer.poll(60_000), "the big save never answered"
        big = json.loads(dealer.recv())
        big_done = time.monotonic() - started
        dealer.close(0)
        print(f"\nsave into a 600 MB document: {big_done:.2f}s; a small document's save beside it: {small_done * 1000:.0f} ms")
        assert small["revision"] == 2
        assert big_still_saving, f"the small save ({small_done:.2f}s) waited for the big one ({big_done:.2f}s)"
        assert "result" in big and big["result"]["revision"] == 2, big
        assert second_up, "the big save ended before the second server was up: the test showed nothing"
        with second.client(timeout=30) as client:
            listed = {d["name"]: d for d in client.call("document.list", {})["documents"]}
        assert listed["big.pdf"]["revision"] == 2 and listed["big.pdf"]["sha256"] == big["result"]["sha256"]
        assert not list((documents / ".canvas-revisions").rglob(".tmp*"))
    finally:
        first.stop()
        if second:
            second.stop()
        for path in [documents / "big.pdf", *(documents / ".canvas-revisions").rglob("*")]:
            if path.is_file():
                path.unlink()
