"""A save killed at each of its steps (the fault points of a debug build, CANVAS_FAULT_POINT).

For every step of a replacing save, an append in place, the keeping of a file another program
changed, and pruning: canvasd kills itself there with SIGKILL, as a power cut would stop it, and
a new canvasd on the same folder must then serve every acknowledged revision with its bytes and
sha256, the document at its old revision or (once the commit record was durable) its new one,
never a number twice, and the request sent again must answer what it made rather than save
again. A second canvasd reads the folder throughout the kill.
"""

from __future__ import annotations

import hashlib
import time
from pathlib import Path
from typing import Dict, List

import pytest

from canvasbridge import CanvasClient, CanvasTimeout
from conftest import Server
from pdfs import tiny_pdf

DOC = "doc.pdf"

# (fault point, save mode, whether the save is committed when the process dies there)
POINTS = [
    ("saveWritten", "replace", False),
    ("saveLineKept", "replace", False),
    ("saveCommitted", "replace", True),
    ("saveRenamed", "replace", True),
    ("appendIntended", "append", False),
    ("appendWritten", "append", False),
    ("appendLineWritten", "append", False),
    ("appendCommitted", "append", True),
]


def drawing(x: float) -> Dict:
    return {"strokes": [{"tool": "pen", "color": "blue", "width": 2, "points": [{"x": x, "y": 100}, {"x": x + 30, "y": 140}]}],
            "texts": []}


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def start(tmp_path: Path, label: str, documents: Path, arguments: List[str], monkeypatch, fault: str = "") -> Server:
    if fault:
        monkeypatch.setenv("CANVAS_FAULT_POINT", fault)
    try:
        return Server(tmp_path / label, ["--log-level", "error", *arguments], documents=documents)
    finally:
        monkeypatch.delenv("CANVAS_FAULT_POINT", raising=False)


def kept(client: CanvasClient) -> Dict[int, str]:
    return {entry["revision"]: entry["sha256"] for entry in client.call("document.revisions", {"name": DOC})["revisions"]}


def saved_twice(tmp_path: Path, documents: Path, arguments: List[str], monkeypatch) -> Dict[int, str]:
    """The document as revisions 1 (the original), 2 and 3, by a canvasd that then stops."""
    (documents / DOC).write_bytes(tiny_pdf(2))
    first = start(tmp_path, "first", documents, arguments, monkeypatch)
    acknowledged: Dict[int, str] = {1: sha(tiny_pdf(2))}
    with first.client(timeout=10) as client:
        for index in range(2):
            saved = client.call("document.flatten", {"name": DOC, "page": 0, "drawing": drawing(40 + 40 * index)})
            acknowledged[saved["revision"]] = saved["sha256"]
    first.stop()
    assert sorted(acknowledged) == [1, 2, 3]
    return acknowledged


def killed_at(point: str, request: Dict, tmp_path: Path, documents: Path, arguments: List[str], monkeypatch) -> None:
    """`request` sent to a canvasd that kills itself (SIGKILL) at fault point `point`."""
    doomed = start(tmp_path, "doomed", documents, arguments, monkeypatch, fault=point)
    with doomed.client(timeout=3, retries=0) as client:
        with pytest.raises(CanvasTimeout):
            client.request(request)
    deadline = time.monotonic() + 10
    while doomed.process.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    assert doomed.process.returncode == -9, f"canvasd did not die at {point} (status {doomed.process.returncode})"


def check_every_revision(client: CanvasClient, acknowledged: Dict[int, str]) -> Dict[int, str]:
    """Every acknowledged revision is listed with its sha256 and served with bytes that hash to
    it; the current file hashes to what the list says. Returns what is listed."""
    listed = kept(client)
    for revision, digest in acknowledged.items():
        assert listed.get(revision) == digest, f"revision {revision}: listed {listed.get(revision)}, acknowledged {digest}"
        data, meta = client.get_document(DOC, revision=revision)
        assert sha(data) == digest == meta["sha256"], f"revision {revision} served with other bytes"
    for revision, digest in listed.items():
        data, meta = client.get_document(DOC, revision=revision)
        assert sha(data) == digest, f"revision {revision} is served with bytes that are not its sha256"
    return listed


