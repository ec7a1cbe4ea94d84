"""Documents over the wire (document.get, document.upload.*), text editing and strokes in parts,
against a real canvasd."""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from canvasbridge import CanvasError, EventSubscriber
from conftest import CORPUS, ROOT, Server
from pdfs import large_pdf, tiny_pdf

NOTES = ROOT / "samples" / "notes.pdf"


def folder_state(folder: Path) -> dict:
    """Every file under the document folder (hidden ones and revisions too) with its hash."""
    return {str(path.relative_to(folder)): hashlib.sha256(path.read_bytes()).hexdigest()
            for path in sorted(folder.rglob("*")) if path.is_file()}


@pytest.fixture
def notes(server):
    shutil.copy(NOTES, server.documents / "notes.pdf")
    return "notes.pdf"


def test_get_gives_the_original_and_each_revision_with_its_hash(client, notes):
    original = NOTES.read_bytes()
    data, info = client.get_document(notes)
    assert data == original and info["revision"] == 1 and info["sha256"] == hashlib.sha256(original).hexdigest()
    session = client.open_session()
    session.open(document=notes, page=1)
    session.add_stroke([(72, 200), (300, 240, 0.8)], color="red", width=5)
    saved = session.submit()["document"]
    current, info = client.get_document(notes)
    assert info["revision"] == saved["revision"] == 2 and info["sha256"] == saved["sha256"]
    assert hashlib.sha256(current).hexdigest() == saved["sha256"] and current != original
    first, info = client.get_document(notes, revision=1)
    assert first == original and info["revision"] == 1
    # In pieces, with offset and length.
    piece = client.call("document.get", {"name": notes, "offset": 100, "length": 50})
    assert piece["offset"] == 100 and piece["length"] == 50 and piece["size"] == len(current)
    import base64
    assert base64.b64decode(piece["data"]) == current[100:150]
    small, _ = client.get_document(notes, piece=1000)
    assert small == current


def test_get_refuses_what_is_not_there(client, notes):
    with pytest.raises(CanvasError) as error:
        client.call("document.get", {"name": notes, "revision": 7})
    assert error.value.code == "NOT_FOUND" and error.value.data["revision"] == 7
    with pytest.raises(CanvasError) as error:
        client.call("document.get", {"name": "../etc/passwd.pdf"})
    assert error.value.code == "INVALID_PARAMS"
    with pytest.raises(CanvasError) as error:
        client.call("document.get", {"name": notes, "length": 1 << 40})
    assert error.value.code == "INVALID_PARAMS"


def test_a_several_megabyte_upload_becomes_a_document(client, server):
    data = large_pdf(5 << 20)
    summary = client.upload_document("big.pdf", data)
    assert summary["name"] == "big.pdf" and summary["revision"] == 1 and summary["pageCount"] == 1
    assert summary["sha256"] == hashlib.sha256(data).hexdigest()
    assert (server.documents / "big.pdf").read_bytes() == data
    back, info = client.get_document("big.pdf")
    assert back == data and info["sha256"] == summary["sha256"]
    assert [entry["name"] for entry in client.call("document.list")["documents"]] == ["big.pdf"]


