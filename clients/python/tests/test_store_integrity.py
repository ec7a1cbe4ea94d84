"""The document store under everything at once: two canvasd processes on one folder (one keeping
two revisions, one the default), writers, readers, restores and pruning on a .pdf and a
.yianazip, and random SIGKILLs with restarts.

Afterwards no revision number was acknowledged twice, each thread's acknowledged numbers
grew, no number was ever seen with two different contents, every kept revision is a readable
PDF with the bytes that were acknowledged, and revision 1 is the original.
STORE_STRESS_SECONDS sets how long the mix runs (default 12).
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import signal
import subprocess
import threading
import time
from pathlib import Path
from typing import Dict, List, Tuple

import pytest

from canvasbridge import CanvasClient, CanvasError, CanvasTimeout
from conftest import Server
from pdfs import tiny_pdf


METADATA = b'{"title": "box", "created": 0, "modified": 0, "page_count": 2, "tags": [], "ocr_completed": false, ' \
           b'"full_text": "", "big": 123456789012345678901234567890}'
DOCUMENTS = {"a.pdf": tiny_pdf(2), "b.yianazip": METADATA + b"\xff\xff\xff\xff" + tiny_pdf(2)}


def pdf_part(data: bytes) -> bytes:
    return data[data.index(b"\xff\xff\xff\xff") + 4:] if data[:1] == b"{" else data


class Mix:
    """What the threads saw: acknowledged saves, and every (revision, sha256) anyone reported."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.acknowledged: Dict[str, List[Tuple[int, str]]] = {name: [] for name in DOCUMENTS}
        self.per_thread: Dict[str, List[int]] = {}
        self.seen: Dict[Tuple[str, int], set] = {}
        self.errors: List[str] = []

    def saw(self, name: str, revision: int, sha256: str, source: str = "") -> None:
        with self.lock:
            self.seen.setdefault((name, revision), set()).add(sha256)
            if os.environ.get("STORE_STRESS_TRACE"):
                print("SEEN", name, revision, sha256[:8], source, time.monotonic())


