"""Nothing lost: canvasd killed with SIGKILL at random moments during saves.

After every kill the server is started again on the same folder, and every document must be
readable (qpdf --check as clean as the original) at its old or its new revision, with no
revision the server acknowledged missing. DURABILITY_SAVES scales the run (default 200).
"""

from __future__ import annotations

import json
import os
import random
import shutil
import signal
import subprocess
import time
from pathlib import Path

import pytest
import zmq

from conftest import CORPUS, Server

# One file that takes appended updates, one that qpdf reads only after repair, which is written
# whole, and a .yianazip container (metadata rewritten ahead of the PDF on every save).
DOCUMENTS = ["labelled_pages.pdf", "basicapi.pdf", "box.yianazip"]
METADATA = {"title": "box", "created": 0, "modified": 0, "page_count": 3, "tags": ["x"], "ocr_completed": False,
            "full_text": "", "kept": {"unknown": True}}


def qpdf_check(path: Path) -> int:
    return subprocess.run(["qpdf", "--check", str(path)], capture_output=True).returncode


@pytest.mark.parametrize("mode", ["replace", "append"])
def test_sigkill_during_saves_loses_nothing(tmp_path, mode):
    """In both save modes: a new file renamed over the document, or the update appended in place
    (where a kill leaves a tail past the last committed revision, cut by the next holder of the
    document's lock)."""
    saves = int(os.environ.get("DURABILITY_SAVES", "200"))
    rng = random.Random(os.environ.get("DURABILITY_SEED", "7"))
    documents = tmp_path / "server" / "documents"
    documents.mkdir(parents=True)
    for name in DOCUMENTS[:2]:
        shutil.copy(CORPUS / name, documents / name)
    (documents / "box.yianazip").write_bytes(json.dumps(METADATA).encode() + b"\xff\xff\xff\xff"
                                             + (CORPUS / "labelled_pages.pdf").read_bytes())
    baseline = {name: qpdf_check(CORPUS / name) for name in DOCUMENTS[:2]}
    baseline["box.yianazip"] = baseline["labelled_pages.pdf"]
    acknowledged = {name: 1 for name in DOCUMENTS}

    arguments = ["--log-level", "error", "--save-mode", mode]
    server = Server(tmp_path / "server", arguments)
    context = zmq.Context.instance()
    killed_mid_save = 0
    try:
        for attempt in range(saves):
            name = rng.choice(DOCUMENTS)
            socket = context.socket(zmq.DEALER)
            socket.setsockopt(zmq.LINGER, 0)
            socket.connect(server.endpoint)
            stroke = {"tool": "pen", "color": "red", "width": 3,
                      "points": [{"x": rng.uniform(20, 500), "y": rng.uniform(20, 700)}]}
            page = rng.randrange(0, 3)
            if rng.random() < 0.5:
                request = {"id": attempt, "method": "document.flatten", "params": {
                    "name": name, "page": page, "drawing": {"strokes": [stroke], "texts": []}}}
            else:
                # The same save through a canvas: opened on the page, drawn on, submitted.
                with server.client(timeout=5) as setup:
                    session = setup.open_session()
                    session.open(document=name, page=page)
                    session.call("drawing.addStroke", stroke)
                request = {"id": attempt, "method": "canvas.submit", "session": session.id}
            socket.send(json.dumps(request).encode())
            # Kill at a random moment: before, during or after the save.
            deadline = time.monotonic() + rng.uniform(0, 0.02)
            reply = None
            while time.monotonic() < deadline and reply is None:
                if socket.poll(1):
                    reply = json.loads(socket.recv())
            server.process.send_signal(signal.SIGKILL)
            server.process.wait()
            if reply is None and socket.poll(0):
                reply = json.loads(socket.recv())
            socket.close(0)
            if reply is not None:
                assert "result" in reply, reply
                result = reply["result"]
                acknowledged[name] = result["document"]["revision"] if "document" in result else result["revision"]
            else:
                killed_mid_save += 1

            server = Server(tmp_path / "server", arguments)
            with server.client(timeout=5) as client:
                for document in DOCUMENTS:
                    info = client.call("document.info", {"name": document})
                    # The acknowledged revision, or one the kill interrupted after it was written.
                    assert info["revision"] in (acknowledged[document], acknowledged[document] + 1), \
                        f"{document}: revision {info['revision']}, acknowledged {acknowledged[document]}"
                    acknowledged[document] = info["revision"]
                    if document.endswith(".yianazip"):
                        data = (documents / document).read_bytes()
                        split = data.index(b"\xff\xff\xff\xff")
                        assert json.loads(data[:split])["kept"] == {"unknown": True}
                        (tmp_path / "inner.pdf").write_bytes(data[split + 4:])
                        assert qpdf_check(tmp_path / "inner.pdf") in (0, baseline[document]), f"{document} is damaged"
                    else:
                        assert qpdf_check(documents / document) in (0, baseline[document]), f"{document} is damaged"
                    revisions = [r["revision"] for r in client.call("document.revisions", {"name": document})["revisions"]]
                    assert revisions[-1] == info["revision"] and revisions[0] == 1
                    # The current revision's bytes hash to what info says (get_document checks).
                    data, first = client.get_document(document)
                    assert first["sha256"] == info["sha256"] and first["revision"] == info["revision"]
        with server.client(timeout=10) as client:
            for document in DOCUMENTS:
                for entry in client.call("document.revisions", {"name": document})["revisions"]:
                    data, first = client.get_document(document, revision=entry["revision"])
                    assert first["sha256"] == entry["sha256"], f"{document} revision {entry['revision']}"
        assert not list((documents / ".canvas-revisions").rglob(".tmp.*")), "a half-written save was left behind"
    finally:
        server.stop()
    print(f"\ndurability ({mode}): {saves} saves, {killed_mid_save} killed before their reply; "
          f"final revisions {acknowledged}")
