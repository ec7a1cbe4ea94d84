"""protocol/history-log.md and its vectors (protocol/vectors/history-log/), against a real
canvasd: a reader written from the document (historylog.py) reproduces every vector's JSON, and
canvasd, given each vector's log as a document's history, concludes the same: the kept revisions
and the next number of a log that reads, a torn tail cut and nothing else, a refusal that
changes nothing. Forged records check the document's rules for what is a record."""

from __future__ import annotations

import copy
import datetime
import hashlib
import json
import re
import shutil
from pathlib import Path

import pytest

from canvasbridge import CanvasError
from conftest import ROOT, Server
from pdfs import tiny_pdf
import historylog

VECTORS = ROOT / "protocol" / "vectors" / "history-log"
SPEC = (ROOT / "protocol" / "history-log.md").read_text(encoding="utf-8")
DOC = "doc.pdf"
CASES = sorted(path.stem for path in VECTORS.glob("*.json"))


def vector(name: str) -> dict:
    return json.loads((VECTORS / f"{name}.json").read_text(encoding="utf-8"))


def test_there_are_vectors_of_every_kind_and_every_conclusion():
    kinds = {record["kind"] for name in CASES for record in vector(name).get("records", [])}
    assert kinds == set(historylog.KINDS)
    outcomes = {(vector(name)["outcome"], vector(name).get("tornTail")) for name in CASES}
    assert outcomes >= {("read", False), ("read", True), ("damaged", None), ("unknownVersion", None), ("notALog", None)}
    assert all((VECTORS / vector(name)["log"]).stat().st_size < 8192 for name in CASES)
    readme = (VECTORS / "README.md").read_text(encoding="utf-8")
    for name in CASES:
        assert f"`{name}.log`" in readme, name


@pytest.mark.parametrize("name", CASES)
def test_the_reader_reproduces_the_vector(name):
    import make_vectors
    expected = vector(name)
    log = (VECTORS / expected["log"]).read_bytes()
    assert (len(log), hashlib.sha256(log).hexdigest()) == (expected["bytes"], expected["sha256"])
    got = make_vectors.expected(log)
    assert got == {key: value for key, value in expected.items() if key not in ("log", "bytes", "sha256", "made", "damagedFrom")}


def served(tmp_path: Path, log: bytes) -> Server:
    """A canvasd whose folder holds `log` as the history of doc.pdf, a document deleted from it."""
    server = Server(tmp_path, ["--log-level", "error"])
    history = server.documents / ".canvas-revisions" / DOC
    history.mkdir(parents=True)
    (history / "history.log").write_bytes(log)
    return server


