"""Folders written by earlier canvasd versions keep their history under this one (issue 32).

Tests/Fixtures/history-layouts/ holds two document folders made by real runs of older canvasd
builds (see its README.md): `whole-files.tar` (commit 7705f59: `<N>.<ext>` whole copies, the
current one a hard link of the document) and `records.tar` (commit d059bcf: `<N>-<L>.<ext>`
line files, `<N>.rev.*` records, `<N>.madeby.*` marks, and an `<N>.append.*` intent with its
tail, left by an append save killed before its commit). manifest.json says what the old canvasd
listed for each document.

Each folder is extracted with its hard links and served by this canvasd, which migrates it:
every kept revision keeps its number, bytes and sha256; the next save is one past the newest;
the document then shares no inode with the history, and no file of the old name grammars is
left in its history.

A document replaced while canvasd was stopped (written over in place, as cp does, or renamed
over, as editors do) is the next revision, and every revision whose bytes survived that is still
served. The in-place write also overwrote every revision whose only copy was the document's own
inode (`sharesDocumentInode` in the manifest: the current one, and in the records layout every
revision of the current one's line): those may be gone or refused, but are never served with
bytes other than their sha256's.
"""

from __future__ import annotations

import fnmatch
import hashlib
import json
import os
import subprocess
from pathlib import Path
from typing import Dict, List

import pytest

from canvasbridge import CanvasClient, CanvasError
from conftest import CORPUS, ROOT, Server

FIXTURES = ROOT / "Tests" / "Fixtures" / "history-layouts"
MANIFEST = json.loads((FIXTURES / "manifest.json").read_text())
DOCUMENTS = [pytest.param(archive, name, id=f"{archive}-{name}")
             for archive in sorted(MANIFEST) for name in sorted(MANIFEST[archive]["documents"])]
OLD_GRAMMARS = ["*.rev.*", "*.madeby.*", "*.append.*"]
METADATA = b'{"title": "replaced", "created": 0, "modified": 0, "page_count": 2, "tags": [], "ocr_completed": false, ' \
           b'"full_text": ""}'


def extract(archive: str, tmp_path: Path) -> Path:
    """The archive's document folder, extracted by tar (hard links kept as hard links)."""
    folder = tmp_path / "folder"
    folder.mkdir()
    subprocess.run(["tar", "-xf", str(FIXTURES / archive), "-C", str(folder)], check=True)
    documents = folder / "documents"
    # The fixture is what it claims: each saved document is a hard link of a file of its history.
    for name, entry in MANIFEST[archive]["documents"].items():
        if not never_saved(entry):
            assert (documents / name).stat().st_nlink == 2, f"{archive}: {name} lost its hard link in extraction"
    return documents


def never_saved(entry: dict) -> bool:
    return [revision["revision"] for revision in entry["revisions"]] == [1]


def newest(entry: dict) -> int:
    return max(revision["revision"] for revision in entry["revisions"])


def revisions(client: CanvasClient, name: str) -> Dict[int, dict]:
    return {entry["revision"]: entry for entry in client.call("document.revisions", {"name": name})["revisions"]}


def fetch(client: CanvasClient, name: str, revision: int) -> bytes:
    """Revision `revision` of `name`, checked against the sha256 the server names for it
    (CanvasError INTEGRITY when the bytes are not that sha256's)."""
    data, got = client.get_document(name, revision=revision)
    assert got["revision"] == revision
    return data


def assert_kept(client: CanvasClient, where: str, name: str, kept: List[dict], when: str) -> None:
    """Every revision of `kept` is listed with its sha256 and size, and served with those bytes."""
    listed = revisions(client, name)
    for revision in kept:
        number = revision["revision"]
        assert number in listed, f"{where}: revision {number} is no longer listed {when} (listed: {sorted(listed)})"
        assert (listed[number]["sha256"], listed[number]["bytes"]) == (revision["sha256"], revision["bytes"]), \
            f"{where}: revision {number} is listed with other bytes {when}"
        data = fetch(client, name, number)
        assert hashlib.sha256(data).hexdigest() == revision["sha256"] and len(data) == revision["bytes"], \
            f"{where}: revision {number} is served with other bytes {when}"


def assert_new_layout(documents: Path, where: str, name: str, when: str) -> None:
    """The document shares no inode with any file of the history, and its history has no file of
    the old name grammars."""
    history = documents / ".canvas-revisions"
    problems = []
    if (documents / name).exists():
        status = (documents / name).stat()
        sharing = [str(path.relative_to(history)) for path in history.rglob("*")
                   if not path.is_symlink() and path.is_file()
                   and (path.stat().st_ino, path.stat().st_dev) == (status.st_ino, status.st_dev)]
        if sharing:
            problems.append(f"the document is still a hard link of {sharing}")
    leftovers = sorted(path.name for path in (history / name).glob("*")
                       if any(fnmatch.fnmatch(path.name, pattern) for pattern in OLD_GRAMMARS))
    if leftovers:
        problems.append(f"files of the old layout are left: {leftovers}")
    assert not problems, f"{where} {when}: " + "; ".join(problems)


def dot() -> dict:
    return {"strokes": [{"tool": "pen", "color": "blue", "width": 3,
                         "points": [{"x": 200, "y": 200}, {"x": 240, "y": 230}]}], "texts": []}


