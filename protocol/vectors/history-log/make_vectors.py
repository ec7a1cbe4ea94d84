#!/usr/bin/env python3
"""Makes the history-log vectors in this folder (see README.md): real version-1 logs written by
canvasd, damaged copies of one of them, and for each the JSON of what a reader concludes.

    CANVASD=/path/to/a/debug/canvasd .venv/bin/python protocol/vectors/history-log/make_vectors.py
    .venv/bin/python protocol/vectors/history-log/make_vectors.py --json-only   # the JSON again, same logs

A debug build is needed: two of the logs are left by a canvasd that kills itself mid-save
(CANVAS_FAULT_POINT, compiled into debug builds only). Running it again makes new logs: the
records are the same kinds with the same numbers and hashes, but times, inodes and salts differ.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import struct
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Dict, List

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[2]
sys.path.insert(0, str(ROOT / "clients" / "python"))
sys.path.insert(0, str(ROOT / "clients" / "python" / "tests"))

from canvasbridge import CanvasTimeout  # noqa: E402
from conftest import Server  # noqa: E402
from pdfs import tiny_pdf  # noqa: E402
import historylog  # noqa: E402

DOC = "doc.pdf"


def drawing(x: float) -> Dict:
    return {"strokes": [{"tool": "pen", "color": "blue", "width": 2, "points": [{"x": x, "y": 100}, {"x": x + 30, "y": 140}]}],
            "texts": []}


def start(work: Path, label: str, documents: Path, arguments: List[str], fault: str = "") -> Server:
    if fault:
        os.environ["CANVAS_FAULT_POINT"] = fault
    try:
        return Server(work / label, ["--log-level", "error", *arguments], documents=documents)
    finally:
        os.environ.pop("CANVAS_FAULT_POINT", None)


def flatten(server: Server, x: float) -> Dict:
    with server.client(timeout=10) as client:
        return client.call("document.flatten", {"name": DOC, "page": 0, "drawing": drawing(x)})


def killed(work: Path, documents: Path, arguments: List[str], fault: str, x: float) -> None:
    """A flatten sent to a canvasd that kills itself (SIGKILL) at `fault`."""
    doomed = start(work, "doomed-" + fault, documents, arguments, fault)
    with doomed.client(timeout=3, retries=0) as client:
        try:
            client.request({"id": 1, "method": "document.flatten", "params": {"name": DOC, "page": 0, "drawing": drawing(x)}})
        except CanvasTimeout:
            pass
    deadline = time.monotonic() + 10
    while doomed.process.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    assert doomed.process.returncode == -9, f"canvasd did not die at {fault}"


def log_of(documents: Path, name: str = DOC) -> bytes:
    return (documents / ".canvas-revisions" / name / "history.log").read_bytes()


def replace(work: Path) -> bytes:
    """Saves by replace (the default): the original kept at the first save, two flattens, a
    restore of revision 1."""
    documents = work / "documents"
    documents.mkdir(parents=True)
    (documents / DOC).write_bytes(tiny_pdf(1))
    server = start(work, "run", documents, [])
    try:
        flatten(server, 40)
        flatten(server, 80)
        with server.client(timeout=10) as client:
            client.call("document.restore", {"name": DOC, "revision": 1})
    finally:
        server.stop()
    return log_of(documents)


def append(work: Path) -> bytes:
    """Saves by append (--save-mode append): two flattens, a third killed after its intent was
    made durable (appendIntended), then a new canvasd that settles it (a read) and saves again."""
    documents = work / "documents"
    documents.mkdir(parents=True)
    (documents / DOC).write_bytes(tiny_pdf(1))
    arguments = ["--save-mode", "append"]
    server = start(work, "run", documents, arguments)
    flatten(server, 40)
    flatten(server, 80)
    server.stop()
    killed(work, documents, arguments, "appendIntended", 120)
    server = start(work, "again", documents, arguments)
    try:
        with server.client(timeout=10) as client:
            client.call("document.revisions", {"name": DOC})
        flatten(server, 160)
    finally:
        server.stop()
    return log_of(documents)


def pending(work: Path) -> bytes:
    """A replacing save killed right after its commit record was made durable (saveCommitted),
    before its rename: the log as that kill leaves it, before anyone settles it."""
    documents = work / "documents"
    documents.mkdir(parents=True)
    (documents / DOC).write_bytes(tiny_pdf(1))
    server = start(work, "run", documents, [])
    flatten(server, 40)
    server.stop()
    killed(work, documents, [], "saveCommitted", 80)
    return log_of(documents)


def outside(work: Path) -> bytes:
    """--keep-revisions 2: a flatten, another program's write (a new file renamed over the
    document), read as the next revision, then a flatten that prunes."""
    documents = work / "documents"
    documents.mkdir(parents=True)
    (documents / DOC).write_bytes(tiny_pdf(1))
    arguments = ["--keep-revisions", "2"]
    server = start(work, "run", documents, arguments)
    try:
        flatten(server, 40)
        (documents / "other.tmp").write_bytes(tiny_pdf(2))
        os.rename(documents / "other.tmp", documents / DOC)
        with server.client(timeout=10) as client:
            client.call("document.info", {"name": DOC})
        flatten(server, 80)
    finally:
        server.stop()
    return log_of(documents)


def compacted(work: Path) -> bytes:
    """--keep-revisions 2: saves until the log is written again smaller (compaction), then one
    more save."""
    documents = work / "documents"
    documents.mkdir(parents=True)
    (documents / DOC).write_bytes(tiny_pdf(1))
    server = start(work, "run", documents, ["--keep-revisions", "2"])
    try:
        for index in range(400):
            flatten(server, 20 + index % 400)
            records = historylog.parse(log_of(documents))["records"]
            if records[0]["kind"] == "base" and len(records) > 5:
                break
        else:
            raise AssertionError("never compacted")
    finally:
        server.stop()
    return log_of(documents)


def migrated(work: Path) -> bytes:
    """Tests/Fixtures/history-layouts/records.tar (canvasd d059bcf's layout) served by this
    canvasd: `a.pdf`'s history migrated to a log at its first read."""
    work.mkdir(parents=True)
    subprocess.run(["tar", "-xf", str(ROOT / "Tests" / "Fixtures" / "history-layouts" / "records.tar"), "-C", str(work)], check=True)
    documents = work / "documents"
    server = start(work, "run", documents, [])
    try:
        with server.client(timeout=10) as client:
            client.call("document.revisions", {"name": "a.pdf"})
    finally:
        server.stop()
    return log_of(documents, "a.pdf")


SCENARIOS = {
    "replace": (replace, "canvasd, --save-mode replace (the default): tiny one-page PDF; document.flatten twice "
                         "(sessionless: each leaves its madeBy key), then document.restore of revision 1"),
    "append": (append, "canvasd --save-mode append: document.flatten twice; a third killed with SIGKILL once its "
                       "intent was durable (CANVAS_FAULT_POINT=appendIntended); a new canvasd reads the document "
                       "(settling the killed save) and flattens once more"),
    "pending": (pending, "canvasd, replace: document.flatten once; a second killed with SIGKILL right after its "
                         "commit record was durable, before its rename (CANVAS_FAULT_POINT=saveCommitted); the log "
                         "as the kill left it"),
    "outside": (outside, "canvasd --keep-revisions 2: document.flatten; another program renames a new file over the "
                         "document; document.info (which keeps it as a revision); document.flatten (which prunes)"),
    "compacted": (compacted, "canvasd --keep-revisions 2: document.flatten until the log is written again smaller, "
                             "then stopped"),
    "migrated": (migrated, "Tests/Fixtures/history-layouts/records.tar (canvasd d059bcf's layout) served by this "
                           "canvasd: a.pdf's history migrated to a log by document.revisions"),
}


def damaged(source: bytes) -> Dict[str, tuple]:
    """Copies of a good log damaged as crashes, disks and people damage them."""
    frames = historylog.parse(source)["records"]
    last, middle = frames[-1], frames[1]
    variants = {}
    # A write cut short: in the last record's payload; and a length with no record after it.
    variants["torn-payload"] = (source[:last["offset"] + 4 + last["length"] // 2],
                                "the file cut in the middle of the last record's payload (a write cut short)")
    variants["torn-length"] = (source + struct.pack("<I", 200)[:3],
                               "3 bytes appended: the start of a length with no record after it (a write cut short)")
    flipped = bytearray(source)
    flipped[last["offset"] + 4 + last["length"]] ^= 0x01
    variants["flipped-last-checksum"] = (bytes(flipped), "one bit of the last record's checksum flipped")
    flipped = bytearray(source)
    flipped[middle["offset"] + 4 + middle["length"] + 3] ^= 0x80
    variants["flipped-middle-checksum"] = (bytes(flipped), "one bit of the second record's checksum flipped: "
                                                            "damage with more records after it")
    # A record a writer of another version could write: well chained, with a field version 1
    # does not have.
    fields = json.loads(source[last["offset"] + 4:last["offset"] + 4 + last["length"]])
    fields["note"] = "not a field of version 1"
    payload = json.dumps(fields, sort_keys=True, separators=(",", ":")).encode()
    variants["unknown-field-last"] = (source + historylog.frame(payload, source[-8:]),
                                      "a record appended, checksummed and chained as a writer would, with a field "
                                      "(`note`) that version 1 does not have")
    variants["version-2"] = (historylog.header(2, source[12:20]) + source[28:],
                             "the header's version set to 2 (its checksum made again): a log of a version this "
                             "reader does not know")
    flipped = bytearray(source)
    flipped[25] ^= 0x10
    variants["bad-header"] = (bytes(flipped), "one bit of the header's checksum flipped")
    return variants


def conclusion(reading: Dict) -> str:
    """What a reader, and the next writer, must do with a log that reads so (history-log.md 5)."""
    outcome = reading["outcome"]
    if outcome == "read" and not reading["tornTail"]:
        return "the history is `state`, from every record of the file"
    if outcome == "read":
        return (f"a torn tail: the history is `state`, from the records before byte {reading['end']}; readers ignore "
                f"the bytes from there, and the next writer cuts the file to {reading['end']} bytes before it appends")
    refusal = {"damaged": f"a record at byte {reading.get('at')} is bad with more of the log after it",
               "unknownVersion": f"version {reading.get('version')} is not one this reader knows",
               "notALog": "no header: the magic or the header's checksum is wrong",
               "tooLarge": "the file is larger than 64 MiB"}[outcome]
    return (f"refused ({refusal}): the document's history is damaged for every request (canvasd: UNAVAILABLE "
            f"damaged), no record is taken, and nothing writes, cuts or rewrites the log")


def expected(log: bytes) -> Dict:
    reading = historylog.parse(log)
    result = dict(reading)
    result["conclusion"] = conclusion(reading)
    if reading["outcome"] == "read":
        result["state"] = state = historylog.state(reading["records"])
        if state["pendingRename"] is not None:
            result["conclusion"] += (f"; revision {state['pendingRename']} is committed, its rename over the document "
                                     f"not known to have happened: the next holder of the lock settles it (7.8)")
        if state["intent"] is not None or state["extending"] is not None:
            result["conclusion"] += "; a save announced by an intent or extending has not committed: the next holder of the lock settles it (7.8)"
    return result


def write(name: str, log: bytes, made: str, **extra) -> None:
    (HERE / f"{name}.log").write_bytes(log)
    body = {"log": f"{name}.log", "bytes": len(log), "sha256": hashlib.sha256(log).hexdigest(), "made": made, **extra}
    body.update(expected(log))
    (HERE / f"{name}.json").write_text(json.dumps(body, indent=1, sort_keys=False) + "\n", encoding="utf-8")


def rewrite_json() -> None:
    """The JSON of every log here made again from the log as it is (after the reader changed)."""
    for path in sorted(HERE.glob("*.json")):
        old = json.loads(path.read_text(encoding="utf-8"))
        extra = {"damagedFrom": old["damagedFrom"]} if "damagedFrom" in old else {}
        write(path.stem, (HERE / old["log"]).read_bytes(), old["made"], **extra)


def main() -> None:
    if sys.argv[1:] == ["--json-only"]:
        rewrite_json()
        return
    if "CANVASD" not in os.environ:
        sys.exit("set CANVASD to a debug canvasd")
    for old in HERE.glob("*.log"):
        old.unlink()
    for old in HERE.glob("*.json"):
        old.unlink()
    with tempfile.TemporaryDirectory() as scratch:
        logs = {}
        for name, (make, made) in SCENARIOS.items():
            logs[name] = make(Path(scratch) / name)
            write(name, logs[name], made)
        for name, (log, damage) in damaged(logs["replace"]).items():
            write(name, log, f"replace.log, damaged: {damage}", damagedFrom="replace.log")
    for path in sorted(HERE.glob("*.log")):
        print(f"{path.name}: {path.stat().st_size} bytes, {expected(path.read_bytes())['outcome']}")


if __name__ == "__main__":
    main()