def listed_time(saved: int) -> str:
    return datetime.datetime.fromtimestamp(saved // 1000, datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


@pytest.mark.parametrize("name", [name for name in CASES if vector(name)["outcome"] == "read"])
def test_canvasd_keeps_what_the_vector_keeps_and_numbers_on_from_next(tmp_path, name):
    expected = vector(name)
    log = (VECTORS / expected["log"]).read_bytes()
    server = served(tmp_path, log)
    path = server.documents / ".canvas-revisions" / DOC / "history.log"
    try:
        with server.client(timeout=10) as client:
            revisions = client.call("document.revisions", {"name": DOC})["revisions"]
            assert revisions == [{"revision": kept["revision"], "bytes": kept["length"], "sha256": kept["sha256"],
                                  "current": False, "modified": listed_time(kept["saved"])}
                                 for kept in expected["state"]["kept"]]
            if not expected["tornTail"] and expected["state"]["pendingRename"] is None:
                assert path.read_bytes() == log, "a reader wrote to the log"
            # A document put back under the name is the history's next revision.
            (server.documents / DOC).write_bytes(tiny_pdf(3))
            info = client.call("document.info", {"name": DOC})
            assert (info["revision"], info["sha256"]) == (expected["state"]["next"], hashlib.sha256(tiny_pdf(3)).hexdigest())
    finally:
        server.stop()
    # The writer appended after the good records, the torn tail cut first: the log as it was up
    # to `end`, then well chained records.
    after = path.read_bytes()
    assert after[:expected["end"]] == log[:expected["end"]]
    reading = historylog.parse(after)
    assert reading["outcome"] == "read" and not reading["tornTail"]
    assert reading["records"][:len(expected["records"])] == expected["records"]
    assert historylog.state(reading["records"])["next"] == expected["state"]["next"] + 1


@pytest.mark.parametrize("name", [name for name in CASES if vector(name)["outcome"] != "read"])
def test_canvasd_refuses_what_the_vector_refuses_and_changes_nothing(tmp_path, name):
    expected = vector(name)
    log = (VECTORS / expected["log"]).read_bytes()
    server = served(tmp_path, log)
    words = {"damaged": f"damaged at byte {expected.get('at')}", "unknownVersion": f"of format {expected.get('version')}",
             "notALog": "not one (no header)"}[expected["outcome"]]
    try:
        with server.client(timeout=10) as client:
            calls = [lambda: client.call("document.revisions", {"name": DOC}),
                     lambda: client.call("document.restore", {"name": DOC, "revision": 1})]
            for call in calls:
                with pytest.raises(CanvasError) as refused:
                    call()
                assert (refused.value.code, refused.value.data["reason"]) == ("UNAVAILABLE", "damaged")
                assert words in refused.value.message, refused.value.message
            (server.documents / DOC).write_bytes(tiny_pdf(3))
            with pytest.raises(CanvasError) as refused:
                client.call("document.flatten", {"name": DOC, "page": 0, "drawing": {"strokes": []}})
            assert refused.value.data["reason"] == "damaged"
    finally:
        server.stop()
    assert (server.documents / ".canvas-revisions" / DOC / "history.log").read_bytes() == log


# Forged records, checksummed and chained as a writer would: what section 4 says is a record.

REPLACE = (VECTORS / "replace.log").read_bytes()


def payloads() -> list:
    return [json.loads(REPLACE[r["offset"] + 4:r["offset"] + 4 + r["length"]]) for r in vector("replace")["records"]]


def forged(records: list) -> bytes:
    out, chain = REPLACE[:28], REPLACE[20:28]
    for record in records:
        payload = record if isinstance(record, bytes) else json.dumps(record, separators=(",", ":"), sort_keys=True).encode()
        framed = historylog.frame(payload, chain)
        out, chain = out + framed, framed[-8:]
    return out


def change(index: int, how):
    def make() -> bytes:
        records = copy.deepcopy(payloads())
        replaced = how(records[index])
        if isinstance(replaced, (dict, bytes)):
            records[index] = replaced
        return forged(records)
    return make


FORGED = {
    # Read as records.
    "a key past the five in a snapshot": (change(0, lambda r: r["document"].update(extra=1)), True),
    "an optional field null": (change(2, lambda r: r.update(madeBy=None)), True),
    "a whole number written 438.0": (change(0, lambda r: json.dumps(r, separators=(",", ":"), sort_keys=True)
                                            .replace('"length":438', '"length":438.0').encode()), True),
    "state in upper case": (change(0, lambda r: r.update(state=r["state"].upper())), True),
    "a revision without source, document or lineFile": (change(0, lambda r: [r.pop(k) for k in ("source", "document", "lineFile")]), True),
    "an intent without line": (change(1, lambda r: {"kind": "intent", "revision": 2, "from": 438,
                                                   "document": payloads()[0]["document"]}), True),
    "an empty pruned": (change(1, lambda r: {"kind": "pruned", "revisions": []}), True),
    "base at 2^31": (change(1, lambda r: {"kind": "base", "next": 2 ** 31}), True),
    # No records.
    "a field version 1 does not have": (change(0, lambda r: r.update(note="x")), False),
    "a kind version 1 does not have": (change(1, lambda r: r.update(kind="checkpoint")), False),
    "a revision of 1.5": (change(0, lambda r: r.update(revision=1.5)), False),
    "a revision of 2^31": (change(0, lambda r: r.update(revision=2 ** 31)), False),
    "a line past its revision": (change(0, lambda r: r.update(line=2)), False),
    "a length of 0": (change(0, lambda r: r.update(length=0)), False),
    "sha256 in upper case": (change(0, lambda r: r.update(sha256=r["sha256"].upper())), False),
    "a revision without saved": (change(0, lambda r: r.pop("saved")), False),
    "saved as a string": (change(0, lambda r: r.update(saved=str(r["saved"]))), False),
    "a madeBy with a dash": (change(2, lambda r: r.update(madeBy="ab-cd")), False),
    "a temporary that is a number": (change(2, lambda r: r.update(temporary=5)), False),
    "revision 1 pruned": (change(1, lambda r: {"kind": "pruned", "revisions": [1]}), False),
    "base past 2^31": (change(1, lambda r: {"kind": "base", "next": 2 ** 31 + 1}), False),
    "an identity without document": (change(3, lambda r: r.pop("document")), False),
    "a snapshot without its change time": (change(0, lambda r: r["document"].pop("changed")), False),
    "a snapshot of device -1": (change(0, lambda r: r["document"].update(device=-1)), False),
    "a revision that is true": (change(0, lambda r: r.update(revision=True)), False),
    "a payload that is no JSON": (change(1, lambda r: b"{kind: extending}"), False),
}


@pytest.mark.parametrize("what", list(FORGED))
def test_a_forged_record_is_read_as_section_4_says(tmp_path, what):
    make, is_record = FORGED[what]
    log = make()
    reading = historylog.parse(log)
    assert (reading["outcome"] == "read") == is_record, reading
    server = served(tmp_path, log)
    try:
        with server.client(timeout=10) as client:
            if is_record:
                revisions = client.call("document.revisions", {"name": DOC})["revisions"]
                assert [r["revision"] for r in revisions] == [k["revision"] for k in historylog.state(reading["records"])["kept"]]
            else:
                with pytest.raises(CanvasError) as refused:
                    client.call("document.revisions", {"name": DOC})
                assert refused.value.data["reason"] == "damaged"
                assert f"damaged at byte {reading['at']}" in refused.value.message
    finally:
        server.stop()


def table(title: str) -> list:
    """The first column of the table under a heading of history-log.md, without backquotes."""
    text = SPEC.split(title, 1)[1]
    rows = [line for line in text.split("\n\n", 2)[1].splitlines() if line.startswith("| `")]
    return [re.match(r"\| `([^`]+)`", row).group(1) for row in rows]


def test_the_document_names_every_kind_field_and_limit():
    assert table("### Kinds") == list(historylog.KINDS)
    assert set(table("### Fields")) == historylog.FIELDS
    for field in historylog.SNAPSHOT_FIELDS:
        assert f"`{field}`" in SPEC.split("A **snapshot**", 1)[1].split("\n\n", 1)[0]
    for limit in ("1,048,576", "67,108,864", "65,536", "2,147,483,647", "512"):
        assert limit in SPEC, limit
    assert " ".join(f"{b:02X}" for b in historylog.MAGIC) in SPEC
    # The kind the code's comment left out, and what a reader does with a version it does not know.
    assert "| `extending` | `revision`, `line`, `from` |" in SPEC
    versioning = SPEC.split("## 9. Versioning", 1)[1]
    assert "must read a\n  version-1 log" in versioning and "refused whole" in versioning


def test_the_vectors_are_made_by_the_script_the_readme_names():
    readme = (VECTORS / "README.md").read_text(encoding="utf-8")
    assert "make_vectors.py" in readme and (VECTORS / "make_vectors.py").exists()
    # Every damaged copy says what it was made from, and the README's table has it.
    for name in CASES:
        if "damagedFrom" in vector(name):
            assert (VECTORS / vector(name)["damagedFrom"]).exists()


@pytest.fixture(autouse=True, scope="module")
def _make_vectors_importable():
    import sys
    sys.path.insert(0, str(VECTORS))
    yield
    sys.path.remove(str(VECTORS))
