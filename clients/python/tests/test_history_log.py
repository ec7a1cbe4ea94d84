"""The history's log and its files, as people and other programs may leave them: a log cut in
the middle of a record, a bit flipped in it, a line file changed by hand, files made by hand,
and a long history written again smaller (compaction). Over a real canvasd each time.
"""

from __future__ import annotations

import hashlib
import struct
from pathlib import Path
from typing import Dict

import pytest

from canvasbridge import CanvasError
from conftest import Server
from pdfs import tiny_pdf

DOC = "doc.pdf"
MAGIC = bytes([0x89, 0x43, 0x42, 0x48, 0x0D, 0x0A, 0x1A, 0x0A])


def drawing(x: float) -> Dict:
    return {"strokes": [{"tool": "pen", "color": "red", "width": 2, "points": [{"x": x % 500 + 20, "y": 90}, {"x": x % 500 + 40, "y": 120}]}],
            "texts": []}


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def records(log: bytes):
    """(offset, end, payload) of each framed record after the 28-byte header, as written."""
    assert log[:8] == MAGIC
    offset = 28
    while offset + 4 <= len(log):
        (length,) = struct.unpack_from("<I", log, offset)
        end = offset + 4 + length + 8
        if end > len(log):
            break
        yield offset, end, log[offset + 4:offset + 4 + length]
        offset = end


def saved_folder(tmp_path: Path, saves: int, arguments=()) -> (Server, Dict[int, str]):
    server = Server(tmp_path / "s1", ["--log-level", "error", *arguments])
    (server.documents / DOC).write_bytes(tiny_pdf(2))
    acknowledged = {1: sha(tiny_pdf(2))}
    with server.client(timeout=10) as client:
        for index in range(saves):
            result = client.call("document.flatten", {"name": DOC, "page": 0, "drawing": drawing(30 * index)})
            acknowledged[result["revision"]] = result["sha256"]
    return server, acknowledged


def listed(server: Server) -> Dict[int, str]:
    with server.client(timeout=10) as client:
        return {r["revision"]: r["sha256"] for r in client.call("document.revisions", {"name": DOC})["revisions"]}


def test_the_log_is_versioned_checksummed_and_readable(tmp_path):
    server, acknowledged = saved_folder(tmp_path, 3)
    try:
        log = (server.documents / ".canvas-revisions" / DOC / "history.log").read_bytes()
        assert log[:8] == MAGIC and struct.unpack_from("<I", log, 8)[0] == 1
        kinds = [__import__("json").loads(payload)["kind"] for _, _, payload in records(log)]
        assert kinds.count("revision") == 4, kinds   # the original, kept at the first save, and three saves
        assert sorted(f.name for f in (server.documents / ".canvas-revisions" / DOC).iterdir()) == ["data.1", "history.log", "lock"]
    finally:
        server.stop()


@pytest.mark.parametrize("cut", ["mid-length", "mid-payload", "mid-checksum"])
def test_a_log_torn_in_its_last_record_is_read_to_the_record_before(tmp_path, cut):
    """As a writer killed mid-append leaves it: the torn record is no record; the next save cuts
    it and numbers on from what the log says."""
    server, acknowledged = saved_folder(tmp_path, 3)
    server.stop()
    path = server.documents / ".canvas-revisions" / DOC / "history.log"
    log = path.read_bytes()
    garbage = log + struct.pack("<I", 300) + b'{"kind":"revision","revision":99'
    where = {"mid-length": len(log) + 2, "mid-payload": len(log) + 20, "mid-checksum": len(garbage)}[cut]
    path.write_bytes(garbage[:where])
    again = Server(tmp_path / "s2", ["--log-level", "error"], documents=server.documents)
    try:
        assert listed(again) == acknowledged
        with again.client(timeout=10) as client:
            assert client.call("document.flatten", {"name": DOC, "page": 0, "drawing": drawing(300)})["revision"] == 5
        assert path.read_bytes()[:len(log)] == log
        assert 5 in listed(again)
    finally:
        again.stop()


def test_a_flipped_bit_ends_the_log_there_and_nothing_is_served_wrongly(tmp_path):
    server, acknowledged = saved_folder(tmp_path, 3)
    server.stop()
    path = server.documents / ".canvas-revisions" / DOC / "history.log"
    log = bytearray(path.read_bytes())
    frames = list(records(bytes(log)))
    offset, end, _ = frames[-1]
    log[offset + 10] ^= 0x01    # inside the last record's payload
    path.write_bytes(bytes(log))
    again = Server(tmp_path / "s2", ["--log-level", "error"], documents=server.documents)
    try:
        with again.client(timeout=10) as client:
            revisions = {r["revision"]: r["sha256"] for r in client.call("document.revisions", {"name": DOC})["revisions"]}
            for number, digest in revisions.items():
                data, meta = client.get_document(DOC, revision=number)
                assert sha(data) == digest == meta["sha256"]
            # Whatever the log lost, no number is handed out again for other bytes.
            for number, digest in acknowledged.items():
                if number in revisions:
                    assert revisions[number] == digest
    finally:
        again.stop()


