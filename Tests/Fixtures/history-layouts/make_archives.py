#!/usr/bin/env python3
"""Makes whole-files.tar or records.tar and their entry in manifest.json (see README.md).

    python make_archives.py whole-files /path/to/canvasd-built-at-7705f59
    python make_archives.py records     /path/to/canvasd-built-at-d059bcf

Runs with the repository's venv (pyzmq) and PYTHONPATH=clients/python. The records layout also
needs redis-server (a session store, so that sessioned saves leave `madeby` marks) and strace
(to kill one append save between its write and its commit, leaving an `append` intent).
"""

from __future__ import annotations

import hashlib
import json
import re
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Dict, List, Optional

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[2]
sys.path.insert(0, str(ROOT / "clients" / "python"))

from canvasbridge import CanvasClient, CanvasTimeout  # noqa: E402

CORPUS = ROOT / "Tests" / "Fixtures" / "pdfjs"
METADATA = b'{"title": "box", "created": 0, "modified": 0, "page_count": 2, "tags": [], "ocr_completed": false, ' \
           b'"full_text": "", "big": 123456789012345678901234567890}'


def stroke(i: int) -> dict:
    return {"strokes": [{"tool": "pen", "color": ["red", "blue", "green", "black"][i % 4], "width": 3,
                         "points": [{"x": 30 + 25 * i, "y": 40}, {"x": 60 + 25 * i, "y": 90}, {"x": 90 + 25 * i, "y": 60}]}],
            "texts": []}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Redis:
    def __init__(self, folder: Path):
        self.port = free_port()
        self.process = subprocess.Popen(["redis-server", "--port", str(self.port), "--bind", "127.0.0.1", "--save", "",
                                         "--appendonly", "no", "--dir", str(folder)],
                                        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        for _ in range(100):
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=0.2).close()
                return
            except OSError:
                time.sleep(0.05)
        raise RuntimeError("redis-server did not start")

    def stop(self) -> None:
        self.process.terminate()
        self.process.wait(timeout=5)


class Canvasd:
    """One canvasd run on `documents`; `prefix` runs it under another program (strace)."""

    def __init__(self, binary: str, run: Path, documents: Path, arguments: List[str], prefix: List[str] = ()):
        run.mkdir(parents=True, exist_ok=True)
        self.endpoint = f"ipc://{run}/requests"
        command = [*prefix, binary, "--endpoint", self.endpoint, "--events", f"ipc://{run}/events",
                   "--documents", str(documents), *arguments]
        print("$", " ".join(command), flush=True)
        self.log = open(run / "canvasd.log", "ab")
        self.process = subprocess.Popen(command, stdout=self.log, stderr=subprocess.STDOUT)
        with CanvasClient(self.endpoint, timeout=0.2, retries=0) as client:
            for _ in range(100):
                try:
                    client.hello()
                    break
                except CanvasTimeout:
                    if self.process.poll() is not None:
                        raise RuntimeError("canvasd did not start")
            else:
                raise RuntimeError("canvasd did not answer")
        # Writes are never retried: a sessionless save sent twice would save twice.
        self.client = CanvasClient(self.endpoint, timeout=30, retries=0)

    def stop(self) -> None:
        self.client.close()
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            self.process.wait(timeout=10)
        self.log.close()


class Acks:
    def __init__(self) -> None:
        self.saved: Dict[str, List[dict]] = {}

    def add(self, what: str, result: dict) -> None:
        print(f"  {what}: {result['name']} revision {result['revision']} pages {result['pageCount']} {result['sha256']}", flush=True)
        self.saved.setdefault(result["name"], []).append(
            {"request": what, "revision": result["revision"], "pageCount": result["pageCount"], "sha256": result["sha256"]})


def flatten(server: Canvasd, acks: Acks, name: str, i: int, session: Optional[str] = None) -> None:
    result = server.client.call("document.flatten", {"name": name, "page": 0, "drawing": stroke(i)}, session=session)
    acks.add("document.flatten" + (" (session)" if session else ""), result)


def restore(server: Canvasd, acks: Acks, name: str, revision: int) -> None:
    acks.add(f"document.restore {revision}", server.client.call("document.restore", {"name": name, "revision": revision}))


def sessioned(server: Canvasd) -> str:
    return server.client.call("session.open", {"transitions": "instant", "initialized": True, "resultImages": False,
                                               "pencil": {"supported": True, "preferredTapAction": "switchEraser",
                                                          "policy": "alwaysToggle"}})["session"]


