"""A document's kept revisions against everything other programs do to the document file
(issue 32): copied over in place, saved by rename, appended to, truncated and rewritten, an
earlier revision written back, one byte changed under its old mtime, touched, deleted, junk
put in its history folder; and a sessionless write retried with its id.

Every case starts from a document saved three times (revisions 2-4, each a document.flatten of
a small stroke), runs in both save modes, and, where it can, with canvasd running while the file
is changed and with canvasd stopped (the file changed, then a new canvasd started on the same
folder). Afterwards every acknowledged revision is listed by document.revisions with its sha256
and served by document.get with bytes that hash to it, the changed file is the next revision
with the sha256 of its real bytes, and no revision number was ever reported, in any reply, with
two different sha256.
"""

from __future__ import annotations

import base64
import hashlib
import os
import time
import uuid
from pathlib import Path
from typing import Callable, Dict, Iterator, List, Optional, Set, Tuple

import pytest

from canvasbridge import CanvasClient, CanvasError
from conftest import Server
from pdfs import tiny_pdf

DOC = "doc.pdf"
ORIGINAL = tiny_pdf(2)
OTHER = tiny_pdf(3)      # another PDF, as `cp other.pdf doc.pdf` puts there
ANOTHER = tiny_pdf(1)    # a third one, for a second change after the first
MODES = ["replace", "append"]
WHEN = ["running", "stopped"]


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def drawing(n: int) -> dict:
    """A small stroke, a different one for each `n`, so that every save makes other bytes."""
    x, y = 40 + 13 * (n % 30), 60 + 17 * (n % 37)
    return {"strokes": [{"tool": "pen", "color": "red", "width": 3,
                         "points": [{"x": x, "y": y}, {"x": x + 25, "y": y + 10}]}], "texts": []}


