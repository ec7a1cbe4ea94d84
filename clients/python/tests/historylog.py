"""A reader of a document's history log, version 1, written from protocol/history-log.md alone:
the header, the framed and chained records, what each kind must carry, where a reader stops,
and the state the records come to. The vectors in protocol/vectors/history-log/ are its
expected output, and canvasd's own reading of the same files is checked against it
(test_history_log_vectors.py)."""

from __future__ import annotations

import hashlib
import json
import struct
from decimal import Decimal
from typing import Any, Dict, List, Optional

MAGIC = bytes([0x89, 0x43, 0x42, 0x48, 0x0D, 0x0A, 0x1A, 0x0A])
VERSION = 1
HEADER_BYTES = 28
CHECKSUM_BYTES = 8
MAX_RECORD_BYTES = 1 << 20
MAX_LOG_BYTES = 64 << 20
MAX_TORN_BYTES = 64 << 10
MAX_NUMBER = (1 << 53) - 1
MAX_REVISION = (1 << 31) - 1
COMPACTION_RECORDS = 512

KINDS = ("revision", "intent", "extending", "identity", "abandoned", "pruned", "seal", "base")
FIELDS = {"kind", "revision", "line", "length", "sha256", "state", "saved", "source", "document", "lineFile",
          "temporary", "madeBy", "pageCount", "from", "revisions", "next"}
SNAPSHOT_FIELDS = ("changed", "device", "inode", "modified", "size")


def checksum(data: bytes) -> bytes:
    """The first 8 bytes of SHA-256."""
    return hashlib.sha256(data).digest()[:CHECKSUM_BYTES]


def header(version: int, salt: bytes) -> bytes:
    """A header of `version` with `salt`, checksummed."""
    head = MAGIC + struct.pack("<I", version) + salt
    return head + checksum(head)


def frame(payload: bytes, chain: bytes) -> bytes:
    """One record framed after the checksum `chain` (the header's, or the record before's)."""
    length = struct.pack("<I", len(payload))
    return length + payload + checksum(chain + length + payload)


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _bounded(value: Any) -> bool:
    """A revision or line number: 1 to 2^31 - 1."""
    return _is_int(value) and 0 < value <= MAX_REVISION


def _hex(value: Any, digits: int) -> bool:
    return isinstance(value, str) and len(value) == digits and all(c in "0123456789abcdefABCDEF" for c in value)


def _snapshot(value: Any) -> bool:
    return (isinstance(value, dict) and all(_is_int(value.get(key)) for key in SNAPSHOT_FIELDS)
            and value["device"] >= 0 and value["inode"] >= 0)


def well_formed(record: Any) -> bool:
    """Whether a payload is a version-1 record: a JSON object of known fields whose kind has
    what it needs (protocol/history-log.md, "Records")."""
    if not isinstance(record, dict) or not set(record) <= FIELDS or record.get("kind") not in KINDS:
        return False
    # Optional fields: null is the same as absent; present, each has its type.
    present = {key: value for key, value in record.items() if value is not None}
    for key in ("revision", "line", "pageCount", "next"):
        if key in present and not _is_int(present[key]):
            return False
    for key in ("length", "saved", "from"):
        if key in present and not _is_int(present[key]):
            return False
    for key in ("sha256", "state", "source", "temporary", "madeBy"):
        if key in present and not isinstance(present[key], str):
            return False
    for key in ("document", "lineFile"):
        if key in present and not _snapshot(present[key]):
            return False
    if "revisions" in present and not (isinstance(present["revisions"], list) and all(_is_int(n) for n in present["revisions"])):
        return False
    kind = record["kind"]
    get = present.get
    if kind == "revision":
        revision, line, length = get("revision"), get("line"), get("length")
        if not (_bounded(revision) and _is_int(line) and 0 < line <= revision and _is_int(length) and 0 < length <= MAX_NUMBER):
            return False
        sha256 = get("sha256")
        if not (isinstance(sha256, str) and len(sha256) == 64 and all(c in "0123456789abcdef" for c in sha256)):
            return False
        if not _hex(get("state"), 64) or "saved" not in present:
            return False
        made_by = get("madeBy")
        return made_by is None or (0 < len(made_by) <= 64 and made_by.isascii() and made_by.isalnum())
    if kind == "intent":
        return (_bounded(get("revision")) and _is_int(get("from")) and 0 <= get("from") <= MAX_NUMBER
                and "document" in present and ("line" not in present or _bounded(get("line"))))
    if kind == "extending":
        return _bounded(get("revision")) and _bounded(get("line")) and _is_int(get("from")) and 0 <= get("from") <= MAX_NUMBER
    if kind == "identity":
        return _bounded(get("revision")) and "document" in present
    if kind == "abandoned":
        return _bounded(get("revision"))
    if kind == "pruned":
        return "revisions" in present and all(1 < n <= MAX_REVISION for n in get("revisions"))
    if kind == "seal":
        return _bounded(get("line"))
    if kind == "base":
        return _is_int(get("next")) and 0 < get("next") <= MAX_REVISION + 1
    return False


