"""Reading the drawing canvasd stores beside the ink of each save (a `/CanvasBridgeDrawing`
stream in the PDF), for tools that want a page's ink as strokes without a server.

Since canvas/1.8 the stream holds the drawing in a compact binary encoding (protocol/spec.md
5.2; the layout is documented in Sources/InkRendering/InkSource.swift): version 1; version 2,
the same followed by a checksum of its own (FNV-1a, 64 bits), which is checked; and version 3,
an /Ink annotation's drawing, which leaves out the positions of the strokes its /InkList gives
back exactly and takes them from there (`positions`, from `inklist_positions`), with a second
checksum over those. Before canvas/1.8, JSON as `drawing.get` gives it. `decode` reads them all
and answers the drawing as `drawing.get` shows it: {"strokes": [...], "texts": [...]}, a whole
number written as an int.
"""

import json
import math
import struct
from typing import Any, Dict, List, Optional, Sequence, Tuple

MAGIC = b"CBI"
VERSIONS = (1, 2, 3)
POSITIONS_GIVEN = 8   # version 3's stroke flag: its x and y are its annotation's /InkList's

Positions = List[Tuple[float, float]]


def checksum(data: bytes) -> int:
    """FNV-1a, 64 bits: what version 2 ends with, over every byte before it."""
    value = 0xCBF29CE484222325
    for byte in data:
        value = ((value ^ byte) * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
    return value


class InkSourceError(ValueError):
    """The stored bytes are not a drawing: where reading stopped and why."""


def _number(value: float) -> Any:
    return int(value) if value.is_integer() and abs(value) < 2 ** 53 else value


class _Reader:
    def __init__(self, data: bytes) -> None:
        self.data = data
        self.offset = 0

    def fail(self, reason: str) -> InkSourceError:
        return InkSourceError(f"the stored drawing is damaged at byte {self.offset}: {reason}")

    def byte(self) -> int:
        if self.offset >= len(self.data):
            raise self.fail("the bytes end early")
        self.offset += 1
        return self.data[self.offset - 1]

    def take(self, count: int) -> bytes:
        if count > len(self.data) - self.offset:
            raise self.fail("the bytes end early")
        self.offset += count
        return self.data[self.offset - count:self.offset]

    def unsigned(self) -> int:
        value, shift = 0, 0
        while shift < 64:
            byte = self.byte()
            value |= (byte & 0x7F) << shift
            if not byte & 0x80:
                return value
            shift += 7
        raise self.fail("a number longer than 64 bits")

    def signed(self) -> int:
        value = self.unsigned()
        return (value >> 1) ^ -(value & 1)

    def count(self, each: int) -> int:
        value = self.unsigned()
        if value > (len(self.data) - self.offset) // each + 1:
            raise self.fail(f"a count of {value} with {len(self.data) - self.offset} bytes left")
        return value

    def raw(self) -> float:
        return struct.unpack("<d", self.take(8))[0]

    def string(self) -> str:
        length = self.unsigned()
        try:
            return self.take(length).decode("utf-8")
        except UnicodeDecodeError as error:
            raise self.fail(f"a string that is not UTF-8: {error}") from None

    def scalar(self) -> float:
        head = self.unsigned()
        if head & 1:
            return self.raw()
        zigzag = head >> 1
        return ((zigzag >> 1) ^ -(zigzag & 1)) / 100


def on_grid(value: float, steps: int = 100) -> float:
    """`value` to the nearest 1 / `steps` (the ink grid: 100 for positions, 1000 for pressure),
    a half away from zero, as Swift's `(v * steps).rounded() / steps` and the web client put it:
    a count of steps divided by `steps` (times the step would leave 0.691 as 0.6910000000000001,
    off the grid). A number past the doubles stays as it is, and no point will take it."""
    scaled = value * steps
    if not math.isfinite(scaled):
        return scaled
    whole = math.floor(abs(scaled))
    if abs(scaled) - whole >= 0.5:
        whole += 1
    return math.copysign(whole, scaled) / steps


def inklist_positions(inklist: Sequence[Sequence[float]], height: float,
                      matrix: Sequence[float] = (1, 0, 0, 1, 0, 0)) -> List[Positions]:
    """An /Ink annotation's /InkList as the positions its stored drawing (version 3) takes: each
    entry's points from default user space to display points (`height`: the page's display
    height; `matrix`: from ink space, display points with y up, to user space, the identity for
    an upright page whose boxes start at the origin), on the 0.01 pt grid."""
    a, b, c, d, e, f = (float(v) for v in matrix)
    determinant = a * d - b * c
    lines: List[Positions] = []
    for entry in inklist:
        line: Positions = []
        if determinant != 0 and math.isfinite(determinant):
            for index in range(0, len(entry) - 1, 2):
                dx, dy = float(entry[index]) - e, float(entry[index + 1]) - f
                x, y = (d * dx - c * dy) / determinant, (a * dy - b * dx) / determinant
                line.append((on_grid(x), on_grid(height - y)))
        lines.append(line)
    return lines


def decode(data: bytes, positions: Optional[Sequence[Positions]] = None) -> Dict[str, List[Dict[str, Any]]]:
    """The drawing stored in `data` (the stream's decoded bytes), binary or JSON. `positions`:
    for an annotation's drawing, its /InkList's (`inklist_positions`); a version 3 drawing with
    a stroke that takes them is an error without them, or when they are not those it was
    stored with."""
    if not data.startswith(MAGIC):
        try:
            drawing = json.loads(data)
        except (ValueError, UnicodeDecodeError) as error:
            raise InkSourceError(f"neither an encoded drawing nor JSON: {error}") from None
        return {"strokes": drawing.get("strokes", []), "texts": drawing.get("texts", [])}
    reader = _Reader(data)
    reader.offset = len(MAGIC)
    version = reader.byte()
    if version not in VERSIONS:
        raise reader.fail(f"version {version}; this reader knows {VERSIONS}")
    sums = version - 1
    body = len(data) - 8 * sums
    if body <= len(MAGIC):
        raise reader.fail("the bytes end early")
    if sums and int.from_bytes(data[body:body + 8], "little") != checksum(data[:body]):
        reader.offset = body
        raise reader.fail("its checksum does not match its bytes (changed since it was written)")
    taken_sum = int.from_bytes(data[body + 8:], "little") if version == 3 else None
    taken = bytearray()
    data = data[:body]
    reader.data = data
    stroke_count, text_count = reader.count(5), reader.count(5)
    previous = [0, 0, 0]
    strokes: List[Dict[str, Any]] = []
    for stroke_index in range(stroke_count):
        flags = reader.byte()
        if flags & ~(15 if version == 3 else 7):
            raise reader.fail(f"stroke flags {flags}")
        color, width = reader.string(), reader.scalar()
        given: Optional[Positions] = None
        if flags & POSITIONS_GIVEN:
            count = reader.unsigned()
            if positions is None or stroke_index >= len(positions) or len(positions[stroke_index]) != count:
                raise reader.fail(f"stroke {stroke_index} of {count} points takes its positions from its annotation's "
                                  "/InkList, which were not given for it")
            given = list(positions[stroke_index])
            for x, y in given:
                taken += struct.pack("<dd", x, y)
        else:
            count = reader.count(2)
        if count == 0:
            raise reader.fail("a stroke without points")
        present = [bool(flags & 2)] * count
        if flags & 6 == 6:
            bitmap = reader.take((count + 7) // 8)
            present = [bool(bitmap[i // 8] >> (i % 8) & 1) for i in range(count)]
        columns: List[List[int]] = []
        for column in range(3):
            values, last = [], previous[column]
            if column < 2 and given is not None:
                columns.append(values)
                continue
            for index in range(count):
                if column < 2 or present[index]:
                    last += reader.signed()
                    values.append(last)
            previous[column] = last
            columns.append(values)
        exact: Dict[int, float] = {}
        for _ in range(reader.count(9)):
            index = reader.unsigned()
            if index >= 3 * count or (given is not None and index < 2 * count):
                raise reader.fail(f"an exception for value {index} of {3 * count}")
            exact[index] = reader.raw()
        points, pressures = [], iter(columns[2])
        for index in range(count):
            x, y = given[index] if given is not None else (columns[0][index] / 100, columns[1][index] / 100)
            point: Dict[str, Any] = {"x": _number(exact.get(index, x)), "y": _number(exact.get(count + index, y))}
            if present[index]:
                point["pressure"] = _number(exact.get(2 * count + index, next(pressures) / 1000))
            points.append(point)
        strokes.append({"tool": "highlighter" if flags & 1 else "pen", "color": color, "width": _number(width),
                        "points": points})
    texts: List[Dict[str, Any]] = []
    for _ in range(text_count):
        color, text = reader.string(), reader.string()
        x, y, size = reader.scalar(), reader.scalar(), reader.scalar()
        texts.append({"text": text, "x": _number(x), "y": _number(y), "fontSize": _number(size), "color": color})
    if reader.offset != len(data):
        raise reader.fail(f"{len(data) - reader.offset} bytes after the drawing")
    if taken_sum is not None and checksum(bytes(taken)) != taken_sum:
        reader.offset = body + 8
        raise reader.fail("the positions it takes from its annotation's /InkList are not those it was stored with")
    return {"strokes": strokes, "texts": texts}