class Bench:
    """One document under a real canvasd, and what its replies said about it.

    `kept`: revision -> sha256 of every revision the server must keep (1, the original; every
    acknowledged save; every outside change it was seen to take as a revision). `seen`: every
    sha256 any reply named for a revision number, with where it was seen.
    """

    def __init__(self, tmp_path: Path, mode: str):
        self.tmp_path = tmp_path
        self.arguments = ["--log-level", "error", "--save-mode", mode]
        self.documents = tmp_path / "documents"
        self.documents.mkdir(parents=True)
        self.path = self.documents / DOC
        self.path.write_bytes(ORIGINAL)
        self.starts = 0
        self.server: Optional[Server] = None
        self.client: Optional[CanvasClient] = None
        self.kept: Dict[int, str] = {1: sha(ORIGINAL)}
        self.bytes: Dict[int, bytes] = {1: ORIGINAL}
        self.seen: Dict[int, Set[str]] = {}
        self.where: Dict[Tuple[int, str], str] = {}
        self.strokes = 0
        self.start()
        for revision in (2, 3, 4):
            assert self.save()["revision"] == revision
        for revision in (1, 2, 3, 4):
            data, _ = self.fetch(revision)
            assert data == self.bytes[revision]

    # -- the server ----------------------------------------------------------------------------

    def start(self) -> None:
        self.starts += 1
        self.server = Server(self.tmp_path / f"s{self.starts}", self.arguments, documents=self.documents)
        self.client = self.server.client(timeout=5, retries=0)

    def stop(self) -> None:
        if self.client is not None:
            self.client.close()
            self.client = None
        if self.server is not None:
            self.server.stop()
            self.server = None

    def restart(self) -> None:
        self.stop()
        self.start()

    def outside(self, change: Callable[["Bench"], None], when: str) -> Optional[bytes]:
        """Runs `change` (another program's doing) on the folder, canvasd running or stopped
        meanwhile; returns the document file's bytes afterwards (None if there is none)."""
        # A file system's timestamps advance in ticks of a few ms: these cases are about what is
        # done to the file, not about a change within the tick of canvasd's last commit.
        time.sleep(0.05)
        if when == "stopped":
            self.stop()
        change(self)
        data = self.path.read_bytes() if self.path.exists() else None
        if when == "stopped":
            self.start()
        return data

    # -- replies, each checked against everything seen before ----------------------------------

    def saw(self, revision: int, digest: str, where: str) -> None:
        """Noted here, checked by `numbers_once` (every test ends with `check`, which calls it),
        so that a test's own assertion, clearer about what went wrong, fails first."""
        self.seen.setdefault(revision, set()).add(digest)
        self.where.setdefault((revision, digest), where)

    def numbers_once(self) -> None:
        twice = {r: digests for r, digests in self.seen.items() if len(digests) > 1}
        told = "; ".join(f"revision {r}: " + ", ".join(f"{d[:12]} by {self.where[(r, d)]}" for d in sorted(digests))
                         for r, digests in sorted(twice.items()))
        assert not twice, f"revision numbers reported with two sha256: {told}"

    def call(self, method: str, params: dict, **kwargs) -> dict:
        result = self.client.call(method, params, **kwargs)
        if "revision" in result and "sha256" in result:
            self.saw(result["revision"], result["sha256"], method)
        return result

    def save(self, **params) -> dict:
        """A document.flatten of a new stroke on page 0; the revision it made is kept."""
        self.strokes += 1
        result = self.call("document.flatten", {"name": DOC, "page": 0, "drawing": drawing(self.strokes), **params})
        data = self.path.read_bytes()
        assert sha(data) == result["sha256"], "the saved file does not hash to the sha256 the save answered"
        self.took(result["revision"], data)
        return result

    def took(self, revision: int, data: bytes) -> None:
        """`revision` is `data` for good from now on."""
        assert revision not in self.kept or self.kept[revision] == sha(data), \
            f"revision {revision} handed out again: it was {self.kept[revision][:12]}, now {sha(data)[:12]}"
        self.kept[revision] = sha(data)
        self.bytes[revision] = data

    def listed(self) -> Optional[dict]:
        entries = [e for e in self.client.call("document.list", {})["documents"] if e["name"] == DOC]
        for entry in entries:
            if "revision" in entry:
                self.saw(entry["revision"], entry["sha256"], "document.list")
        assert len(entries) <= 1
        return entries[0] if entries else None

    def fetch(self, revision: Optional[int] = None) -> Tuple[bytes, dict]:
        """document.get of the whole revision, in pieces; the bytes are checked against the
        sha256 the first piece named."""
        data = bytearray()
        first: Optional[dict] = None
        while first is None or len(data) < first["size"]:
            params: dict = {"name": DOC, "offset": len(data)}
            pinned = revision if revision is not None else (first["revision"] if first else None)
            if pinned is not None:
                params["revision"] = pinned
            piece = self.client.call("document.get", params)
            first = first or piece
            chunk = base64.b64decode(piece["data"])
            assert chunk or len(data) >= piece["size"], "document.get: an empty piece before the end"
            data += chunk
        self.saw(first["revision"], first["sha256"], "document.get")
        assert sha(bytes(data)) == first["sha256"], \
            f"document.get of revision {first['revision']}: the bytes served hash to {sha(bytes(data))[:12]}, " \
            f"not to the sha256 served with them, {first['sha256'][:12]}"
        if revision is not None:
            assert first["revision"] == revision
        return bytes(data), first

    def revisions(self) -> List[dict]:
        entries = self.client.call("document.revisions", {"name": DOC})["revisions"]
        for entry in entries:
            self.saw(entry["revision"], entry["sha256"], "document.revisions")
        return entries

    def check(self, current: Optional[int]) -> None:
        """Every kept revision listed with its sha256 and served with bytes that hash to it;
        `current` (None: the document is deleted) the one current revision, the newest, and the
        file's; and no revision number ever reported with two sha256."""
        self.numbers_once()
        entries = self.revisions()
        numbers = [e["revision"] for e in entries]
        assert numbers == sorted(set(numbers)), f"document.revisions not oldest first, or a number twice: {numbers}"
        listed = {e["revision"]: e["sha256"] for e in entries}
        lost = {r: s[:12] for r, s in self.kept.items() if listed.get(r) != s}
        assert not lost, f"kept revisions missing or listed with another sha256: {lost}; listed {numbers}"
        for entry in entries:
            data, first = self.fetch(entry["revision"])
            assert first["sha256"] == entry["sha256"]
            if entry["revision"] in self.bytes:
                assert data == self.bytes[entry["revision"]], f"revision {entry['revision']}: other bytes"
        if current is None:
            assert not any(e["current"] for e in entries), f"a deleted document has a current revision: {entries}"
            assert not self.path.exists()
            self.numbers_once()
            return
        assert [e["revision"] for e in entries if e["current"]] == [current]
        assert numbers[-1] == current, f"revision {current} is current but not the newest: {numbers}"
        assert sha(self.path.read_bytes()) == self.kept[current]
        entry = self.listed()
        assert entry is not None and "problem" not in entry, entry
        assert (entry["revision"], entry["sha256"]) == (current, self.kept[current])
        info = self.call("document.info", {"name": DOC})
        assert (info["revision"], info["sha256"]) == (current, self.kept[current])
        data, first = self.fetch()
        assert (first["revision"], data) == (current, self.bytes[current])
        self.numbers_once()