@pytest.mark.parametrize("first_mode", ["replace", "append"])
def test_two_servers_readers_writers_kills(tmp_path, first_mode):
    """With `append`, the first server appends its saves in place while the second replaces the
    file: both modes on one document at once, killed at any moment."""
    seconds = float(os.environ.get("STORE_STRESS_SECONDS", "12"))
    rng = random.Random(os.environ.get("STORE_STRESS_SEED", "11"))
    documents = tmp_path / "documents"
    documents.mkdir()
    for name, data in DOCUMENTS.items():
        (documents / name).write_bytes(data)
    originals = {name: hashlib.sha256(data).hexdigest() for name, data in DOCUMENTS.items()}
    settings = [["--keep-revisions", "2", "--save-mode", first_mode], []]
    servers = [Server(tmp_path / f"s{i}", ["--log-level", "error", *settings[i]], documents=documents) for i in range(2)]
    servers_lock = threading.Lock()
    mix = Mix()
    stop = time.monotonic() + seconds

    def endpoint(index: int) -> str:
        with servers_lock:
            return servers[index].endpoint

    def writer(label: str, seed: int) -> None:
        local = random.Random(seed)
        mix.per_thread[label] = []
        step = 0
        while time.monotonic() < stop:
            step += 1
            name = local.choice(list(DOCUMENTS))
            with CanvasClient(endpoint(local.randrange(2)), timeout=3, retries=0) as client:
                try:
                    if local.random() < 0.15:
                        reply = client.call("document.restore", {"name": name, "revision": 1})
                    else:
                        stroke = {"tool": "pen", "color": "red", "width": 2,
                                  "points": [{"x": local.uniform(10, 600), "y": local.uniform(10, 780)}]}
                        reply = client.call("document.flatten", {"name": name, "page": local.randrange(2),
                                                                 "drawing": {"strokes": [stroke], "texts": []}})
                except (CanvasTimeout, CanvasError):
                    continue   # killed under it, or refused: not acknowledged
            with mix.lock:
                mix.acknowledged[name].append((reply["revision"], reply.get("sha256", "")))
                mix.per_thread[label].append((name, reply["revision"]))
            mix.saw(name, reply["revision"], reply.get("sha256", ""), "ack")

    def reader(seed: int) -> None:
        local = random.Random(seed)
        while time.monotonic() < stop:
            with CanvasClient(endpoint(local.randrange(2)), timeout=3, retries=0) as client:
                try:
                    for entry in client.call("document.list", {})["documents"]:
                        if "revision" in entry:
                            mix.saw(entry["name"], entry["revision"], entry.get("sha256", ""), "list")
                    name = local.choice(list(DOCUMENTS))
                    info = client.call("document.info", {"name": name})
                    mix.saw(name, info["revision"], info.get("sha256", ""), "info")
                    for revision in client.call("document.revisions", {"name": name})["revisions"]:
                        mix.saw(name, revision["revision"], revision.get("sha256", ""), "revisions")
                except (CanvasTimeout, CanvasError):
                    continue

    kills = []

    def killer() -> None:
        while time.monotonic() < stop - 1:
            time.sleep(rng.uniform(0.5, 1.5))
            index = rng.randrange(2)
            with servers_lock:
                old = servers[index]
            old.process.send_signal(signal.SIGKILL)
            old.process.wait()
            kills.append(index)
            restarted = Server(tmp_path / f"s{index}", ["--log-level", "error", *settings[index]], documents=documents)
            with servers_lock:
                servers[index] = restarted

    threads = [threading.Thread(target=writer, args=(f"w{i}", i)) for i in range(3)]
    threads += [threading.Thread(target=reader, args=(100 + i,)) for i in range(2)]
    threads.append(threading.Thread(target=killer))
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=seconds + 60)
    for running in servers:
        running.stop()

    final = Server(tmp_path / "final", ["--log-level", "error"], documents=documents)
    fetched: Dict[Tuple[str, int], Tuple[bytes, str]] = {}
    try:
        with final.client(timeout=10) as client:
            kept = {name: client.call("document.revisions", {"name": name})["revisions"] for name in DOCUMENTS}
            # Every kept revision as document.get serves it (a revision is a length of a later
            # file of its line, not a file of its own): get_document checks the bytes hash to
            # the sha256 the reply names.
            for name, entries in kept.items():
                for entry in entries:
                    data, first = client.get_document(name, revision=entry["revision"])
                    fetched[(name, entry["revision"])] = (data, first["sha256"])
    finally:
        final.stop()

    total = sum(len(acks) for acks in mix.acknowledged.values())
    print(f"\n{total} saves acknowledged, {len(mix.seen)} revisions seen by readers, {len(kills)} servers killed; "
          f"kept: { {name: [e['revision'] for e in entries] for name, entries in kept.items()} }")
    assert total >= 10, f"only {total} saves were acknowledged"
    for name, acks in mix.acknowledged.items():
        numbers = [revision for revision, _ in acks]
        reused = sorted({n for n in numbers if numbers.count(n) > 1})
        assert not reused, f"{name}: revisions acknowledged more than once: {reused}"
    for label, acks in mix.per_thread.items():
        for name in DOCUMENTS:
            mine = [revision for doc, revision in acks if doc == name]
            assert mine == sorted(mine), f"{label}'s acknowledged revisions of {name} went back: {mine}"
    clashes = {key: hashes for key, hashes in mix.seen.items() if len(hashes) > 1}
    assert not clashes, f"one revision number, several contents: {clashes}"
    for name in DOCUMENTS:
        numbers = [entry["revision"] for entry in kept[name]]
        assert numbers == sorted(set(numbers)), numbers
        assert numbers[0] == 1 and kept[name][0]["sha256"] == originals[name], "revision 1 is not the original"
        assert numbers[-1] >= max((n for n, _ in mix.acknowledged[name]), default=1)
        acknowledged = dict(mix.acknowledged[name])
        for entry in kept[name]:
            data, sha256 = fetched[(name, entry["revision"])]
            assert hashlib.sha256(data).hexdigest() == entry["sha256"] == sha256
            if entry["revision"] in acknowledged:
                assert acknowledged[entry["revision"]] == entry["sha256"], f"{name} {entry['revision']} changed since acknowledged"
            pdf = tmp_path / "check.pdf"
            pdf.write_bytes(pdf_part(data))
            check = subprocess.run(["qpdf", "--check", str(pdf)], capture_output=True)
            assert check.returncode in (0, 3), f"{name} revision {entry['revision']}: {check.stdout[-400:]}"
    assert b"123456789012345678901234567890" in (documents / "b.yianazip").read_bytes()