def make_whole_files(binary: str, work: Path, documents: Path, acks: Acks) -> None:
    # Run 1: three saves into a.pdf, two into b.yianazip.
    server = Canvasd(binary, work / "run1", documents, [])
    for i in range(3):
        flatten(server, acks, "a.pdf", i)
    for i in range(2):
        flatten(server, acks, "b.yianazip", i)
    server.stop()
    # Run 2, with a session store: a sessioned save (it leaves a `madeby` mark), then a restore of
    # revision 1.
    redis = Redis(work)
    server = Canvasd(binary, work / "run2", documents,
                     ["--session-store", f"redis://127.0.0.1:{redis.port}/0", "--instance", "fixture"])
    flatten(server, acks, "a.pdf", 3, session=sessioned(server))
    restore(server, acks, "a.pdf", 1)
    server.stop()
    redis.stop()


def make_records(binary: str, work: Path, documents: Path, acks: Acks) -> None:
    # Run 1, keeping 3 revisions: three saves into a.pdf (revision 2 is pruned), one into b.yianazip.
    server = Canvasd(binary, work / "run1", documents, ["--keep-revisions", "3"])
    for i in range(3):
        flatten(server, acks, "a.pdf", i)
    flatten(server, acks, "b.yianazip", 0)
    server.stop()
    # Run 2, with a session store: a sessioned save into a.pdf (a `madeby` mark), a restore of
    # revision 1 (a line of its own), one more save into b.yianazip.
    redis = Redis(work)
    store = ["--session-store", f"redis://127.0.0.1:{redis.port}/0", "--instance", "fixture"]
    server = Canvasd(binary, work / "run2", documents, store)
    flatten(server, acks, "a.pdf", 3, session=sessioned(server))
    restore(server, acks, "a.pdf", 1)
    flatten(server, acks, "b.yianazip", 1)
    server.stop()
    # Run 3, appending in place with the session store: three saves into c.pdf, the last one
    # sessioned (a mark beside an appended revision).
    server = Canvasd(binary, work / "run3", documents, ["--save-mode", "append", *store])
    flatten(server, acks, "c.pdf", 0)
    flatten(server, acks, "c.pdf", 1)
    flatten(server, acks, "c.pdf", 2, session=sessioned(server))
    server.stop()
    redis.stop()
    # Run 4: an append save into c.pdf killed (SIGKILL, by strace) at the first fdatasync, the
    # one right after the update is written and before its record: the folder is left with the
    # `N.append.*` intent and a tail past the last committed revision, as a crash leaves it.
    server = Canvasd(binary, work / "run4", documents, ["--save-mode", "append"],
                     prefix=["strace", "-f", "-qq", "-o", "/dev/null", "-e", "trace=fdatasync",
                             "-e", "inject=fdatasync:signal=KILL"])
    server.client.timeout = 5
    try:
        server.client.call("document.flatten", {"name": "c.pdf", "page": 0, "drawing": stroke(3)})
        raise RuntimeError("the append save was acknowledged: it was not killed")
    except CanvasTimeout:
        print("  document.flatten c.pdf: killed before its commit (not acknowledged)")
    server.process.wait(timeout=10)
    server.stop()
    intents = [p.name for p in (documents / ".canvas-revisions" / "c.pdf").iterdir() if ".append." in p.name]
    assert intents, "the killed append left no intent"


def holders(layout: str, documents: Path, name: str) -> Dict[int, Path]:
    """The file of the old layout that holds each kept revision's bytes (as the old canvasd reads
    it: a whole `<N>.<ext>`, or the newest file of a record's line long enough to hold it)."""
    history = documents / ".canvas-revisions" / name
    if not history.is_dir():
        return {}
    ext = name.rsplit(".", 1)[1]
    files = {}   # path: (revision, line)
    records = {}  # revision: (line, length)
    for path in history.iterdir():
        if m := re.fullmatch(rf"(\d+)(?:-(\d+))?\.{ext}", path.name):
            files[path] = (int(m[1]), int(m[2] or m[1]))
        elif m := re.match(r"(\d+)\.rev\.(\d+)\.(\d+)\.", path.name):
            records[int(m[1])] = (int(m[2]), int(m[3]))
    result = {}
    for path, (revision, line) in files.items():
        if layout == "whole-files" or (revision == line and not any(l == line for l, _ in records.values())):
            result[revision] = path
    for revision, (line, length) in records.items():
        candidates = [(n, p) for p, (n, l) in files.items() if l == line and p.stat().st_size >= length]
        result[revision] = max(candidates)[1]
    return result