@pytest.fixture
def bench(tmp_path: Path, mode: str) -> Iterator[Bench]:
    """doc.pdf saved three times (revisions 2-4) by a canvasd in `mode`."""
    made = Bench(tmp_path, mode)
    yield made
    made.stop()


def refused(call: Callable[[], object], code: str) -> CanvasError:
    with pytest.raises(CanvasError) as caught:
        call()
    assert caught.value.code == code, f"{caught.value.code} ({caught.value.data}), not {code}"
    return caught.value


# -- what other programs do to the file ------------------------------------------------------

def write_in_place(path: Path, data: bytes) -> None:
    """What `cp data doc.pdf` does: the same file (inode) truncated and written."""
    inode = path.stat().st_ino
    with open(path, "r+b") as out:
        out.truncate(0)
        out.write(data)
    assert path.stat().st_ino == inode


def cp_in_place(bench: Bench) -> None:
    write_in_place(bench.path, OTHER)


def rename_over(bench: Bench) -> None:
    """What editors do: a temporary file written beside it and renamed over it."""
    inode = bench.path.stat().st_ino
    temporary = bench.documents / f".{DOC}.swp"
    temporary.write_bytes(OTHER)
    os.replace(temporary, bench.path)
    assert bench.path.stat().st_ino != inode


def append_in_place(bench: Bench) -> None:
    with open(bench.path, "ab") as out:
        out.write(b"\n% a line another program appended\n")


