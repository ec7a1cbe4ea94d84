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