def listing(binary: str, work: Path, documents: Path) -> Dict[str, dict]:
    """What the old canvasd lists for every document of `documents`, each kept revision fetched
    and checked against its sha256."""
    server = Canvasd(binary, work, documents, [])
    try:
        listed = server.client.call("document.list", {})["documents"]
        result = {}
        for document in listed:
            name = document["name"]
            revisions = server.client.call("document.revisions", {"name": name})["revisions"]
            kept = []
            for entry in revisions:
                data, got = server.client.get_document(name, revision=entry["revision"])
                assert hashlib.sha256(data).hexdigest() == entry["sha256"] == got["sha256"]
                assert len(data) == entry["bytes"]
                kept.append({"revision": entry["revision"], "sha256": entry["sha256"], "bytes": entry["bytes"],
                             "current": entry["current"]})
            current = [k for k in kept if k["current"]]
            assert len(current) == 1 and current[0]["revision"] == document["revision"], (document, kept)
            assert current[0]["sha256"] == document["sha256"]
            result[name] = {"current": document["revision"], "sha256": document["sha256"],
                            "pageCount": document["pageCount"], "revisions": kept}
        return result
    finally:
        server.stop()


def main() -> None:
    layout, binary = sys.argv[1], sys.argv[2]
    commit = {"whole-files": "7705f59", "records": "d059bcf"}[layout]
    archive = HERE / f"{layout}.tar"
    with tempfile.TemporaryDirectory(prefix="history-layouts.") as scratch:
        work = Path(scratch)
        documents = work / "folder" / "documents"
        documents.mkdir(parents=True)
        # The documents as a user would have them: a .pdf, a .yianazip, one nobody saves, and
        # for the records layout one saved in append mode.
        shutil.copyfile(CORPUS / "hello_world_rotated.pdf", documents / "a.pdf")
        (documents / "b.yianazip").write_bytes(METADATA + b"\xff\xff\xff\xff" + (CORPUS / "issue8125.pdf").read_bytes())
        shutil.copyfile(CORPUS / "issue8125.pdf", documents / "untouched.pdf")
        if layout == "records":
            shutil.copyfile(CORPUS / "issue19176.pdf", documents / "c.pdf")
        acks = Acks()
        (make_whole_files if layout == "whole-files" else make_records)(binary, work, documents, acks)
        command = ["tar", "--format=gnu", "--sort=name", "--owner=0", "--group=0", "--numeric-owner",
                   "-cf", str(archive), "-C", str(work / "folder"), "documents"]
        print("$", " ".join(command), flush=True)
        subprocess.run(command, check=True)
        # What the old canvasd lists, read from the archive (so from exactly what it holds),
        # extracted into a folder of its own.
        copy = work / "check"
        copy.mkdir()
        subprocess.run(["tar", "-xf", str(archive), "-C", str(copy)], check=True)
        # Which revisions are held only by the document's own inode (a hard link): an in-place
        # write over the document destroys them. (A document never saved has no history: its
        # one revision is the file.)
        shared = {}
        for name in os.listdir(copy / "documents"):
            if name.startswith("."):
                continue
            inode = (copy / "documents" / name).stat().st_ino
            shared[name] = {revision: (path, path.stat().st_ino == inode)
                            for revision, path in holders(layout, copy / "documents", name).items()}
        listed = listing(binary, work / "run-list", copy / "documents")
        for name, entry in listed.items():
            for revision in entry["revisions"]:
                if revision["revision"] in shared[name]:
                    path, shares = shared[name][revision["revision"]]
                    with open(path, "rb") as file:
                        assert hashlib.sha256(file.read(revision["bytes"])).hexdigest() == revision["sha256"], path
                assert revision["revision"] in shared[name] or entry["revisions"] == [revision], (name, revision)
                revision["sharesDocumentInode"] = shared[name].get(revision["revision"], (None, True))[1]
    # Every acknowledged revision still kept is listed with the acknowledged sha256.
    for name, saves in acks.saved.items():
        kept = {r["revision"]: r["sha256"] for r in listed[name]["revisions"]}
        for save in saves:
            assert kept.get(save["revision"], save["sha256"]) == save["sha256"], (name, save)
    manifest_path = HERE / "manifest.json"
    manifest = json.loads(manifest_path.read_text()) if manifest_path.exists() else {}
    manifest[archive.name] = {
        "layout": layout,
        "canvasd": commit,
        "documents": {name: {**entry, "acknowledged": acks.saved.get(name, [])} for name, entry in sorted(listed.items())},
    }
    manifest_path.write_text(json.dumps(dict(sorted(manifest.items())), indent=2) + "\n")
    print(f"{archive}: {archive.stat().st_size} bytes")


if __name__ == "__main__":
    main()