@pytest.mark.parametrize("archive,name", DOCUMENTS)
def test_an_old_layout_keeps_every_revision(tmp_path: Path, archive: str, name: str):
    entry = MANIFEST[archive]["documents"][name]
    where = f"{archive} {name}"
    documents = extract(archive, tmp_path)
    server = Server(tmp_path / "server", ["--log-level", "error"], documents=documents)
    try:
        with server.client(timeout=30, retries=0) as client:
            # Reads first: the migration happens at the first access, whatever it is.
            listed = {document["name"]: document for document in client.call("document.list", {})["documents"]}
            assert (listed[name].get("revision"), listed[name].get("sha256"), listed[name].get("pageCount")) == \
                (entry["current"], entry["sha256"], entry["pageCount"]), f"{where}: document.list gives {listed[name]}"
            assert_kept(client, where, name, entry["revisions"], "after migration")
            assert revisions(client, name)[entry["current"]]["current"], \
                f"{where}: revision {entry['current']} is no longer the current one"
            assert hashlib.sha256((documents / name).read_bytes()).hexdigest() == entry["sha256"], \
                f"{where}: the document file is not its current revision's bytes"
            assert_new_layout(documents, where, name, "after the reads")
            # One more save: the number after the newest kept one.
            saved = client.call("document.flatten", {"name": name, "page": 0, "drawing": dot()})
            assert saved["revision"] == newest(entry) + 1, f"{where}: the save after migration"
            assert_kept(client, where, name, entry["revisions"], "after a save")
            after = revisions(client, name)
            assert after[saved["revision"]]["current"] and after[saved["revision"]]["sha256"] == saved["sha256"]
            assert [number for number, revision in after.items() if revision["current"]] == [saved["revision"]]
            assert hashlib.sha256(fetch(client, name, saved["revision"])).hexdigest() == saved["sha256"]
            assert_new_layout(documents, where, name, "after a save")
    finally:
        server.stop()
    # And from a restarted server: the migrated history reads the same.
    server = Server(tmp_path / "again", ["--log-level", "error"], documents=documents)
    try:
        with server.client(timeout=30, retries=0) as client:
            assert_kept(client, where, name, entry["revisions"], "after a restart")
            info = client.call("document.info", {"name": name})
            assert (info["revision"], info["sha256"]) == (saved["revision"], saved["sha256"])
        assert_new_layout(documents, where, name, "after a restart")
    finally:
        server.stop()


def replacement(name: str) -> bytes:
    """Other bytes for `name`: another real PDF, in a .yianazip's container for a .yianazip."""
    pdf = (CORPUS / "rotation.pdf").read_bytes()
    return METADATA + b"\xff\xff\xff\xff" + pdf if name.endswith(".yianazip") else pdf


@pytest.mark.parametrize("how", ["in place", "renamed over"])
@pytest.mark.parametrize("archive,name", DOCUMENTS)
def test_a_document_replaced_while_stopped_is_the_next_revision(tmp_path: Path, archive: str, name: str, how: str):
    entry = MANIFEST[archive]["documents"][name]
    where = f"{archive} {name} (replaced {how})"
    documents = extract(archive, tmp_path)
    data = replacement(name)
    sha256 = hashlib.sha256(data).hexdigest()
    if how == "in place":
        # As cp does: the same inode, truncated and written, so a file of the history that is a
        # hard link of the document is overwritten with it.
        with open(documents / name, "r+b") as file:
            file.truncate(0)
            file.write(data)
    else:
        (documents / f".{name}.new").write_bytes(data)
        os.rename(documents / f".{name}.new", documents / name)
    # A document never saved has no history: it is revision 1 whatever its bytes.
    expected = 1 if never_saved(entry) else newest(entry) + 1
    server = Server(tmp_path / "server", ["--log-level", "error"], documents=documents)
    try:
        with server.client(timeout=30, retries=0) as client:
            listed = {document["name"]: document for document in client.call("document.list", {})["documents"]}
            hint = " (the whole-files layout keeps no hash of a revision: an in-place write shows only in the " \
                   "document's mtime, later than its history folder's)" \
                if how == "in place" and MANIFEST[archive]["layout"] == "whole-files" else ""
            assert (listed[name].get("revision"), listed[name].get("sha256")) == (expected, sha256), \
                f"{where}: document.list gives {listed[name]}, not revision {expected} with the new bytes{hint}"
            now = revisions(client, name)
            assert expected in now and now[expected]["current"] and now[expected]["sha256"] == sha256, \
                f"{where}: document.revisions lists {sorted(now)}"
            assert fetch(client, name, expected) == data
            if never_saved(entry):
                return
            # What survived is served as it was; what the in-place write destroyed (held only by
            # the document's own inode) is gone or refused, never served as other bytes.
            survived = [revision for revision in entry["revisions"]
                        if how == "renamed over" or not revision["sharesDocumentInode"]]
            assert_kept(client, where, name, survived, "after migration")
            for revision in entry["revisions"]:
                number = revision["revision"]
                if revision in survived or number not in now:
                    continue
                assert now[number]["sha256"] == revision["sha256"], f"{where}: revision {number} now names other bytes"
                try:
                    served = fetch(client, name, number)
                except CanvasError as error:
                    assert error.code in ("UNAVAILABLE", "NOT_FOUND"), \
                        f"{where}: revision {number}, destroyed by the in-place write: {error}"
                else:
                    assert hashlib.sha256(served).hexdigest() == revision["sha256"]
            assert [number for number, revision in now.items() if revision["current"]] == [expected]
            assert_new_layout(documents, where, name, "after migration")
    finally:
        server.stop()