def truncate_then_rewrite(bench: Bench) -> None:
    """Cut short (the file torn meanwhile), then written from the start and cut to its end."""
    os.truncate(bench.path, bench.path.stat().st_size // 2)
    with open(bench.path, "r+b") as out:
        out.write(ANOTHER)
        out.truncate()


def earlier_revision_in_place(bench: Bench) -> None:
    """`cp rev3.pdf doc.pdf`, revision 3's bytes as document.get served them."""
    write_in_place(bench.path, bench.bytes[3])


CHANGES = {
    "cp-in-place": cp_in_place,
    "rename-over": rename_over,
    "append": append_in_place,
    "truncate-rewrite": truncate_then_rewrite,
    "earlier-revision": earlier_revision_in_place,
}


@pytest.mark.parametrize("when", WHEN)
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("change", list(CHANGES))
def test_an_outside_change_is_the_next_revision(bench: Bench, change: str, when: str):
    """The changed file is revision 5 with its real sha256, after 1-4, which keep their bytes;
    a save is 6; the file changed again is 7, and 5 and 6 are still served."""
    data = bench.outside(CHANGES[change], when)
    entry = bench.listed()
    assert entry is not None and "problem" not in entry, entry
    assert (entry["revision"], entry["sha256"]) == (5, sha(data)), \
        f"the changed file is listed as revision {entry['revision']} {entry['sha256'][:12]}, " \
        f"not as revision 5 {sha(data)[:12]}"
    bench.took(5, data)
    bench.check(current=5)

    assert bench.save()["revision"] == 6
    bench.check(current=6)

    # Changed again, in place: 5 was the history's own copy, not the file.
    again = bench.outside(lambda b: write_in_place(b.path, ANOTHER if data != ANOTHER else OTHER), when)
    entry = bench.listed()
    assert entry is not None and "problem" not in entry, entry
    assert (entry["revision"], entry["sha256"]) == (7, sha(again)), entry
    bench.took(7, again)
    bench.check(current=7)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("change", list(CHANGES))
def test_an_outside_change_noticed_by_a_save_is_kept_before_it(bench: Bench, change: str):
    """No read between the change and the save: the change is 5 all the same, the save 6."""
    data = bench.outside(CHANGES[change], "running")
    saved = bench.save()
    assert saved["revision"] == 6, f"the save after an outside change is revision {saved['revision']}, not 6"
    bench.took(5, data)
    bench.check(current=6)


@pytest.mark.parametrize("mode", MODES)
def test_a_save_expecting_the_revision_before_an_outside_change_conflicts(bench: Bench):
    """The outside change is another writer's save: expectedRevision 4 is stale, the current
    revision is 5."""
    data = bench.outside(cp_in_place, "running")
    error = refused(lambda: bench.save(expectedRevision=4), "CONFLICT")
    assert (error.data.get("expectedRevision"), error.data.get("revision")) == (4, 5), error.data
    assert bench.path.read_bytes() == data, "a refused save changed the file"
    bench.took(5, data)
    assert bench.save(expectedRevision=5)["revision"] == 6
    bench.check(current=6)


@pytest.mark.parametrize("when", WHEN)
@pytest.mark.parametrize("mode", MODES)
def test_one_byte_changed_in_place_under_its_old_mtime(bench: Bench, when: str):
    """Same size, same inode, the mtime put back: the ctime still tells, and the sha256 served
    is the new bytes'."""
    old = bench.path.read_bytes()
    assert old[:7] == b"%PDF-1."
    changed = old[:7] + (b"4" if old[7:8] != b"4" else b"5") + old[8:]

    def change(b: Bench) -> None:
        before = b.path.stat()
        with open(b.path, "r+b") as out:
            out.seek(7)
            out.write(changed[7:8])
        os.utime(b.path, ns=(before.st_atime_ns, before.st_mtime_ns))
        after = b.path.stat()
        assert (after.st_ino, after.st_size, after.st_mtime_ns) == (before.st_ino, before.st_size, before.st_mtime_ns)

    data = bench.outside(change, when)
    assert data == changed
    entry = bench.listed()
    assert entry is not None and "problem" not in entry, entry
    assert (entry["revision"], entry["sha256"]) == (5, sha(changed)), \
        f"document.list: revision {entry['revision']} {entry['sha256'][:12]}, not 5 {sha(changed)[:12]} " \
        f"(the old bytes' are {sha(old)[:12]})"
    got, first = bench.fetch()
    assert (first["revision"], first["sha256"], got) == (5, sha(changed), changed)
    bench.took(5, changed)
    bench.check(current=5)
    assert bench.save()["revision"] == 6
    bench.check(current=6)


def touch(bench: Bench) -> None:
    later = bench.path.stat().st_mtime_ns + 10 ** 10
    os.utime(bench.path, ns=(later, later))


def cp_same_bytes(bench: Bench) -> None:
    write_in_place(bench.path, bench.path.read_bytes())


def rename_same_bytes(bench: Bench) -> None:
    """The same bytes in another file renamed over it (a folder restored from a backup)."""
    temporary = bench.documents / f".{DOC}.restore"
    temporary.write_bytes(bench.path.read_bytes())
    os.replace(temporary, bench.path)


@pytest.mark.parametrize("when", WHEN)
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("change", ["touch", "cp-same-bytes", "rename-same-bytes"])
def test_the_same_bytes_are_still_the_same_revision(bench: Bench, change: str, when: str):
    operation = {"touch": touch, "cp-same-bytes": cp_same_bytes, "rename-same-bytes": rename_same_bytes}[change]
    data = bench.outside(operation, when)
    assert data == bench.bytes[4]
    entry = bench.listed()
    assert entry is not None and "problem" not in entry, entry
    assert (entry["revision"], entry["sha256"]) == (4, bench.kept[4]), entry
    bench.check(current=4)
    saved = bench.save()
    assert saved["revision"] == 5, f"the next save is revision {saved['revision']}: the same bytes were taken as a new revision"
    bench.check(current=5)


def delete(bench: Bench) -> None:
    bench.path.unlink()


def deleted_history_is_there(bench: Bench) -> None:
    assert bench.listed() is None, "document.list lists a deleted document"
    refused(lambda: bench.call("document.info", {"name": DOC}), "NOT_FOUND")
    refused(lambda: bench.call("document.flatten", {"name": DOC, "page": 0, "drawing": drawing(99)}), "NOT_FOUND")
    bench.check(current=None)
    assert [e["revision"] for e in bench.revisions()] == [1, 2, 3, 4]
    data, first = bench.fetch(2)
    assert (first["sha256"], data) == (bench.kept[2], bench.bytes[2])


@pytest.mark.parametrize("when", WHEN)
@pytest.mark.parametrize("mode", MODES)
def test_a_deleted_document_keeps_its_history_and_is_restored_as_the_next_revision(bench: Bench, when: str):
    assert bench.outside(delete, when) is None
    deleted_history_is_there(bench)
    restored = bench.call("document.restore", {"name": DOC, "revision": 2})
    assert (restored["revision"], restored["sha256"]) == (5, bench.kept[2]), restored
    assert bench.path.read_bytes() == bench.bytes[2]
    bench.took(5, bench.bytes[2])
    bench.check(current=5)
    assert bench.save()["revision"] == 6
    bench.check(current=6)


@pytest.mark.parametrize("when", WHEN)
@pytest.mark.parametrize("mode", MODES)
def test_a_file_copied_in_under_a_deleted_documents_name_continues_its_history(bench: Bench, when: str):
    assert bench.outside(delete, when) is None
    deleted_history_is_there(bench)
    data = bench.outside(lambda b: b.path.write_bytes(OTHER), when)
    entry = bench.listed()
    assert entry is not None and "problem" not in entry, entry
    assert (entry["revision"], entry["sha256"]) == (5, sha(data)), \
        f"the file copied in is revision {entry['revision']}, not 5"
    bench.took(5, data)
    bench.check(current=5)
    assert bench.save()["revision"] == 6
    bench.check(current=6)


@pytest.mark.parametrize("when", WHEN)
@pytest.mark.parametrize("mode", MODES)
def test_an_upload_under_a_deleted_documents_name_continues_its_history(bench: Bench, when: str):
    assert bench.outside(delete, when) is None
    deleted_history_is_there(bench)
    uploaded = bench.client.upload_document(DOC, OTHER)
    bench.saw(uploaded["revision"], uploaded["sha256"], "document.upload.commit")
    assert (uploaded["revision"], uploaded["sha256"]) == (5, sha(OTHER)), \
        f"the upload is revision {uploaded['revision']}, not 5"
    bench.took(5, OTHER)
    bench.check(current=5)
    assert bench.save()["revision"] == 6
    bench.check(current=6)


@pytest.mark.parametrize("when", WHEN)
@pytest.mark.parametrize("mode", MODES)
def test_files_made_by_hand_in_the_history_folder_are_no_revisions(bench: Bench, when: str):
    history = bench.documents / ".canvas-revisions" / DOC
    assert history.is_dir()

    def junk(b: Bench) -> None:
        (history / f"900.rev.1.123.0.{sha(b'')}.{'0' * 64}").write_bytes(b"")
        # One that names the current file's line and length, with a made-up sha256 (what the
        # record grammar of canvasd before issue 32 took for a newer revision of that file).
        (history / f"901.rev.1.{b.path.stat().st_size}.1795851157021.{'b' * 64}.{'0' * 64}").write_bytes(b"")
        (history / "7.pdf").write_bytes(OTHER)

    bench.outside(junk, when)
    for revision in (900, 901, 7):
        error = refused(lambda: bench.fetch(revision), "NOT_FOUND")
        assert error.data.get("revision") == revision, error.data
    assert [e["revision"] for e in bench.revisions()] == [1, 2, 3, 4]
    bench.check(current=4)
    assert bench.save()["revision"] == 5
    bench.check(current=5)
    for revision in (900, 901, 7):
        refused(lambda: bench.fetch(revision), "NOT_FOUND")


@pytest.mark.parametrize("mode", MODES)
def test_the_document_shares_no_inode_with_its_history(bench: Bench):
    """After saves and restores the document is a file of its own: nothing done to it in place
    can reach a kept revision's bytes."""

    def alone(after: str) -> None:
        document = bench.path.stat()
        assert document.st_nlink == 1, f"after {after}: the document has {document.st_nlink} links"
        shared = [str(p.relative_to(bench.documents)) for p in (bench.documents / ".canvas-revisions").rglob("*")
                  if (p.lstat().st_dev, p.lstat().st_ino) == (document.st_dev, document.st_ino)]
        assert not shared, f"after {after}: the document is the same file as {shared}"

    alone("3 saves")
    for revision in (1, 3):
        restored = bench.call("document.restore", {"name": DOC, "revision": revision})
        bench.took(restored["revision"], bench.bytes[revision])
        alone(f"a restore of revision {revision}")
    bench.save()
    alone("a save after the restores")
    bench.check(current=max(bench.kept))


def retry_id() -> str:
    return f"retry-{uuid.uuid4().hex}"


def same_result(first: dict, second: dict) -> None:
    keys = ("name", "revision", "pageCount", "sha256")
    assert {k: second.get(k) for k in keys} == {k: first.get(k) for k in keys}


@pytest.mark.parametrize("when", WHEN)
@pytest.mark.parametrize("mode", MODES)
def test_a_retried_sessionless_flatten_answers_what_it_made(bench: Bench, when: str):
    """Sent again with its id and params after its reply was lost (canvasd stopped meanwhile,
    or not): the first reply's result, not CONFLICT, and one revision made."""
    id = retry_id()
    params = {"name": DOC, "page": 0, "drawing": drawing(50), "expectedRevision": 4}
    first = bench.call("document.flatten", dict(params), id=id)
    assert first["revision"] == 5
    bench.took(5, bench.path.read_bytes())
    if when == "stopped":
        bench.restart()
    try:
        second = bench.call("document.flatten", dict(params), id=id)
    except CanvasError as error:
        pytest.fail(f"the retry was answered {error.code} {error.data}, not the first reply (revision 5)")
    same_result(first, second)
    assert [e["revision"] for e in bench.revisions()] == [1, 2, 3, 4, 5], "the retry saved again"
    bench.check(current=5)


@pytest.mark.parametrize("when", WHEN)
@pytest.mark.parametrize("mode", MODES)
def test_a_retried_sessionless_restore_answers_what_it_made(bench: Bench, when: str):
    id = retry_id()
    params = {"name": DOC, "revision": 2, "expectedRevision": 4}
    first = bench.call("document.restore", dict(params), id=id)
    assert (first["revision"], first["sha256"]) == (5, bench.kept[2])
    bench.took(5, bench.bytes[2])
    if when == "stopped":
        bench.restart()
    try:
        second = bench.call("document.restore", dict(params), id=id)
    except CanvasError as error:
        pytest.fail(f"the retry was answered {error.code} {error.data}, not the first reply (revision 5)")
    same_result(first, second)
    assert [e["revision"] for e in bench.revisions()] == [1, 2, 3, 4, 5], "the retry restored again"
    bench.check(current=5)


@pytest.mark.parametrize("mode", MODES)
def test_a_retried_sessionless_flatten_after_another_writers_save_answers_what_it_made(bench: Bench):
    """The retry comes after someone else saved revision 6: it still answers 5, its own."""
    id = retry_id()
    params = {"name": DOC, "page": 0, "drawing": drawing(50), "expectedRevision": 4}
    first = bench.call("document.flatten", dict(params), id=id)
    bench.took(5, bench.path.read_bytes())
    assert bench.save()["revision"] == 6
    try:
        second = bench.call("document.flatten", dict(params), id=id)
    except CanvasError as error:
        pytest.fail(f"the retry was answered {error.code} {error.data}, not the first reply (revision 5)")
    same_result(first, second)
    bench.check(current=6)


@pytest.mark.parametrize("mode", MODES)
def test_another_request_under_a_retried_id_is_not_answered_as_the_first(bench: Bench):
    id = retry_id()
    first = bench.call("document.flatten", {"name": DOC, "page": 0, "drawing": drawing(50), "expectedRevision": 4}, id=id)
    assert first["revision"] == 5
    bench.took(5, bench.path.read_bytes())
    # The same id, another drawing, the same stale expectedRevision: another writer's request.
    error = refused(lambda: bench.call("document.flatten", {"name": DOC, "page": 0, "drawing": drawing(51),
                                                            "expectedRevision": 4}, id=id), "CONFLICT")
    assert (error.data.get("expectedRevision"), error.data.get("revision")) == (4, 5), error.data
    # The same params under another id: not a retry either.
    error = refused(lambda: bench.call("document.flatten", {"name": DOC, "page": 0, "drawing": drawing(50),
                                                            "expectedRevision": 4}, id=retry_id()), "CONFLICT")
    assert error.data.get("revision") == 5, error.data
    # The same id, another drawing, expecting 5: saved as 6, its own bytes.
    third = bench.call("document.flatten", {"name": DOC, "page": 0, "drawing": drawing(52), "expectedRevision": 5}, id=id)
    assert third["revision"] == 6 and third["sha256"] != first["sha256"], third
    data = bench.path.read_bytes()
    assert sha(data) == third["sha256"]
    bench.took(6, data)
    bench.check(current=6)


@pytest.mark.parametrize("mode", MODES)
def test_an_unpaced_outside_writer_meets_saves_as_busy_never_internal(tmp_path: Path, mode: str):
    """Issue 47: three clients flatten into the document for 8 s while another program writes
    it every 2 ms, turn about: an earlier revision's bytes copied over it in place (`cp`)
    and one byte appended. A save it meets answers UNAVAILABLE (`busy`, or `damaged` for a file
    caught half-written), never INTERNAL (the soak saw "copy doc.pdf for its new revision:
    Input/output error", 2-3 times in 10-40 s); every acknowledged revision stays listed and
    served with its sha256, and no number is answered with two sha256."""
    import threading

    bench = Bench(tmp_path, mode)
    bench.stop()
    bench.arguments += ["--keep-revisions", "100000"]
    bench.start()
    earlier = bench.bytes[2]
    stop = threading.Event()
    refused: List[str] = []
    acknowledged: List[Tuple[int, str]] = []
    writes = [0]

    def writer() -> None:
        while not stop.is_set():
            writes[0] += 1
            if writes[0] % 2:
                with open(bench.path, "r+b") as file:
                    file.truncate(0)
                    file.write(earlier)
            else:
                with open(bench.path, "ab") as file:
                    file.write(b"\n")
            time.sleep(0.002)   # unpaced, all but: some saves get through between the writes

    def saver(index: int) -> None:
        with bench.server.client(timeout=20, retries=0) as client:
            count = 0
            while not stop.is_set():
                count += 1
                try:
                    result = client.call("document.flatten", {"name": DOC, "page": 0, "drawing": drawing(1000 * index + count)})
                    acknowledged.append((result["revision"], result["sha256"]))
                except CanvasError as error:
                    refused.append(f"{error.code} {error.data.get('reason', '')}".strip() + f": {error.message}")

    threads = [threading.Thread(target=writer)] + [threading.Thread(target=saver, args=(index,)) for index in range(3)]
    for thread in threads:
        thread.start()
    time.sleep(8)
    stop.set()
    for thread in threads:
        thread.join(timeout=60)
    kinds = sorted({entry.split(":")[0] for entry in refused})
    print(f"\n{mode}: {len(acknowledged)} saves acknowledged, {len(refused)} refused ({kinds}), {writes[0]} outside writes")
    assert not [entry for entry in refused if not entry.startswith("UNAVAILABLE")], refused[:5]
    assert acknowledged, "no save got through: the test shows nothing"
    assert any(entry.startswith("UNAVAILABLE busy") for entry in refused), "no save met the writer: the test shows nothing"
    for revision, digest in acknowledged:
        bench.saw(revision, digest, "document.flatten")
    bench.numbers_once()
    listed = {entry["revision"]: entry["sha256"] for entry in bench.revisions()}
    lost = [(revision, digest[:12]) for revision, digest in acknowledged if listed.get(revision) != digest]
    assert not lost, f"acknowledged revisions missing or listed with another sha256: {lost}"
    for revision, digest in acknowledged[-5:]:
        data, first = bench.fetch(revision)
        assert first["sha256"] == digest
    bench.stop()


# -- something that is no document, or no history, where one should be (issue 42) -----------

def put_in_place(path: Path, kind: str, target: Path) -> None:
    """`kind` where the file `path` was: a folder, a FIFO, or a symbolic link to `target`."""
    path.unlink()
    if kind == "folder":
        path.mkdir()
    elif kind == "fifo":
        os.mkfifo(path)
    else:
        path.symlink_to(target)


@pytest.mark.parametrize("kind", ["folder", "fifo", "symlink"])
@pytest.mark.parametrize("mode", MODES)
def test_the_kept_revisions_stay_reachable_when_something_else_is_at_the_documents_name(bench: Bench, kind: str):
    """Before, a folder, FIFO or link at the name made `document.get {revision: 1}` and
    `document.revisions` refuse with notRegularFile: every kept revision was unreachable. Now
    they are served as a deleted document's are; what is at the name is refused as a document
    and left as it is."""
    other = bench.documents / "other.pdf"
    other.write_bytes(OTHER)
    put_in_place(bench.path, kind, other)
    entries = bench.revisions()
    assert [(e["revision"], e["sha256"], e["current"]) for e in entries] == \
        [(revision, bench.kept[revision], False) for revision in (1, 2, 3, 4)]
    for revision in (1, 2, 3, 4):
        data, _ = bench.fetch(revision)
        assert data == bench.bytes[revision]
    for method, params in [("document.info", {"name": DOC}),
                           ("document.flatten", {"name": DOC, "page": 0, "drawing": drawing(98)})]:
        error = refused(lambda: bench.call(method, params), "UNAVAILABLE")
        assert error.data["reason"] == "notRegularFile", error.data
    assert (bench.path.is_dir() if kind == "folder" else bench.path.is_fifo() if kind == "fifo" else bench.path.is_symlink())
    assert other.read_bytes() == OTHER
    bench.numbers_once()


@pytest.mark.parametrize("mode", MODES)
def test_a_history_folder_replaced_by_a_file_is_damaged_never_revision_1(bench: Bench):
    """Before, the document read as revision 1 (its revisions 1-4 gone from every answer) and
    a save answered INTERNAL "Not a directory". Now every request says the history is damaged,
    and nothing is written: not the document, not the file."""
    history = bench.documents / ".canvas-revisions" / DOC
    import shutil
    shutil.rmtree(history)
    history.write_bytes(b"not a folder")
    before = bench.path.read_bytes()
    for method, params in [("document.info", {"name": DOC}), ("document.revisions", {"name": DOC}),
                           ("document.get", {"name": DOC}),
                           ("document.flatten", {"name": DOC, "page": 0, "drawing": drawing(97)})]:
        error = refused(lambda: bench.call(method, params), "UNAVAILABLE")
        assert error.data["reason"] == "damaged" and "is not a folder" in error.message, (method, error.data, error.message)
    assert bench.path.read_bytes() == before
    assert history.read_bytes() == b"not a folder"