def test_kept_bytes_changed_by_hand_are_refused_not_served(tmp_path):
    server, acknowledged = saved_folder(tmp_path, 2)
    try:
        line = server.documents / ".canvas-revisions" / DOC / "data.1"
        data = bytearray(line.read_bytes())
        data[20] ^= 0xFF
        line.write_bytes(bytes(data))
        with server.client(timeout=10) as client:
            with pytest.raises(CanvasError) as refused:
                client.get_document(DOC, revision=1)
            assert refused.value.code == "UNAVAILABLE" and refused.value.data["reason"] == "damaged"
            # The document itself is untouched, and served.
            data, meta = client.get_document(DOC)
            assert sha(data) == meta["sha256"] == acknowledged[3]
    finally:
        server.stop()


def test_a_long_history_is_written_again_smaller(tmp_path):
    """With two revisions kept, hundreds of saves: the log is compacted, and the original, the
    newest and the numbering survive it."""
    server, acknowledged = saved_folder(tmp_path, 220, ["--keep-revisions", "2"])
    try:
        path = server.documents / ".canvas-revisions" / DOC / "history.log"
        frames = list(records(path.read_bytes()))
        assert len(frames) < 512, f"{len(frames)} records: never compacted"
        assert __import__("json").loads(frames[0][2])["kind"] == "base"
        assert listed(server) == {1: acknowledged[1], 221: acknowledged[221]}
        with server.client(timeout=10) as client:
            for number in (1, 221):
                data, _ = client.get_document(DOC, revision=number)
                assert sha(data) == acknowledged[number]
            assert client.call("document.flatten", {"name": DOC, "page": 0, "drawing": drawing(5)})["revision"] == 222
    finally:
        server.stop()


def test_a_removed_lock_file_lets_no_second_writer_in(tmp_path):
    """A writer holds the document's lock (the history folder and its lock file); the lock file
    is removed by hand, as stale lock files are: a save still waits for the writer."""
    import fcntl
    import os
    import threading
    server, acknowledged = saved_folder(tmp_path, 1)
    try:
        history = server.documents / ".canvas-revisions" / DOC
        folder = os.open(history, os.O_RDONLY | os.O_DIRECTORY)
        lock = open(history / "lock", "ab")
        fcntl.flock(folder, fcntl.LOCK_EX)
        fcntl.flock(lock.fileno(), fcntl.LOCK_EX)
        (history / "lock").unlink()
        answers = []
        def save():
            with server.client(timeout=20) as client:
                answers.append(client.call("document.flatten", {"name": DOC, "page": 0, "drawing": drawing(90)}))
        saver = threading.Thread(target=save)
        saver.start()
        saver.join(1.5)
        assert not answers, "a save ran while another writer held the lock"
        fcntl.flock(folder, fcntl.LOCK_UN)
        os.close(folder)
        lock.close()
        saver.join(20)
        assert answers and answers[0]["revision"] == 3
    finally:
        server.stop()


def test_a_record_damaged_in_the_middle_of_the_log_is_refused_and_nothing_is_changed(tmp_path):
    """Not a write cut short (that is always the last thing in the file): the history is refused
    as damaged, and no reader or writer cuts the log or the kept bytes."""
    server, acknowledged = saved_folder(tmp_path, 3)
    try:
        history = server.documents / ".canvas-revisions" / DOC
        log = bytearray((history / "history.log").read_bytes())
        offset, _, _ = list(records(bytes(log)))[1]
        log[offset + 12] ^= 0x04
        (history / "history.log").write_bytes(bytes(log))
        before = {p.name: p.read_bytes() for p in history.iterdir()}
        with server.client(timeout=10) as client:
            for method in ("document.revisions", "document.info"):
                with pytest.raises(CanvasError) as refused:
                    client.call(method, {"name": DOC})
                assert refused.value.code == "UNAVAILABLE" and refused.value.data["reason"] == "damaged"
            with pytest.raises(CanvasError) as refused:
                client.call("document.flatten", {"name": DOC, "page": 0, "drawing": drawing(70)})
            assert refused.value.code == "UNAVAILABLE" and refused.value.data["reason"] == "damaged"
        assert {p.name: p.read_bytes() for p in history.iterdir()} == before
    finally:
        server.stop()


