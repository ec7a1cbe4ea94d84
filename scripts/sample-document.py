#!/usr/bin/env python3
"""Writes samples/notes.pdf, the document `make run` puts in a new document folder: three
US Letter pages with a heading, ruled lines and a page number, nothing else, so that the
README's walkthrough has something to draw on. Run it again only to change the sample."""

from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PAGES = 3


def page_content(number: int) -> str:
    ops = ["0 g", "BT /F1 24 Tf 72 708 Td (canvas bridge sample) Tj ET",
           f"BT /F1 12 Tf 72 684 Td (Page {number} of {PAGES}: draw on me with canvasctl.) Tj ET",
           "0.6 G 0.5 w"]
    ops += [f"72 {y} m 540 {y} l S" for y in range(640, 90, -36)]
    ops.append(f"BT /F1 10 Tf 300 50 Td ({number}) Tj ET")
    return "\n".join(ops)


def pdf() -> bytes:
    kids = " ".join(f"{4 + 2 * i} 0 R" for i in range(PAGES))
    objects = ["<< /Type /Catalog /Pages 2 0 R >>",
               f"<< /Type /Pages /Kids [{kids}] /Count {PAGES} >>",
               "<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>"]
    for i in range(PAGES):
        content = page_content(i + 1)
        objects.append(f"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] "
                       f"/Resources << /Font << /F1 3 0 R >> >> /Contents {5 + 2 * i} 0 R >>")
        objects.append(f"<< /Length {len(content)} >>\nstream\n{content}\nendstream")
    out = bytearray(b"%PDF-1.7\n%\xe2\xe3\xcf\xd3\n")
    offsets = []
    for index, body in enumerate(objects):
        offsets.append(len(out))
        out += f"{index + 1} 0 obj\n{body}\nendobj\n".encode("ascii")
    xref = len(out)
    out += f"xref\n0 {len(objects) + 1}\n0000000000 65535 f\r\n".encode("ascii")
    for offset in offsets:
        out += f"{offset:010d} 00000 n\r\n".encode("ascii")
    out += f"trailer\n<< /Size {len(objects) + 1} /Root 1 0 R >>\nstartxref\n{xref}\n%%EOF\n".encode("ascii")
    return bytes(out)


if __name__ == "__main__":
    (ROOT / "samples" / "notes.pdf").write_bytes(pdf())