@pytest.mark.parametrize("point,mode,committed", POINTS, ids=[p[0] for p in POINTS])
def test_a_save_killed_at_each_step(tmp_path, monkeypatch, point, mode, committed):
    documents = tmp_path / "documents"
    documents.mkdir()
    arguments = ["--save-mode", mode]
    acknowledged = saved_twice(tmp_path, documents, arguments, monkeypatch)

    reader = start(tmp_path, "reader", documents, arguments, monkeypatch)
    request = {"id": "retried-save-1", "method": "document.flatten",
               "params": {"name": DOC, "page": 0, "drawing": drawing(150), "expectedRevision": 3}}
    killed_at(point, request, tmp_path, documents, arguments, monkeypatch)

    # The reader, running all along, serves what is on disk now, as does a fresh server.
    with reader.client(timeout=10) as client:
        listed = check_every_revision(client, acknowledged)
    restarted = start(tmp_path, "restarted", documents, arguments, monkeypatch)
    try:
        with restarted.client(timeout=10) as client:
            listed = check_every_revision(client, acknowledged)
            summary = client.call("document.info", {"name": DOC})
            assert sha((documents / DOC).read_bytes()) == summary["sha256"], "the file is not the revision the server names"
            expected_current = 4 if committed else 3
            assert summary["revision"] == expected_current, f"killed at {point}: the document is revision {summary['revision']}"
            # Start-up removed the killed save's files: no later save of this document is needed
            # for that (one may never come).
            history = documents / ".canvas-revisions" / DOC
            leftovers = [p.name for p in history.iterdir() if p.name.startswith(".tmp")]
            assert not leftovers, f"left behind by the killed save after a restart: {leftovers}"
            # The same request again: a committed save is answered, not made twice; an
            # uncommitted one is made now, under a number never used.
            again = client.request(request)
            assert "result" in again, f"the retry was refused: {again}"
            assert again["result"]["revision"] == 4
            if committed:
                assert again["result"]["sha256"] == listed[4]
            acknowledged[4] = again["result"]["sha256"]
            after = client.call("document.flatten", {"name": DOC, "page": 0, "drawing": drawing(200)})
            assert after["revision"] == 5
            acknowledged[5] = after["sha256"]
            check_every_revision(client, acknowledged)
            leftovers = [p.name for p in history.iterdir() if p.name.startswith(".tmp")]
            assert not leftovers, f"left behind: {leftovers}"
    finally:
        restarted.stop()
        reader.stop()


@pytest.mark.parametrize("mode", ["replace", "append"])
def test_keeping_an_outside_change_killed_half_way(tmp_path, monkeypatch, mode):
    """The document replaced by another program; canvasd killed while it copies that file into
    the history: nothing is kept yet, and the next reader keeps it as the next revision."""
    documents = tmp_path / "documents"
    documents.mkdir()
    (documents / DOC).write_bytes(tiny_pdf(2))
    arguments = ["--save-mode", mode]
    first = start(tmp_path, "first", documents, arguments, monkeypatch)
    with first.client(timeout=10) as client:
        saved = client.call("document.flatten", {"name": DOC, "page": 0, "drawing": drawing(40)})
    first.stop()
    acknowledged = {1: sha(tiny_pdf(2)), 2: saved["sha256"]}
    other = tiny_pdf(3)
    with open(documents / DOC, "r+b") as file:
        file.truncate(0)
        file.write(other)
    doomed = start(tmp_path, "doomed", documents, arguments, monkeypatch, fault="keepCopied")
    with doomed.client(timeout=3, retries=0) as client:
        with pytest.raises(CanvasTimeout):
            client.call("document.list")
    doomed.process.wait(timeout=10)
    assert doomed.process.returncode == -9, "canvasd did not die while keeping the changed file"
    restarted = start(tmp_path, "restarted", documents, arguments, monkeypatch)
    try:
        with restarted.client(timeout=10) as client:
            check_every_revision(client, acknowledged)
            summary = client.call("document.info", {"name": DOC})
            assert (summary["revision"], summary["sha256"]) == (3, sha(other))
            data, _ = client.get_document(DOC, revision=3)
            assert data == other
    finally:
        restarted.stop()


