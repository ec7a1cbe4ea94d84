"""Pixels of rendered pages and screenshots, for tests that look for ink where it was drawn."""

from __future__ import annotations

import struct
import subprocess
import tempfile
import zlib
from pathlib import Path
from typing import List, Tuple

Gray = Tuple[int, int, List[bytes]]   # width, height, rows


def render_page(pdf: Path, page: int, dpi: int = 72) -> Gray:
    """Page `page` (from 0) rendered by poppler's pdftoppm in grey: one byte per pixel."""
    with tempfile.TemporaryDirectory() as folder:
        subprocess.run(["pdftoppm", "-r", str(dpi), "-f", str(page + 1), "-l", str(page + 1), "-gray", "-singlefile",
                        str(pdf), f"{folder}/page"], check=True)
        data = Path(f"{folder}/page.pgm").read_bytes()
    magic, size, maximum, pixels = data.split(b"\n", 3)
    width, height = map(int, size.split())
    assert magic == b"P5" and maximum == b"255"
    return width, height, [pixels[y * width:(y + 1) * width] for y in range(height)]


def new_dark_pixels(before: Gray, after: Gray, threshold: int = 100) -> List[Tuple[int, int]]:
    """Pixels dark in `after` that were not dark in `before`: the ink a save added."""
    width, height, old = before
    _, _, new = after
    return [(x, y) for y in range(height) for x in range(width) if new[y][x] < threshold <= old[y][x]]


def decode_png(data: bytes) -> Tuple[int, int, List[List[Tuple[int, int, int]]]]:
    """An 8-bit RGB or RGBA, non-interlaced PNG (what Chromium's screenshots are) as RGB rows."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    at, chunks, header = 8, [], None
    while at < len(data):
        length, kind = struct.unpack(">I4s", data[at:at + 8])
        body = data[at + 8:at + 8 + length]
        if kind == b"IHDR":
            header = struct.unpack(">IIBBBBB", body)
        elif kind == b"IDAT":
            chunks.append(body)
        at += 12 + length
    width, height, depth, color, _, _, interlace = header
    assert depth == 8 and color in (2, 6) and interlace == 0, header
    channels = 4 if color == 6 else 3
    raw = zlib.decompress(b"".join(chunks))
    stride = width * channels
    rows, previous = [], bytearray(stride)
    for y in range(height):
        kind, line = raw[y * (stride + 1)], bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        for i in range(stride):
            left = line[i - channels] if i >= channels else 0
            up, corner = previous[i], previous[i - channels] if i >= channels else 0
            if kind == 1:
                line[i] = (line[i] + left) & 255
            elif kind == 2:
                line[i] = (line[i] + up) & 255
            elif kind == 3:
                line[i] = (line[i] + (left + up) // 2) & 255
            elif kind == 4:
                p = left + up - corner
                pa, pb, pc = abs(p - left), abs(p - up), abs(p - corner)
                line[i] = (line[i] + (left if pa <= pb and pa <= pc else up if pb <= pc else corner)) & 255
        rows.append([tuple(line[x * channels:x * channels + 3]) for x in range(width)])
        previous = line
    return width, height, rows


Rgb = Tuple[int, int, List[List[Tuple[int, int, int]]]]   # width, height, rows of (r, g, b)


def render_page_rgb(pdf: Path, page: int, dpi: int = 72) -> Rgb:
    """Page `page` (from 0) rendered by poppler's pdftoppm in colour."""
    with tempfile.TemporaryDirectory() as folder:
        subprocess.run(["pdftoppm", "-r", str(dpi), "-f", str(page + 1), "-l", str(page + 1), "-singlefile",
                        str(pdf), f"{folder}/page"], check=True)
        data = Path(f"{folder}/page.ppm").read_bytes()
    magic, size, maximum, pixels = data.split(b"\n", 3)
    width, height = map(int, size.split())
    assert magic == b"P6" and maximum == b"255"
    return width, height, [[tuple(pixels[(y * width + x) * 3:(y * width + x) * 3 + 3]) for x in range(width)]
                           for y in range(height)]