def _whole(value: Any) -> Any:
    """Numbers as the record means them: one written with a fraction or an exponent that is a
    whole number (`438.0`, `4.38e2`) is that integer; any other stays a non-integer."""
    if isinstance(value, Decimal):
        return int(value) if value == value.to_integral_value() else value
    if isinstance(value, dict):
        return {key: _whole(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_whole(item) for item in value]
    return value


def payload_record(payload: bytes) -> Any:
    """The JSON object of a payload (numbers exact), or None when it is no JSON."""
    try:
        return _whole(json.loads(payload.decode("utf-8"), parse_float=Decimal))
    except (UnicodeDecodeError, ValueError):
        return None


def parse(data: bytes) -> Dict[str, Any]:
    """What a reader concludes from a whole log's bytes: {"outcome": "read", "records": [...],
    "end", "tornTail"} (each record {"offset", "length", "kind", "fields"}), or a refusal:
    {"outcome": "notALog" | "unknownVersion" (with "version") | "damaged" (with "at") |
    "tooLarge"}."""
    if len(data) > MAX_LOG_BYTES:
        return {"outcome": "tooLarge", "size": len(data)}
    if len(data) < HEADER_BYTES or data[:8] != MAGIC or data[20:28] != checksum(data[:20]):
        return {"outcome": "notALog"}
    (version,) = struct.unpack_from("<I", data, 8)
    if version != VERSION:
        return {"outcome": "unknownVersion", "version": version}
    chain = data[20:28]
    offset = HEADER_BYTES
    records: List[Dict[str, Any]] = []
    torn = False
    while offset < len(data):
        rest = len(data) - offset
        if rest < 4:
            torn = True
            break
        (length,) = struct.unpack_from("<I", data, offset)
        end = offset + 4 + length + CHECKSUM_BYTES
        if length > MAX_RECORD_BYTES or end > len(data):
            if rest > MAX_TORN_BYTES:
                return {"outcome": "damaged", "at": offset}
            torn = True
            break
        payload = data[offset + 4:offset + 4 + length]
        sum_ = checksum(chain + data[offset:offset + 4] + payload)
        record = payload_record(payload)
        if data[offset + 4 + length:end] != sum_ or not well_formed(record):
            if end != len(data):
                return {"outcome": "damaged", "at": offset}
            torn = True
            break
        records.append({"offset": offset, "length": length, "kind": record["kind"],
                        "fields": {k: v for k, v in record.items() if k != "kind" and v is not None}})
        chain = sum_
        offset = end
    return {"outcome": "read", "version": version, "salt": data[12:20].hex(), "records": records,
            "end": offset, "tornTail": torn}


def state(records: List[Dict[str, Any]]) -> Dict[str, Any]:
    """The history the records come to, applied in order (protocol/history-log.md, "State")."""
    revisions: Dict[int, Dict[str, Any]] = {}
    next_ = 1
    current: Optional[Dict[str, Any]] = None
    intent = extending = pending = None
    lines: Dict[int, Optional[Dict[str, Any]]] = {}
    written: Dict[int, int] = {}
    for entry in records:
        kind, f = entry["kind"], entry["fields"]
        if kind == "revision":
            number, line = f["revision"], f["line"]
            revisions[number] = f
            next_ = max(next_, number + 1)
            intent = extending = None
            if "lineFile" in f:
                lines[line] = f["lineFile"]
            written[line] = max(written.get(line, 0), f["length"], f.get("lineFile", {}).get("size", 0))
            if "temporary" in f:
                pending = number
            else:
                pending = None
                if "document" in f:
                    current = {"revision": number, "document": f["document"]}
        elif kind == "intent":
            intent = f
        elif kind == "extending":
            extending = f
        elif kind == "identity":
            current = {"revision": f["revision"], "document": f["document"]}
            if pending == f["revision"]:
                pending = None
            intent = None
        elif kind == "abandoned":
            number = f["revision"]
            revisions.pop(number, None)
            if pending == number:
                pending = None
            if intent and intent["revision"] == number:
                intent = None
            if extending and extending["revision"] == number:
                extending = None
        elif kind == "pruned":
            for number in f["revisions"]:
                revisions.pop(number, None)
        elif kind == "seal":
            if "lineFile" in f:
                lines[f["line"]] = f["lineFile"]
            else:
                lines.pop(f["line"], None)   # the line's file removed
            written[f["line"]] = max(written.get(f["line"], 0), (f.get("lineFile") or {}).get("size", 0))
        elif kind == "base":
            next_ = max(next_, f["next"])
    kept = [{"revision": n, "line": revisions[n]["line"], "length": revisions[n]["length"], "sha256": revisions[n]["sha256"],
             "saved": revisions[n]["saved"], "source": revisions[n].get("source")} for n in sorted(revisions)]
    return {
        "next": next_,
        "kept": kept,
        "current": current,
        "pendingRename": pending,
        "intent": intent["revision"] if intent else None,
        "extending": extending["revision"] if extending else None,
        "lines": {str(line): snapshot for line, snapshot in sorted(lines.items())},
        "written": {str(line): size for line, size in sorted(written.items())},
        "records": len(records),
    }
