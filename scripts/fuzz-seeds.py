#!/usr/bin/env python3
"""Writes the seed corpora of the libFuzzer targets (see `make fuzz`).

request:  every case of protocol/vectors, one input per case, in RequestTarget's format
          (requests on lines, frames split by 0x1F, "$session" for the case's session).
drawing:  every drawing edit and drawing the vectors send, in DrawingTarget's format.
yianazip: every PDF of Tests/Fixtures/pdfjs wrapped as a .yianazip, and a few broken containers.
delta:    pairs of byte strings in DeltaTarget's format (a PDF of the corpus and that PDF edited),
          and a log of deltas made by hand.
"""

import base64
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CORPUS = ROOT / "Tests" / "Fixtures" / "pdfjs"
EDIT_KINDS = {"drawing.addStroke": b"s", "drawing.addText": b"t", "drawing.erase": b"e", "drawing.moveText": b"m",
              "drawing.undo": b"u", "drawing.redo": b"r", "drawing.clear": b"c"}
METADATA = {"title": "seed", "created": 0, "modified": 0, "page_count": 1, "tags": ["a"],
            "ocr_completed": False, "full_text": "", "unknown": {"kept": True}}


def compact(value) -> bytes:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


def local_names(value):
    """Document names of the vectors point at the fuzz folder's own two documents."""
    if isinstance(value, dict):
        out = {}
        for key, item in value.items():
            if key in ("name", "document") and isinstance(item, str):
                item = "doc.yianazip" if item.endswith(".yianazip") else "doc.pdf"
            out[key] = local_names(item)
        return out
    if isinstance(value, list):
        return [local_names(item) for item in value]
    return value


def request_frames(step) -> bytes:
    if "send" in step:
        message = local_names(step["send"])
        if "pad" in step and isinstance(message, dict):
            message.setdefault("params", {})["padding"] = "x" * min(step["pad"]["bytes"], 70000)
        first = compact(message)
    elif "raw" in step:
        first = step["raw"].encode("utf-8")
    else:
        first = base64.b64decode(step["rawBase64"])
    return b"\x1f".join([first, *(base64.b64decode(frame) for frame in step.get("frames", []))])


def main(out: Path) -> None:
    for target in ("request", "drawing", "yianazip", "delta"):
        (out / target).mkdir(parents=True, exist_ok=True)
    count = {"request": 0, "drawing": 0, "yianazip": 0, "delta": 0}
    for vectors in sorted((ROOT / "protocol" / "vectors").glob("*.json")):
        for index, case in enumerate(json.loads(vectors.read_text())["cases"]):
            lines = []
            if "session" in case:
                lines.append(compact({"id": "open", "method": "session.open", "params": case["session"]}))
            edits = []
            for step in case["steps"]:
                lines.append(request_frames(step))
                send = step.get("send")
                if isinstance(send, dict) and send.get("method") in EDIT_KINDS:
                    edits.append(EDIT_KINDS[send["method"]] + compact(send.get("params", {})))
                if isinstance(send, dict) and isinstance(send.get("params"), dict) and "drawing" in send["params"]:
                    edits.append(b"d" + compact(send["params"]["drawing"]))
            (out / "request" / f"{vectors.stem}-{index:03}").write_bytes(b"\n".join(lines))
            count["request"] += 1
            if edits:
                (out / "drawing" / f"{vectors.stem}-{index:03}").write_bytes(b"\n".join(edits))
                count["drawing"] += 1
    separator = b"\xff\xff\xff\xff"
    for pdf in sorted(CORPUS.glob("*.pdf")):
        data = pdf.read_bytes()
        (out / "yianazip" / pdf.stem).write_bytes(compact(METADATA) + separator + data)
        count["yianazip"] += 1
    sample = (CORPUS / "labelled_pages.pdf").read_bytes()
    broken = {
        "no-separator": compact(METADATA) + sample,
        "metadata-not-object": b"[1,2]" + separator + sample,
        "metadata-invalid": b"{\"title\":" + separator + sample,
        "empty-pdf": compact(METADATA) + separator,
        "truncated-pdf": compact(METADATA) + separator + sample[: len(sample) // 2],
    }
    for name, data in broken.items():
        (out / "yianazip" / name).write_bytes(data)
        count["yianazip"] += 1
    # DeltaTarget: two bytes of length, the old bytes, then the new (also read as a log).
    for pdf in sorted(CORPUS.glob("*.pdf"))[:8]:
        old = pdf.read_bytes()[:20000]
        edited = old[: len(old) // 3] + b"a stroke's worth of new bytes" + old[len(old) // 3 + 40:]
        (out / "delta" / pdf.stem).write_bytes(len(old).to_bytes(2, "big") + old + edited)
        count["delta"] += 1
    for name in ("copy-and-insert", "two-entries"):
        (out / "delta" / name).write_bytes((ROOT / "Tests" / "FuzzRegressionTests" / "Inputs" / "delta" / name).read_bytes())
        count["delta"] += 1
    print("seeds: " + ", ".join(f"{target} {n}" for target, n in count.items()))


if __name__ == "__main__":
    main(Path(sys.argv[1]) if len(sys.argv) > 1 else ROOT / ".build-fuzz" / "seeds")