def test_pruning_killed_after_its_record(tmp_path, monkeypatch):
    """With two revisions kept, the third save prunes revision 2: killed once that is recorded,
    before its bytes go, revision 2 is gone for good and every other is whole."""
    documents = tmp_path / "documents"
    documents.mkdir()
    (documents / DOC).write_bytes(tiny_pdf(2))
    arguments = ["--keep-revisions", "2"]
    acknowledged = {1: sha(tiny_pdf(2))}
    first = start(tmp_path, "first", documents, arguments, monkeypatch)
    with first.client(timeout=10) as client:
        saved = client.call("document.flatten", {"name": DOC, "page": 0, "drawing": drawing(40)})
        acknowledged[2] = saved["sha256"]
    first.stop()
    doomed = start(tmp_path, "doomed", documents, arguments, monkeypatch, fault="pruneRecorded")
    with doomed.client(timeout=3, retries=0) as client:
        with pytest.raises(CanvasTimeout):
            client.call("document.flatten", {"name": DOC, "page": 0, "drawing": drawing(80)})
    doomed.process.wait(timeout=10)
    assert doomed.process.returncode == -9
    restarted = start(tmp_path, "restarted", documents, arguments, monkeypatch)
    try:
        with restarted.client(timeout=10) as client:
            listed = kept(client)
            assert sorted(listed) == [1, 3], listed
            assert listed[1] == acknowledged[1]
            check_every_revision(client, {1: acknowledged[1], 3: listed[3]})
            after = client.call("document.flatten", {"name": DOC, "page": 0, "drawing": drawing(120)})
            assert after["revision"] == 4
    finally:
        restarted.stop()


@pytest.mark.parametrize("outside", ["append", "rename"])
def test_another_programs_write_right_after_the_rename_is_the_next_revision(tmp_path, monkeypatch, outside):
    """Issue 42 (outside_race): another program's write that lands between a save's rename and
    the identity the log records for it. canvasd dies right after its rename (saveRenamed),
    another program appends to the document or renames its own file over it, and a new canvasd
    settles. Before, an append there was recorded as the revision itself (served with a sha256
    that was not the bytes') and a rename made the committed revision `abandoned` (its number
    gone, the request's key with it). Now the revision is what the save wrote, kept, found again
    by its request; the other program's file is the next revision, with its own sha256."""
    documents = tmp_path / "documents"
    documents.mkdir()
    acknowledged = saved_twice(tmp_path, documents, [], monkeypatch)
    request = {"id": "raced-save-1", "method": "document.flatten",
               "params": {"name": DOC, "page": 0, "drawing": drawing(150), "expectedRevision": 3}}
    killed_at("saveRenamed", request, tmp_path, documents, [], monkeypatch)
    made = (documents / DOC).read_bytes()
    if outside == "append":
        with open(documents / DOC, "ab") as file:
            file.write(b"\n% appended by another program\n")
    else:
        (documents / "other.tmp").write_bytes(tiny_pdf(3))
        (documents / "other.tmp").replace(documents / DOC)
    theirs = (documents / DOC).read_bytes()
    restarted = start(tmp_path, "restarted", documents, [], monkeypatch)
    try:
        with restarted.client(timeout=10) as client:
            listed = check_every_revision(client, acknowledged)
            assert listed.get(4) == sha(made), f"the save's revision is not kept as it wrote it: {listed}"
            summary = client.call("document.info", {"name": DOC})
            assert (summary["revision"], summary["sha256"]) == (5, sha(theirs)), summary
            again = client.request(request)
            assert again.get("result", {}).get("revision") == 4 and again["result"]["sha256"] == sha(made), again
    finally:
        restarted.stop()