def peak_resident_bytes(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no VmHWM")


@pytest.fixture
def four_uploads(tmp_path):
    """A canvasd whose one (local) owner may have all four uploads under way."""
    running = Server(tmp_path / "four", ["--max-uploads-per-owner", "4"])
    with running.client() as client:
        yield client, running
    running.stop()


def test_uploads_under_way_are_kept_in_files_not_in_memory(four_uploads):
    """Four uploads of 24 MB each, all under way at once and then committed, grew canvasd's
    peak resident memory by over 96 MB when their bytes were held in memory."""
    client, server = four_uploads
    size = 24 << 20
    datas = [large_pdf(size, seed=seed) for seed in range(4)]
    assert client.hello()["limits"]["maxUploadsPerOwner"] == 4
    before = peak_resident_bytes(server.process.pid)
    uploads = [client.call("document.upload.begin", {"name": f"big{index}.pdf", "size": len(data),
                                                      "sha256": hashlib.sha256(data).hexdigest()})
               for index, data in enumerate(datas)]
    part = uploads[0]["partBytes"]
    for offset in range(0, size, part):
        for upload, data in zip(uploads, datas):
            client.call("document.upload.part", {"upload": upload["upload"], "offset": offset},
                        frames=[data[offset:offset + part]])
    for upload in uploads:
        assert client.call("document.upload.commit", {"upload": upload["upload"]})["revision"] == 1
    grown = peak_resident_bytes(server.process.pid) - before
    assert grown < size, f"peak resident memory grew by {grown >> 20} MB"
    for index, data in enumerate(datas):
        assert hashlib.sha256((server.documents / f"big{index}.pdf").read_bytes()).digest() == hashlib.sha256(data).digest()


def test_an_upload_as_a_new_revision_keeps_the_original(client, server, notes):
    replacement = tiny_pdf(2)
    sha = hashlib.sha256(replacement).hexdigest()
    with pytest.raises(CanvasError) as error:   # no expectedRevision: the name is taken, said before any bytes
        client.call("document.upload.begin", {"name": notes, "size": len(replacement), "sha256": sha})
    assert error.value.code == "CONFLICT" and error.value.data == {"name": notes, "reason": "exists"}
    # Taken between begin and commit: refused at the commit, and the file put there stays.
    begun = client.call("document.upload.begin", {"name": "late.pdf", "size": len(replacement), "sha256": sha})
    client.call("document.upload.part", {"upload": begun["upload"], "offset": 0}, frames=[replacement])
    (server.documents / "late.pdf").write_bytes(b"%PDF-1.4 put here by hand")
    with pytest.raises(CanvasError) as error:
        client.call("document.upload.commit", {"upload": begun["upload"]})
    assert error.value.code == "CONFLICT" and error.value.data == {"name": "late.pdf", "reason": "exists"}
    assert (server.documents / "late.pdf").read_bytes() == b"%PDF-1.4 put here by hand"
    before = (server.documents / notes).read_bytes()
    with pytest.raises(CanvasError) as error:
        client.upload_document(notes, replacement, expected_revision=5)
    assert error.value.code == "CONFLICT" and error.value.data["revision"] == 1
    assert (server.documents / notes).read_bytes() == before
    summary = client.upload_document(notes, replacement, expected_revision=1)
    assert summary["revision"] == 2 and summary["pageCount"] == 2
    assert (server.documents / notes).read_bytes() == replacement
    assert client.get_document(notes, revision=1)[0] == NOTES.read_bytes()


def test_an_upload_of_a_next_revision_is_checked_at_begin_and_again_at_commit(client, server, notes):
    """A missing document or a stale expectedRevision was only said at the commit, after every
    byte had been sent; a taken name was already said at begin."""
    replacement = tiny_pdf(2)
    sha = hashlib.sha256(replacement).hexdigest()
    before = (server.documents / notes).read_bytes()
    begin = {"size": len(replacement), "sha256": sha}
    with pytest.raises(CanvasError) as error:
        client.call("document.upload.begin", dict(begin, name="missing.pdf", expectedRevision=1))
    assert (error.value.code, error.value.data) == ("NOT_FOUND", {"name": "missing.pdf"})
    with pytest.raises(CanvasError) as error:
        client.call("document.upload.begin", dict(begin, name=notes, expectedRevision=2))
    assert (error.value.code, error.value.data) == ("CONFLICT", {"name": notes, "expectedRevision": 2, "revision": 1})
    (server.documents / "folder.pdf").mkdir()
    with pytest.raises(CanvasError) as error:
        client.call("document.upload.begin", dict(begin, name="folder.pdf", expectedRevision=1))
    assert (error.value.code, error.value.data.get("reason")) == ("UNAVAILABLE", "notRegularFile")
    # Begun at revision 1, and saved over before the commit: the commit says so.
    begun = client.call("document.upload.begin", dict(begin, name=notes, expectedRevision=1))
    client.call("document.upload.part", {"upload": begun["upload"], "offset": 0}, frames=[replacement])
    client.call("document.flatten", {"name": notes, "page": 0, "drawing": {"strokes": [
        {"tool": "pen", "color": "red", "width": 2, "points": [{"x": 5, "y": 5}]}]}})
    saved = (server.documents / notes).read_bytes()
    with pytest.raises(CanvasError) as error:
        client.call("document.upload.commit", {"upload": begun["upload"]})
    assert (error.value.code, error.value.data) == ("CONFLICT", {"name": notes, "expectedRevision": 1, "revision": 2})
    assert (server.documents / notes).read_bytes() == saved != before
    assert client.call("document.list")["documents"][0]["name"] == "folder.pdf"


@pytest.mark.parametrize("name, data, reason", [
    ("text.pdf", b"hello, this is not a PDF at all\n" * 100, "notPDF"),
    ("cut.pdf", large_pdf(50_000)[:30_000], None),
    ("locked.pdf", (CORPUS / "empty_protected.pdf").read_bytes(), "damagedOrEncrypted"),
    ("secret.pdf", "password", "encrypted"),
    ("bare.yianazip", tiny_pdf(1), "container"),
])
def test_a_bad_upload_is_refused_and_stores_nothing(client, server, notes, name, data, reason, tmp_path):
    if data == "password":   # a PDF only its password opens: encrypted, with a reason of its own
        (tmp_path / "plain.pdf").write_bytes(tiny_pdf(1))
        subprocess.run(["qpdf", "--encrypt", "user-secret", "owner-secret", "256", "--",
                        str(tmp_path / "plain.pdf"), str(tmp_path / "secret.pdf")], check=True)
        data = (tmp_path / "secret.pdf").read_bytes()
    before = folder_state(server.documents)
    with pytest.raises(CanvasError) as error:
        client.upload_document(name, data)
    assert error.value.code == "INVALID_PARAMS", error.value
    if reason:
        assert error.value.data["reason"] == reason, error.value
    assert error.value.data["name"] == name
    assert folder_state(server.documents) == before
    assert not list(Path("/tmp").glob("canvasd-upload-*"))


def test_an_upload_checks_its_hash_size_and_name(client, server):
    data = tiny_pdf(1)
    begun = client.call("document.upload.begin", {"name": "a.pdf", "size": len(data), "sha256": "0" * 64})
    client.call("document.upload.part", {"upload": begun["upload"], "offset": 0}, frames=[data])
    with pytest.raises(CanvasError) as error:
        client.call("document.upload.commit", {"upload": begun["upload"]})
    assert error.value.code == "INVALID_PARAMS" and error.value.data["reason"] == "sha256Mismatch"
    assert not (server.documents / "a.pdf").exists()
    for name in ("../a.pdf", ".hidden.pdf", "a.txt", "a/b.pdf"):
        with pytest.raises(CanvasError) as error:
            client.call("document.upload.begin", {"name": name, "size": 10, "sha256": "0" * 64})
        assert error.value.code == "INVALID_PARAMS"
    with pytest.raises(CanvasError) as error:
        client.call("document.upload.begin", {"name": "huge.pdf", "size": 1 << 30, "sha256": "0" * 64})
    assert error.value.code == "PAYLOAD_TOO_LARGE"


def test_a_part_over_part_bytes_is_refused_and_adds_nothing(client, server):
    data = large_pdf(3 << 20)
    begun = client.call("document.upload.begin",
                        {"name": "p.pdf", "size": len(data), "sha256": hashlib.sha256(data).hexdigest()})
    upload, limit = begun["upload"], begun["partBytes"]
    assert client.call("hello")["limits"]["maxMessageBytes"] > limit + 1   # the request itself fits
    with pytest.raises(CanvasError) as error:
        client.call("document.upload.part", {"upload": upload, "offset": 0}, frames=[data[:limit + 1]])
    assert error.value.code == "PAYLOAD_TOO_LARGE" and error.value.data == {
        "field": "part", "size": limit + 1, "limit": limit}
    assert client.call("document.upload.status", {"upload": upload})["received"] == 0
    # Exactly partBytes is a part, in one frame or several.
    assert client.call("document.upload.part", {"upload": upload, "offset": 0},
                       frames=[data[:limit // 2], data[limit // 2:limit]])["received"] == limit
    offset = limit
    while offset < len(data):
        client.call("document.upload.part", {"upload": upload, "offset": offset}, frames=[data[offset:offset + limit]])
        offset += limit
    assert client.call("document.upload.commit", {"upload": upload})["revision"] == 1
    assert (server.documents / "p.pdf").read_bytes() == data


def test_an_upload_publishes_document_saved(client, server):
    data = tiny_pdf(2)
    with EventSubscriber(server.events, prefix="documents.") as events:
        events.ready()
        summary = client.upload_document("u.pdf", data)
        event = events.next(timeout=5)
    assert event is not None
    assert (event.topic, event.data) == ("documents.document.saved", {
        "name": "u.pdf", "revision": 1, "pageCount": 2, "sha256": hashlib.sha256(data).hexdigest(),
        "cause": "document.upload.commit"})
    assert summary["sha256"] == event.data["sha256"]


def test_an_upload_resumes_from_what_the_server_has(client, server):
    data = large_pdf(300_000)
    begun = client.call("document.upload.begin",
                        {"name": "r.pdf", "size": len(data), "sha256": hashlib.sha256(data).hexdigest()})
    upload = begun["upload"]
    first = client.call("document.upload.part", {"upload": upload, "offset": 0}, frames=[data[:100_000]])
    assert first["received"] == 100_000
    # The same part again (a retry after a lost reply) changes nothing.
    assert client.call("document.upload.part", {"upload": upload, "offset": 0}, frames=[data[:100_000]])["received"] == 100_000
    with pytest.raises(CanvasError) as error:   # a gap
        client.call("document.upload.part", {"upload": upload, "offset": 200_000}, frames=[data[200_000:]])
    assert error.value.code == "CONFLICT" and error.value.data["received"] == 100_000
    with pytest.raises(CanvasError) as error:   # not complete yet
        client.call("document.upload.commit", {"upload": upload})
    assert error.value.code == "INVALID_STATE" and error.value.data["reason"] == "incomplete" and error.value.data["received"] == 100_000
    assert client.call("document.upload.status", {"upload": upload})["received"] == 100_000
    client.call("document.upload.part", {"upload": upload, "offset": 100_000}, frames=[data[100_000:200_000], data[200_000:]])
    assert client.call("document.upload.commit", {"upload": upload})["revision"] == 1
    assert (server.documents / "r.pdf").read_bytes() == data
    with pytest.raises(CanvasError) as error:   # committed once
        client.call("document.upload.commit", {"upload": upload})
    assert error.value.code == "NOT_FOUND"


def test_text_is_moved_nudged_resized_recoloured_and_retexted(client):
    session = client.open_session()
    session.open()
    session.add_text("Hello", 100, 100, font_size=16, color="black")
    session.edit_text(0, dx=5, dy=-3)
    session.edit_text(0, font_size=48)
    session.edit_text(0, color="#FF0000")
    session.edit_text(0, text="Hi there")
    assert session.get_drawing()["texts"] == [
        {"text": "Hi there", "x": 105, "y": 97, "fontSize": 48, "color": "#FF0000"}]
    for change, field in (({"font_size": 49}, "fontSize"), ({"font_size": 7.5}, "fontSize"), ({"color": "mauve"}, "color")):
        with pytest.raises(CanvasError) as error:
            session.edit_text(0, **change)
        assert error.value.code == "INVALID_PARAMS" and error.value.data["field"] == field
    with pytest.raises(CanvasError) as error:
        session.edit_text(3, dx=1)
    assert error.value.code == "NOT_FOUND"
    session.undo()
    assert session.get_drawing()["texts"][0]["text"] == "Hello"


def test_a_stroke_sent_in_parts_is_one_stroke(client):
    session = client.open_session()
    session.open()
    points = [{"x": float(i), "y": float(i % 50), "pressure": 0.5} for i in range(9000)]
    style = {"tool": "pen", "color": "blue", "width": 3}
    for start in (0, 3000):
        waiting = session.call("drawing.addStroke", {**style, "points": points[start:start + 3000], "continued": True})
        assert waiting["pendingPoints"] == start + 3000 and waiting["strokes"] == 0
    done = session.call("drawing.addStroke", {**style, "points": points[6000:]})
    assert done["strokes"] == 1 and done["changed"]
    stroke = session.get_drawing()["strokes"][0]
    assert stroke["points"] == points
    session.undo()
    assert session.get_drawing()["strokes"] == []
    # Parts must agree on their style, and are dropped by anything else that acts; a refused
    # part adds nothing and ends its stroke (spec §5), so each refusal below meets no parts.
    for refused_part, code, field in (({**style, "color": "red", "points": points[:10]}, "INVALID_PARAMS", "continued"),
                                      ({**style, "points": [{"x": 1, "y": 1}, {"x": "far", "y": 1}], "continued": True},
                                       "INVALID_PARAMS", "points[1].x"),   # checked on arrival, named within this part
                                      ({**style, "points": (points * 2)[:9991], "continued": True},
                                       "PAYLOAD_TOO_LARGE", "points")):
        assert session.call("drawing.addStroke", {**style, "points": points[:10], "continued": True})["pendingPoints"] == 10
        with pytest.raises(CanvasError) as error:
            session.call("drawing.addStroke", refused_part)
        assert error.value.code == code and error.value.data["field"] == field
        assert session.call("drawing.addStroke", {**style, "points": points[:1], "continued": True})["pendingPoints"] == 1
        session.call("drawing.clear")
    # Another refused request leaves them waiting.
    session.call("drawing.addStroke", {**style, "points": points[:10], "continued": True})
    with pytest.raises(CanvasError) as error:
        session.move_text(7, 1, 1)
    assert error.value.code == "NOT_FOUND"
    # Unknown params are ignored here too: a part that differs only in one is the same style.
    waiting = session.call("drawing.addStroke", {**style, "points": points[10:20], "continued": True, "hint": 1})
    assert waiting["pendingPoints"] == 20
    session.add_text("x", 1, 1)
    assert session.call("drawing.addStroke", {**style, "points": points[:5]})["strokes"] == 1
    assert len(session.get_drawing()["strokes"][0]["points"]) == 5


def test_canvasctl_uploads_and_gets(server, tmp_path, notes):
    import json
    import subprocess
    from conftest import canvasd_path
    canvasctl = canvasd_path().parent / "canvasctl"
    source = tmp_path / "upload.pdf"
    source.write_bytes(large_pdf(2 << 20, seed=3))
    def run(*arguments):
        done = subprocess.run([str(canvasctl), *arguments, "--endpoint", server.endpoint], capture_output=True, text=True)
        return done.returncode, done.stdout, done.stderr
    code, out, err = run("upload", str(source), "--name", "copy.pdf")
    assert code == 0, err
    assert json.loads(out)["sha256"] == hashlib.sha256(source.read_bytes()).hexdigest()
    code, out, err = run("get", "copy.pdf", "--out", str(tmp_path / "back.pdf"))
    assert code == 0, err and json.loads(out)["revision"] == 1
    assert (tmp_path / "back.pdf").read_bytes() == source.read_bytes()
    code, out, err = run("get", notes, "--revision", "1", "--out", str(tmp_path / "original.pdf"))
    assert code == 0 and (tmp_path / "original.pdf").read_bytes() == NOTES.read_bytes()
    (tmp_path / "junk.pdf").write_bytes(b"not a pdf")
    code, out, err = run("upload", str(tmp_path / "junk.pdf"))
    assert code == 2 and json.loads(err)["code"] == "INVALID_PARAMS" and not (server.documents / "junk.pdf").exists()


def test_null_is_a_param_left_out(client, notes):
    """§2.1: an optional param given as null is the same as one left out, in every method; the
    conformance layer checks each request the server takes against its schema as well."""
    session = client.open_session()
    session.open()
    session.add_text("Hello", 100, 100)
    nulls = {"x": None, "y": None, "dx": None, "dy": None, "fontSize": None, "color": None, "text": None}
    session.call("drawing.editText", {"index": 0, **nulls, "dx": 5})
    assert session.get_drawing()["texts"][0] == {"text": "Hello", "x": 105, "y": 100, "fontSize": 14, "color": "black"}
    stroke = {"tool": "pen", "color": "blue", "width": 3, "points": [{"x": 1, "y": 2}, {"x": 3, "y": 4}]}
    assert session.call("drawing.addStroke", {**stroke, "continued": None})["strokes"] == 1
    whole = client.call("document.get", {"name": notes})
    assert client.call("document.get", {"name": notes, "revision": None, "offset": None, "length": None}) == whole
    data = tiny_pdf(1)
    begun = client.call("document.upload.begin", {"name": "n.pdf", "size": len(data), "sha256": hashlib.sha256(data).hexdigest(),
                                                  "expectedRevision": None})
    client.call("document.upload.part", {"upload": begun["upload"], "offset": 0}, frames=[data])
    assert client.call("document.upload.commit", {"upload": begun["upload"]})["revision"] == 1