def test_a_forged_record_with_a_number_past_any_exact_integer_is_no_record(tmp_path):
    """Checksummed and chained as a writer would, a revision numbered 2^63-1: not well-formed,
    so canvasd starts and serves, and numbers go on from the log's own."""
    import json
    server, acknowledged = saved_folder(tmp_path, 1)
    server.stop()
    path = server.documents / ".canvas-revisions" / DOC / "history.log"
    log = path.read_bytes()
    first = json.loads(list(records(log))[0][2])
    first.update({"revision": 2 ** 63 - 1, "line": 1})
    payload = json.dumps(first).encode()
    length = struct.pack("<I", len(payload))
    path.write_bytes(log + length + payload + hashlib.sha256(log[-8:] + length + payload).digest()[:8])
    again = Server(tmp_path / "s2", ["--log-level", "error"], documents=server.documents)
    try:
        assert listed(again) == acknowledged
        with again.client(timeout=10) as client:
            assert client.call("document.flatten", {"name": DOC, "page": 0, "drawing": drawing(120)})["revision"] == 3
    finally:
        again.stop()


def test_a_huge_sparse_log_is_refused_unread(tmp_path):
    server, acknowledged = saved_folder(tmp_path, 1)
    try:
        with open(server.documents / ".canvas-revisions" / DOC / "history.log", "r+b") as log:
            log.truncate(8 << 30)
        with server.client(timeout=10) as client:
            listing = client.call("document.list")["documents"]
            assert listing[0]["problem"]["reason"] == "damaged", listing
            client.hello()
    finally:
        assert server.process.poll() is None, "canvasd died"
        server.stop()


def test_an_emptied_document_is_named_no_revision(tmp_path):
    """Another program empties the file (to write it again): a read names no number for it, which
    the next file written there would otherwise share."""
    server, acknowledged = saved_folder(tmp_path, 1)
    try:
        (server.documents / DOC).write_bytes(b"")
        with server.client(timeout=10) as client:
            with pytest.raises(CanvasError) as refused:
                client.get_document(DOC)
            assert refused.value.code == "UNAVAILABLE"
            (server.documents / DOC).write_bytes(tiny_pdf(3))
            info = client.call("document.info", {"name": DOC})
            assert (info["revision"], info["sha256"]) == (3, sha(tiny_pdf(3)))
    finally:
        server.stop()


@pytest.mark.parametrize("what", ["log-directory", "log-symlink", "line-symlink"])
def test_history_files_that_are_not_files_are_damage_not_faults(tmp_path, what):
    """A history file replaced by a directory or a link is refused as damaged (UNAVAILABLE), not
    answered INTERNAL, and nothing outside the folder is read."""
    import os
    server, acknowledged = saved_folder(tmp_path, 2)
    try:
        history = server.documents / ".canvas-revisions" / DOC
        outside = tmp_path / "outside"
        outside.write_bytes(b"never read")
        if what == "log-directory":
            (history / "history.log").unlink()
            (history / "history.log").mkdir()
        elif what == "log-symlink":
            (history / "history.log").unlink()
            os.symlink(outside, history / "history.log")
        else:
            (history / "data.1").unlink()
            os.symlink(outside, history / "data.1")
        with server.client(timeout=10) as client:
            call = (lambda: client.get_document(DOC, revision=1)) if what == "line-symlink" else \
                (lambda: client.call("document.revisions", {"name": DOC}))
            with pytest.raises(CanvasError) as refused:
                call()
            assert refused.value.code == "UNAVAILABLE" and refused.value.data["reason"] == "damaged", refused.value
        assert outside.read_bytes() == b"never read"
    finally:
        server.stop()


@pytest.mark.parametrize("mode", ["replace", "append"])
def test_a_log_cut_at_a_record_boundary_by_hand_numbers_nothing_again(tmp_path, mode):
    """The last save's records cut off the log, at a record's end (which reads as a whole log):
    the kept bytes hold more than the log accounts for, so the history is refused rather than
    the lost revision's number handed out again for other bytes."""
    server, acknowledged = saved_folder(tmp_path, 3, ["--save-mode", mode])
    try:
        path = server.documents / ".canvas-revisions" / DOC / "history.log"
        log = path.read_bytes()
        frames = list(records(log))
        import json
        # The last save's records, from the one that announced it (extending a line, or an
        # append's intent): cut after that one instead, the log reads as a save killed there.
        kinds = [json.loads(payload)["kind"] for _, _, payload in frames]
        last_revision = max(i for i, kind in enumerate(kinds) if kind == "revision")
        first = max(i for i in range(last_revision) if kinds[i] in ("extending", "intent"))
        path.write_bytes(log[:frames[first][0]])
        seen = {}
        with server.client(timeout=10) as client:
            for call in (lambda: client.call("document.revisions", {"name": DOC})["revisions"],
                         lambda: [client.call("document.flatten", {"name": DOC, "page": 0, "drawing": drawing(77)})]):
                try:
                    for entry in call():
                        seen[entry["revision"]] = entry["sha256"]
                except CanvasError as refused:
                    assert refused.code == "UNAVAILABLE" and refused.data["reason"] == "damaged", refused
        for number, digest in seen.items():
            assert acknowledged.get(number, digest) == digest, f"revision {number} handed out again for other bytes"
    finally:
        server.stop()
