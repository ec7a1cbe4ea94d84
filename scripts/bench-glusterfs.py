#!/usr/bin/env python3
"""What a save costs on a network file system against the same save on the local disk, measured
in the same run (`make bench`, `make bench-glusterfs`).

Two canvasd of the same build, one serving a folder on this machine's disk, one serving a mount
of a GlusterFS volume made for the run (scripts/glusterfs.py: replica 3, the mount and volume
options docs/operations.md gives). Each save is a `document.flatten` of one recorded word
(UNIPEN, Tests/Fixtures/strokes/unipen-atu.json, CC BY 4.0), timed from the request to its
reply, into two real documents: samples/notes.pdf, and a one-page scan (page 1 of pdf.js's
basicapi.pdf rendered at --dpi, an uncompressed RGB image, as a scanner without compression
makes). The two canvasd take turns save by save, so a slow spell of the machine falls on both.
Both save modes; the store keeps 20 revisions.

    .venv/bin/python scripts/bench-glusterfs.py [--canvasd .build/release/canvasd] [--edits 12] [--dpi 300]
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Dict, List

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))
sys.path.insert(0, str(ROOT / "clients" / "python" / "tests"))

import glusterfs  # noqa: E402
from canvasbridge import CanvasClient  # noqa: E402

RECORDED = ROOT / "Tests" / "Fixtures" / "strokes" / "unipen-atu.json"


def words() -> List[list]:
    return [stroke["points"] for stroke in json.loads(RECORDED.read_text(encoding="utf-8"))["strokes"]]


def word_drawing(points: list, edit: int) -> dict:
    """One recorded word, placed on its own line of the page, pen with pressure."""
    low, bottom = min(p[0] for p in points), max(p[1] for p in points)
    dx, dy = 60 - low, 120 + 30 * (edit % 20) - bottom
    return {"strokes": [{"tool": "pen", "color": "black", "width": 2.2,
                         "points": [{"x": x + dx, "y": y + dy, "pressure": p} for x, y, p in points]}], "texts": []}


def scan(folder: Path, dpi: int) -> Path:
    """Page 1 of basicapi.pdf rendered at `dpi` by pdftoppm, as an uncompressed image on a
    letter page: the bytes of a scan."""
    import pikepdf

    subprocess.run(["pdftoppm", "-r", str(dpi), "-f", "1", "-l", "1", "-singlefile",
                    str(ROOT / "Tests" / "Fixtures" / "pdfjs" / "basicapi.pdf"), str(folder / "page")], check=True)
    ppm = (folder / "page.ppm").read_bytes()
    header = ppm.split(b"\n", 3)
    width, height = (int(v) for v in header[1].split())
    pixels = header[3]
    pdf = pikepdf.new()
    image = pikepdf.Stream(pdf, pixels, Type=pikepdf.Name.XObject, Subtype=pikepdf.Name.Image, Width=width,
                           Height=height, ColorSpace=pikepdf.Name.DeviceRGB, BitsPerComponent=8)
    page = pdf.add_blank_page(page_size=(612, 792))
    page.Resources = pikepdf.Dictionary(XObject=pikepdf.Dictionary(Im0=image))
    page.Contents = pdf.make_stream(b"q 612 0 0 792 0 0 cm /Im0 Do Q")
    path = folder / "scan.pdf"
    pdf.save(path, compress_streams=False)
    return path


def floor_save(folder: Path, document: bytes) -> float:
    """The least any durable appending save with a write-ahead log does, timed: the folder and a
    lock file opened and locked, the log opened and read, the document opened and its head
    read, an intent appended to the log and flushed, the update appended to the document and
    flushed, its size looked at again, the commit appended and flushed, everything closed. A
    save that did less would lose an acknowledged revision in a crash; canvasd does this and
    its own work (the page's update, the kept copy of the bytes, the checks against other
    writers)."""
    import fcntl
    import os
    start = time.perf_counter()
    directory = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
    lock = os.open("lock", os.O_RDWR | os.O_CREAT, 0o644, dir_fd=directory)
    fcntl.flock(lock, fcntl.LOCK_EX)
    log = os.open("history.log", os.O_RDWR | os.O_CREAT, 0o644, dir_fd=directory)
    end = os.fstat(log).st_size
    os.pread(log, 1 << 16, 0)
    pdf = os.open("floor.pdf", os.O_RDWR | os.O_CREAT, 0o644, dir_fd=directory)
    size = os.fstat(pdf).st_size
    os.pread(pdf, 1 << 14, 0)
    os.pwrite(log, b"i" * 192, end)
    os.fdatasync(log)
    os.pwrite(pdf, document, size)
    os.fdatasync(pdf)
    os.fstat(pdf)
    os.pwrite(log, b"c" * 571, end + 192)
    os.fdatasync(log)
    for descriptor in (pdf, log, lock, directory):
        os.close(descriptor)
    return time.perf_counter() - start


class Canvasd:
    def __init__(self, canvasd: Path, folder: Path, documents: Path, mode: str):
        folder.mkdir(parents=True, exist_ok=True)
        self.endpoint = f"ipc://{folder}/requests"
        self.log = open(folder / "canvasd.log", "wb")
        self.process = subprocess.Popen([str(canvasd), "--endpoint", self.endpoint, "--events", f"ipc://{folder}/events",
                                         "--documents", str(documents), "--save-mode", mode, "--keep-revisions", "20",
                                         "--log-level", "error"], stdout=self.log, stderr=subprocess.STDOUT)
        self.client = CanvasClient(self.endpoint, timeout=120, retries=0)
        deadline = time.monotonic() + 20
        while True:
            try:
                with CanvasClient(self.endpoint, timeout=0.5, retries=0) as probe:
                    probe.hello()
                break
            except Exception:
                if self.process.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"canvasd did not start: {(folder / 'canvasd.log').read_text()}")

    def save(self, name: str, drawing: dict) -> float:
        start = time.perf_counter()
        self.client.call("document.flatten", {"name": name, "page": 0, "drawing": drawing})
        return time.perf_counter() - start

    def stop(self) -> None:
        self.client.close()
        self.process.terminate()
        self.process.wait(timeout=10)
        self.log.close()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--canvasd", default=str(ROOT / ".build" / "release" / "canvasd"))
    parser.add_argument("--edits", type=int, default=12, help="saves per document, mode and folder")
    parser.add_argument("--dpi", type=int, default=300, help="the scan's resolution (300 dpi: about 25 MB)")
    parser.add_argument("--pause-ms", type=int, default=100, help="untimed pause between saves")
    options = parser.parse_args()
    reason = glusterfs.missing()
    if reason:
        print(f"bench-glusterfs: {reason}", file=sys.stderr)
        return 1
    recorded = words()
    work = Path(tempfile.mkdtemp(prefix="canvasbench-glusterfs-"))
    try:
        originals = {"notes.pdf": ROOT / "samples" / "notes.pdf", "scan.pdf": scan(work, options.dpi)}
        with glusterfs.Volume.create(work / "glusterfs") as volume:
            mount = volume.mount(work / "mount")
            print(f"save on GlusterFS against the local disk: {options.edits} one-word edits (UNIPEN) per document and mode, "
                  f"GlusterFS {volume.name} replica {len(volume.bricks)} on this machine, mounted -o {glusterfs.SAFE_MOUNT_OPTIONS}; "
                  f"medians of saves 2-{options.edits}, request to reply")
            print(f"  {'document':10} {'size':>9}  {'mode':8} {'local':>9} {'glusterfs':>10}  ratio")
            worst = 0.0
            for mode in ("replace", "append"):
                sides: Dict[str, Canvasd] = {}
                for side, documents in (("local", work / "local" / mode), ("glusterfs", mount / mode)):
                    documents.mkdir(parents=True)
                    for name, original in originals.items():
                        shutil.copy(original, documents / name)
                    sides[side] = Canvasd(Path(options.canvasd), work / f"{side}-{mode}", documents, mode)
                try:
                    for name, original in originals.items():
                        times: Dict[str, List[float]] = {"local": [], "glusterfs": []}
                        for edit in range(options.edits):
                            drawing = word_drawing(recorded[edit % len(recorded)], edit)
                            for side in ("local", "glusterfs") if edit % 2 else ("glusterfs", "local"):
                                times[side].append(sides[side].save(name, drawing))
                                time.sleep(options.pause_ms / 1000)
                        local = statistics.median(times["local"][1:])
                        remote = statistics.median(times["glusterfs"][1:])
                        worst = max(worst, remote / local)
                        size = original.stat().st_size
                        print(f"  {name:10} {size / 1e6:7.2f} MB  {mode:8} {local * 1000:7.1f} ms {remote * 1000:8.1f} ms  "
                              f"{remote / local:4.2f}x", flush=True)
                finally:
                    for running in sides.values():
                        running.stop()
            # The floor: the same least save on both, taking turns, a word's worth of bytes each.
            floors: Dict[str, List[float]] = {"local": [], "glusterfs": []}
            for side, folder in (("local", work / "local" / "floor"), ("glusterfs", mount / "floor")):
                folder.mkdir(parents=True)
            for edit in range(options.edits * 2):
                for side, folder in (("local", work / "local" / "floor"), ("glusterfs", mount / "floor")):
                    floors[side].append(floor_save(folder, b"%" * 3900))
                time.sleep(options.pause_ms / 1000)
            local = statistics.median(floors["local"][2:])
            remote = statistics.median(floors["glusterfs"][2:])
            print(f"  {'floor':10} {'':>9}  {'append':8} {local * 1000:7.1f} ms {remote * 1000:8.1f} ms  {remote / local:4.2f}x"
                  "   (the least durable appending save: one lock, log read, intent, bytes, commit, 3 fdatasync)")
            print(f"  worst ratio {worst:.2f}x (target: a save on a network mount at most 3x the same save on the local disk); "
                  f"the file system's own floor above is {remote / local:.1f}x")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
