"""Boundary values in every numeric field of every method: the largest and smallest integers,
numbers past any integer type, huge and tiny doubles. Every request gets one clear answer
(a result, or an error other than INTERNAL), and canvasd lives through all of them."""

from __future__ import annotations

import itertools
import json

import zmq

from conftest import Server
from pdfs import tiny_pdf

BOUNDARIES = [0, -1, 1, 2**31 - 1, 2**31, -(2**31) - 1, 2**53 + 1, 2**63 - 1, -(2**63), 2**63, 2**64,
              10**30, -(10**30), 1e308, -1e308, 5e-324, 0.5, -0.0]


def stroke(**overrides):
    base = {"tool": "pen", "color": "red", "width": 3, "points": [{"x": 10, "y": 10, "pressure": 0.5}]}
    base.update(overrides)
    return base


def requests(session: str, value):
    """Requests with `value` in one numeric place each."""
    point = lambda **kw: [{"x": 10, "y": 10, **kw}]
    session_requests = [
        ("session.open", {"transitions": {"ms": value}}),
        ("session.open", {"size": {"width": value, "height": 100}}),
        ("canvas.open", {"size": {"width": 100, "height": value}}),
        ("canvas.open", {"document": "d.pdf", "page": value}),
        ("drawing.addStroke", stroke(width=value)),
        ("drawing.addStroke", stroke(points=point(x=value))),
        ("drawing.addStroke", stroke(points=point(y=value))),
        ("drawing.addStroke", stroke(points=point(pressure=value))),
        ("drawing.addText", {"text": "t", "x": value, "y": 5, "fontSize": 12, "color": "black"}),
        ("drawing.addText", {"text": "t", "x": 5, "y": 5, "fontSize": value, "color": "black"}),
        ("drawing.moveText", {"index": value, "x": 1, "y": 1}),
        ("drawing.moveText", {"index": 0, "x": value, "y": value}),
        ("drawing.erase", {"x": value, "y": 10, "radius": 5, "mode": "partial"}),
        ("drawing.erase", {"x": 10, "y": 10, "radius": value, "mode": "stroke"}),
        ("drawing.get", {}),
    ]
    for method, params in session_requests:
        if method == "session.open":
            yield {"method": method, "params": params}
        else:
            yield {"method": method, "params": params, "session": session}
    drawing = {"strokes": [stroke(points=point(x=value))], "texts": []}
    yield {"method": "document.flatten", "params": {"name": "d.pdf", "page": value, "drawing": {"strokes": [stroke()], "texts": []}}}
    yield {"method": "document.flatten", "params": {"name": "d.pdf", "page": 0, "drawing": drawing}}
    yield {"method": "document.flatten", "params": {"name": "d.pdf", "page": 0, "expectedRevision": value,
                                                    "drawing": {"strokes": [stroke()], "texts": []}}}
    yield {"method": "document.restore", "params": {"name": "d.pdf", "revision": value}}
    yield {"method": "document.restore", "params": {"name": "d.pdf", "revision": 1, "expectedRevision": value}}


def test_boundary_values_get_clear_answers(tmp_path):
    server = Server(tmp_path, ["--log-level", "error"])
    (server.documents / "d.pdf").write_bytes(tiny_pdf(2))
    metadata = (b'{"title": "t", "created": 1e308, "modified": -1e308, "page_count": 18446744073709551616, "tags": [], '
                b'"ocr_completed": false, "full_text": "", "markup": {"markup_count": -9223372036854775808, "has_markup": 5}}')
    (server.documents / "m.yianazip").write_bytes(metadata + b"\xff\xff\xff\xff" + tiny_pdf(1))
    context = zmq.Context.instance()
    dealer = context.socket(zmq.DEALER)
    dealer.setsockopt(zmq.LINGER, 0)
    dealer.connect(server.endpoint)
    codes = {}
    try:
        with server.client(timeout=10) as client:
            session = client.open_session(transitions="instant")
            session.open()
            session.call("drawing.addText", {"text": "t", "x": 5, "y": 5, "fontSize": 12, "color": "black"})
            ids = itertools.count(1)
            for value in BOUNDARIES:
                for request in requests(session.id, value):
                    request["id"] = next(ids)
                    # Python writes 1e308 as 1e+308 and big integers in full: both valid JSON.
                    dealer.send(json.dumps(request).encode())
                    assert dealer.poll(15_000), f"no reply to {request}"
                    reply = json.loads(dealer.recv())
                    assert reply["id"] == request["id"]
                    outcome = reply["error"]["code"] if "error" in reply else "ok"
                    assert outcome != "INTERNAL", (request, reply)
                    codes[outcome] = codes.get(outcome, 0) + 1
            # The metadata's own extremes: saved twice, still readable.
            for _ in range(2):
                client.call("document.flatten", {"name": "m.yianazip", "page": 0, "drawing": {"strokes": [stroke()], "texts": []}})
            assert client.call("document.info", {"name": "m.yianazip"})["revision"] == 3
        print("\n" + ", ".join(f"{code}: {count}" for code, count in sorted(codes.items())))
        assert server.process.poll() is None
    finally:
        dealer.close(0)
        server.stop()


def test_ids_at_the_ends_of_64_bits_are_echoed_and_past_them_refused(server, client):
    # The conformance layer checks each reply against envelope.schema.json, whose id range must
    # be the server's: both ends of a signed 64-bit integer.
    for id in (-(2**63), 2**63 - 1, "x" * 100):
        reply = client.exchange([json.dumps({"id": id, "method": "hello"}).encode()])
        assert reply["id"] == id and "result" in reply
    for id in (-(2**63) - 1, 2**63):
        reply = client.exchange([json.dumps({"id": id, "method": "hello"}).encode()])
        assert reply["id"] is None and reply["error"]["code"] == "INVALID_REQUEST", reply
