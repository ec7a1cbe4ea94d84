"""Faults: a full disk, clients that vanish, subscribers that stop reading.

(SIGKILL during saves is test_durability.py.)
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import time
from pathlib import Path

import pytest
import zmq

from canvasbridge import CanvasClient, CanvasError, EventSubscriber
from conftest import CORPUS, Server

DOT = {"strokes": [{"tool": "pen", "color": "red", "width": 4, "points": [{"x": 50, "y": 50}]}], "texts": []}


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise AssertionError("no VmRSS")


@pytest.fixture
def small_disk(tmp_path: Path):
    """A 4 MB tmpfs: a real file system that fills up. Mounting needs root (as CI has)."""
    mount = tmp_path / "disk"
    mount.mkdir()
    command = ["mount", "-t", "tmpfs", "-o", "size=4m", "tmpfs", str(mount)]
    if os.geteuid() != 0:
        command = ["sudo", "-n", *command]
    result = subprocess.run(command, capture_output=True, text=True)
    if result.returncode != 0:
        pytest.fail(f"cannot mount a tmpfs for the full-disk test: {result.stderr.strip()}")
    yield mount
    subprocess.run(["umount", "-l", str(mount)] if os.geteuid() == 0 else ["sudo", "-n", "umount", "-l", str(mount)])


def holds_no_deleted_file(pid: int, under: Path, timeout: float = 10) -> None:
    """Waits until process `pid` has no file open under `under` that is already deleted.

    A save renames its new file over the document and closes the file it replaced off the
    request's path (FileRelease.later in the store): the replaced file's blocks are freed when
    that close comes, some time after the reply. Free space measured before then grows later on
    its own. Once canvasd holds no deleted file on the disk, nothing it holds frees space behind
    the test's back."""
    prefix = str(under.resolve())
    deadline = time.monotonic() + timeout
    while True:
        held = []
        for fd in os.listdir(f"/proc/{pid}/fd"):
            try:
                target = os.readlink(f"/proc/{pid}/fd/{fd}")
            except FileNotFoundError:
                continue   # closed meanwhile
            if target.startswith(prefix) and target.endswith(" (deleted)"):
                held.append(target)
        if not held:
            return
        if time.monotonic() > deadline:
            raise AssertionError(f"canvasd still holds deleted files after {timeout} s: {held}")
        time.sleep(0.01)


