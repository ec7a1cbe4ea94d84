"""PDFs the tests build themselves, byte by byte: small valid ones, and hostile ones."""

from __future__ import annotations


def tiny_pdf(pages: int) -> bytes:
    """A valid PDF of `pages` letter pages, each with a grey square."""
    objects = ["<< /Type /Catalog /Pages 2 0 R >>",
               "<< /Type /Pages /Kids [%s] /Count %d >>" % (" ".join(f"{3 + 2 * i} 0 R" for i in range(pages)), pages)]
    for i in range(pages):
        content = f"0.5 g {50 + 40 * i} 600 80 80 re f"
        objects.append(f"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents {4 + 2 * i} 0 R >>")
        objects.append(f"<< /Length {len(content)} >>\nstream\n{content}\nendstream")
    out = bytearray(b"%PDF-1.7\n")
    offsets = []
    for number, body in enumerate(objects, start=1):
        offsets.append(len(out))
        out += f"{number} 0 obj\n{body}\nendobj\n".encode()
    xref = len(out)
    out += f"xref\n0 {len(objects) + 1}\n0000000000 65535 f\r\n".encode()
    for offset in offsets:
        out += f"{offset:010d} 00000 n\r\n".encode()
    out += f"trailer\n<< /Size {len(objects) + 1} /Root 1 0 R >>\nstartxref\n{xref}\n%%EOF\n".encode()
    return bytes(out)


def slow_to_repair(lines: int) -> bytes:
    """A PDF with no cross-reference table and `lines` unfinished trailers: qpdf's repair of it
    takes time and memory that grow faster than the file (about 11 s and 320 MB for 4,000
    lines with qpdf 11.3)."""
    out = bytearray(b"%PDF-1.7\n1 0 obj << /Type /Catalog /Pages 2 0 R >> endobj\n")
    for _ in range(lines):
        out += b"trailer\n<< /Size 3 /Root 1 0 R /X [\n"
    return bytes(out)


def large_pdf(size: int, seed: int = 1) -> bytes:
    """A valid one-page PDF of about `size` bytes: tiny_pdf's page and a stream of random bytes
    (an embedded file's worth of data, which qpdf reads without repair)."""
    import random
    payload = random.Random(seed).randbytes(max(0, size - 600))
    objects = [b"<< /Type /Catalog /Pages 2 0 R >>", b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
               b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 4 0 R >>"]
    content = b"0.5 g 50 600 80 80 re f"
    objects.append(b"<< /Length %d >>\nstream\n%s\nendstream" % (len(content), content))
    objects.append(b"<< /Length %d >>\nstream\n%s\nendstream" % (len(payload), payload))
    out = bytearray(b"%PDF-1.7\n%\xe2\xe3\xcf\xd3\n")
    offsets = []
    for number, body in enumerate(objects, start=1):
        offsets.append(len(out))
        out += b"%d 0 obj\n%s\nendobj\n" % (number, body)
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f\r\n" % (len(objects) + 1)
    for offset in offsets:
        out += b"%010d 00000 n\r\n" % offset
    out += b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (len(objects) + 1, xref)
    return bytes(out)


def objects_in_a_stream_update(pdf: bytes, objects: "dict[int, str]") -> bytes:
    """`pdf` with an incremental update, as an editor appends one, that gives `objects` (number to
    body, generation 0) new bodies inside one deflated object stream, listed by a
    cross-reference stream. What qpdf reads of such a stream it parses whole."""
    import io
    import re
    import zlib

    import pikepdf

    with pikepdf.open(io.BytesIO(pdf)) as parsed:
        size = int(parsed.trailer.Size)
        root = parsed.Root.objgen
    previous = int(re.findall(rb"startxref\s+(\d+)", pdf)[-1])
    numbers = sorted(objects)
    bodies, header, at = b"", [], 0
    for number in numbers:
        header.append(f"{number} {at}")
        body = objects[number].encode() + b"\n"
        bodies += body
        at += len(body)
    first = " ".join(header).encode() + b"\n"
    data = zlib.compress(first + bodies, 9)
    stream_number, xref_number = size, size + 1
    out = bytearray(pdf if pdf.endswith(b"\n") else pdf + b"\n")
    stream_at = len(out)
    out += b"%d 0 obj\n<< /Type /ObjStm /N %d /First %d /Filter /FlateDecode /Length %d >>\nstream\n" % (
        stream_number, len(numbers), len(first), len(data))
    out += data + b"\nendstream\nendobj\n"
    xref_at = len(out)
    rows = [(number, bytes([2]) + stream_number.to_bytes(4, "big") + index.to_bytes(2, "big"))
            for index, number in enumerate(numbers)]
    rows += [(stream_number, bytes([1]) + stream_at.to_bytes(4, "big") + b"\0\0"),
             (xref_number, bytes([1]) + xref_at.to_bytes(4, "big") + b"\0\0")]
    rows.sort()
    index = " ".join(f"{number} 1" for number, _ in rows)
    table = b"".join(row for _, row in rows)
    out += b"%d 0 obj\n<< /Type /XRef /Size %d /Root %d %d R /Prev %d /W [1 4 2] /Index [%s] /Length %d >>\nstream\n" % (
        xref_number, xref_number + 1, root[0], root[1], previous, index.encode(), len(table))
    out += table + b"\nendstream\nendobj\nstartxref\n%d\n%%%%EOF\n" % xref_at
    return bytes(out)


def objects_in_a_plain_update(pdf: bytes, objects: "dict[int, str]") -> bytes:
    """`pdf` with an incremental update that gives `objects` (number to body, generation 0) new
    bodies written plain, listed by a cross-reference table (a file whose last section is a
    cross-reference stream keeps working: readers follow /Prev either way)."""
    import io
    import re

    import pikepdf

    with pikepdf.open(io.BytesIO(pdf)) as parsed:
        size = int(parsed.trailer.Size)
        root = parsed.Root.objgen
    previous = int(re.findall(rb"startxref\s+(\d+)", pdf)[-1])
    out = bytearray(pdf if pdf.endswith(b"\n") else pdf + b"\n")
    offsets = {}
    for number in sorted(objects):
        offsets[number] = len(out)
        out += b"%d 0 obj\n%s\nendobj\n" % (number, objects[number].encode())
    xref = len(out)
    out += b"xref\n"
    for number in sorted(objects):
        out += b"%d 1\n%010d 00000 n\r\n" % (number, offsets[number])
    out += b"trailer\n<< /Size %d /Root %d %d R /Prev %d >>\nstartxref\n%d\n%%%%EOF\n" % (size, root[0], root[1], previous, xref)
    return bytes(out)