def test_full_disk_answers_an_error_and_changes_nothing(small_disk: Path, tmp_path: Path):
    # Only the documents are on the small disk: the log and sockets stay where there is room.
    server = Server(tmp_path / "server", ["--log-level", "warning"], documents=small_disk / "documents")
    try:
        documents = server.documents
        shutil.copy(CORPUS / "labelled_pages.pdf", documents / "notes.pdf")
        # qpdf reads this one only after repair, so its saves are qpdf's whole rewrite: a full disk
        # must reach us through qpdf with its errno.
        shutil.copy(CORPUS / "basicapi.pdf", documents / "repaired.pdf")
        metadata = {"title": "t", "created": 0, "modified": 0, "page_count": 3, "tags": [], "ocr_completed": False,
                    "full_text": "", "mine": [1, 2]}
        (documents / "box.yianazip").write_bytes(json.dumps(metadata).encode() + b"\xff\xff\xff\xff"
                                                 + (CORPUS / "labelled_pages.pdf").read_bytes())
        with server.client() as client:
            assert client.call("document.flatten", {"name": "notes.pdf", "page": 0, "drawing": DOT})["revision"] == 2
            # The file that save replaced is freed after its reply: wait for that, or the room
            # measured here grows after the disk is filled, and a save the test means to fail fits.
            holds_no_deleted_file(server.process.pid, small_disk)
            # Fill the disk, leaving less room than a save needs (a save writes a whole new copy,
            # and each document is larger than the one 4 KB page of room left).
            free = shutil.disk_usage(small_disk).free
            filler = small_disk / "filler"
            filler.write_bytes(b"\0" * max(0, free - 4 * 1024))
            names = ("notes.pdf", "box.yianazip", "repaired.pdf")
            before = {name: digest(documents / name) for name in names}
            revisions = {name: client.call("document.revisions", {"name": name})["revisions"] for name in names}
            kept = {name: [client.get_document(name, revision=r["revision"])[0] for r in revisions[name]] for name in names}
            session = client.open_session()
            session.open(document="box.yianazip", page=1)
            session.add_stroke([(30, 30), (60, 60)], color="blue", width=3)
            for name in ("notes.pdf", "box.yianazip", "repaired.pdf"):
                with pytest.raises(CanvasError) as full:
                    client.call("document.flatten", {"name": name, "page": 1, "drawing": DOT})
                assert full.value.code == "UNAVAILABLE" and full.value.data["reason"] == "noSpace", full.value
                assert "No space left on device" in full.value.message
            # A submit whose save fails keeps the drawing and the canvas open, for another try.
            with pytest.raises(CanvasError) as full:
                session.submit()
            assert full.value.code == "UNAVAILABLE"
            assert session.state()["state"] == "open" and session.state()["hasContent"]
            # Nothing changed: same bytes, same revisions, no half-written file left behind. (What
            # is compared is the folder and the history, not free space, which is no measure of
            # what changed.)
            assert {name: digest(documents / name) for name in before} == before
            assert client.call("document.info", {"name": "notes.pdf"})["revision"] == 2
            assert client.call("document.info", {"name": "box.yianazip"})["revision"] == 1
            assert client.call("document.info", {"name": "repaired.pdf"})["revision"] == 1
            for name in names:
                assert client.call("document.revisions", {"name": name})["revisions"] == revisions[name], name
                assert [client.get_document(name, revision=r["revision"])[0] for r in revisions[name]] == kept[name], name
            leftovers = [p.name for p in (documents / ".canvas-revisions").rglob(".tmp*")]
            assert leftovers == []
            assert subprocess.run(["qpdf", "--check", str(documents / "notes.pdf")], capture_output=True).returncode == 0
            # Room made again: the same submit goes through.
            filler.unlink()
            result = session.submit()
            assert result["document"]["revision"] == 2 and result["state"] == "closed"
            saved = (documents / "box.yianazip").read_bytes()
            assert json.loads(saved[: saved.index(b"\xff\xff\xff\xff")])["mine"] == [1, 2]
    finally:
        server.stop()


def test_an_upload_that_fills_its_temporary_disk_is_refused_part_by_part_and_carries_on(small_disk: Path, tmp_path: Path,
                                                                                          monkeypatch):
    """Uploads under way wait in $TMPDIR: a part that does not fit there is refused with
    noSpace and adds nothing, and the same part goes through once there is room."""
    from pdfs import large_pdf

    monkeypatch.setenv("TMPDIR", str(small_disk))
    server = Server(tmp_path / "server", ["--log-level", "warning"])
    try:
        with server.client() as client:
            first, second = large_pdf(2_500_000, seed=1), large_pdf(2_500_000, seed=2)
            begun = [client.call("document.upload.begin", {"name": name, "size": len(data),
                                                            "sha256": hashlib.sha256(data).hexdigest()})
                     for name, data in (("first.pdf", first), ("second.pdf", second))]
            part = 500_000
            for offset in range(0, len(first), part):
                client.call("document.upload.part", {"upload": begun[0]["upload"], "offset": offset},
                            frames=[first[offset:offset + part]])
            refused_at = None
            for offset in range(0, len(second), part):
                try:
                    client.call("document.upload.part", {"upload": begun[1]["upload"], "offset": offset},
                                frames=[second[offset:offset + part]])
                except CanvasError as full:
                    assert full.code == "UNAVAILABLE" and full.data["reason"] == "noSpace", full
                    refused_at = offset
                    break
            assert refused_at is not None, "4 MB held both 2.5 MB uploads"
            status = client.call("document.upload.status", {"upload": begun[1]["upload"]})
            assert status["received"] == refused_at
            # The first upload committed, its file goes: room again for the second.
            assert client.call("document.upload.commit", {"upload": begun[0]["upload"]})["revision"] == 1
            for offset in range(refused_at, len(second), part):
                client.call("document.upload.part", {"upload": begun[1]["upload"], "offset": offset},
                            frames=[second[offset:offset + part]])
            assert client.call("document.upload.commit", {"upload": begun[1]["upload"]})["revision"] == 1
            assert (server.documents / "first.pdf").read_bytes() == first
            assert (server.documents / "second.pdf").read_bytes() == second
            assert list(small_disk.iterdir()) == [] and shutil.disk_usage(small_disk).used < 100_000
    finally:
        server.stop()


def test_a_vanished_client_does_not_keep_its_session(tmp_path: Path):
    """A client that sends a request and disappears: its session expires after the idle
    timeout, freeing its place, and the expiry is announced."""
    server = Server(tmp_path, ["--idle-timeout", "1", "--max-sessions", "1"])
    try:
        with EventSubscriber(server.events, prefix="") as events:
            events.ready()
            context = zmq.Context.instance()
            ghost = context.socket(zmq.DEALER)
            ghost.setsockopt(zmq.LINGER, 0)
            ghost.connect(server.endpoint)
            ghost.send(json.dumps({"id": 1, "method": "session.open", "params": {}}).encode())
            assert ghost.poll(5000)
            session = json.loads(ghost.recv())["result"]["session"]
            # Mid-request: a drawing edit sent, and the socket gone before its reply.
            ghost.send(json.dumps({"id": 2, "method": "canvas.open", "session": session}).encode())
            ghost.close(0)
            with server.client() as other:
                with pytest.raises(CanvasError) as full:
                    other.open_session()
                assert full.value.code == "UNAVAILABLE"
                deadline = time.monotonic() + 10
                expired = []
                while not expired and time.monotonic() < deadline:
                    expired = [e for e in events.drain(0.2) if e.event == "session.expired"]
                assert [e.session for e in expired] == [session]
                replacement = other.open_session()
                assert replacement.open()["state"] == "open"
                with pytest.raises(CanvasError) as gone:
                    other.call("canvas.state", session=session)
                assert gone.value.code == "UNKNOWN_SESSION"
    finally:
        server.stop()


def test_a_stalled_subscriber_neither_slows_nor_grows_the_server(tmp_path: Path):
    """A subscriber that never reads, with tiny buffers, while 2 x 15,000 events are published:
    requests keep their pace and canvasd's memory levels off (PUB drops past its queue)."""
    server = Server(tmp_path, ["--log-level", "error"])
    context = zmq.Context.instance()
    stalled = context.socket(zmq.SUB)
    stalled.setsockopt(zmq.RCVHWM, 1)
    stalled.setsockopt(zmq.RCVBUF, 4096)
    stalled.setsockopt(zmq.LINGER, 0)
    stalled.setsockopt(zmq.SUBSCRIBE, b"")
    stalled.connect(server.events)
    try:
        with server.client() as client:
            session = client.open_session()
            dealer = context.socket(zmq.DEALER)
            dealer.setsockopt(zmq.LINGER, 0)
            dealer.connect(server.endpoint)

            def burst(taps: int) -> float:
                """Pipelined double-taps (each publishes 3 events); returns the seconds taken."""
                start = time.monotonic()
                for index in range(taps):
                    dealer.send(json.dumps({"id": f"t{time.monotonic_ns()}-{index}", "method": "pencil.doubleTap",
                                            "session": session.id}).encode())
                    if index % 200 == 199:
                        for _ in range(200):
                            assert dealer.poll(10_000), "a reply did not come"
                            assert "result" in json.loads(dealer.recv())
                for _ in range(taps % 200):
                    assert dealer.poll(10_000)
                    dealer.recv()
                return time.monotonic() - start

            burst(1000)
            baseline = rss_mb(server.process.pid)
            first = burst(5000)
            after_first = rss_mb(server.process.pid)
            second = burst(5000)
            after_second = rss_mb(server.process.pid)
            dealer.close(0)
        print(f"\nstalled subscriber: {baseline:.1f} MB, {after_first:.1f} MB after 15,000 events, "
              f"{after_second:.1f} MB after 30,000; bursts {first:.2f}s and {second:.2f}s")
        # Bounded: whatever the queue holds is there after the first burst; the second adds nothing.
        assert after_first - baseline < 40, "the stalled subscriber's queue grew the server by 40 MB or more"
        assert after_second - after_first < 4, "memory kept growing with a stalled subscriber"
        # Not slowed: the second burst, queue full, is not much slower than the first.
        assert second < first * 2 + 1
    finally:
        stalled.close(0)
        server.stop()
