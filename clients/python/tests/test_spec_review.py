"""What a client written from protocol/spec.md alone found to differ, each now decided in the
spec and held here against a real canvasd: document requests that name a session, the fields
an error blames, what an open of an open canvas changes, names compared as the file system
compares them, ids written as 1.0, and nulls as absent params."""

from __future__ import annotations

import hashlib
import os
import unicodedata

import pytest

from canvasbridge import CanvasError, EventSubscriber
from pdfs import tiny_pdf

STROKE = {"tool": "pen", "color": "red", "width": 3, "points": [{"x": 10, "y": 10}, {"x": 40, "y": 30}]}


def put(server, name: str, pages: int = 2) -> bytes:
    data = tiny_pdf(pages)
    (server.documents / name).write_bytes(data)
    return data


def test_a_retried_flatten_with_a_session_saves_once(server, client):
    put(server, "d.pdf")
    session = client.open_session()
    request = {"id": 7, "method": "document.flatten", "session": session.id,
               "params": {"name": "d.pdf", "page": 0, "drawing": {"strokes": [STROKE]}}}
    first = client.request(request)
    digest = hashlib.sha256((server.documents / "d.pdf").read_bytes()).hexdigest()
    again = client.request(request)
    assert first == again and first["result"]["revision"] == 2
    assert hashlib.sha256((server.documents / "d.pdf").read_bytes()).hexdigest() == digest == first["result"]["sha256"]
    assert [r["revision"] for r in client.call("document.revisions", {"name": "d.pdf"})["revisions"]] == [1, 2]


def test_a_document_request_naming_no_such_session_is_refused(server, client):
    put(server, "d.pdf")
    with pytest.raises(CanvasError) as refused:
        client.call("document.list", session="nonexistent")
    assert refused.value.code == "UNKNOWN_SESSION"
    with pytest.raises(CanvasError) as refused:
        client.call("document.flatten", {"name": "d.pdf", "page": 0, "drawing": {"strokes": [STROKE]}}, session="gone")
    assert refused.value.code == "UNKNOWN_SESSION"
    assert [r["revision"] for r in client.call("document.revisions", {"name": "d.pdf"})["revisions"]] == [1]


def test_flatten_holds_texts_and_strokes_to_the_limits_with_an_indexed_field(server, client):
    put(server, "d.pdf")
    before = (server.documents / "d.pdf").read_bytes()
    limits = client.hello()["limits"]
    text = {"text": "\U0001F600" * (limits["maxTextLength"] + 1), "x": 5, "y": 5, "fontSize": 12, "color": "black"}
    fine = {"text": "ok", "x": 5, "y": 5, "fontSize": 12, "color": "black"}
    with pytest.raises(CanvasError) as refused:
        client.call("document.flatten", {"name": "d.pdf", "page": 0, "drawing": {"texts": [fine, text]}})
    assert (refused.value.code, refused.value.data["field"]) == ("PAYLOAD_TOO_LARGE", "drawing.texts[1].text")
    long = dict(STROKE, points=[{"x": i % 500, "y": 3} for i in range(limits["maxPointsPerStroke"] + 1)])
    with pytest.raises(CanvasError) as refused:
        client.call("document.flatten", {"name": "d.pdf", "page": 0, "drawing": {"strokes": [STROKE, long]}})
    assert (refused.value.code, refused.value.data["field"]) == ("PAYLOAD_TOO_LARGE", "drawing.strokes[1].points")
    assert (server.documents / "d.pdf").read_bytes() == before


def test_canvas_open_blames_the_document_param(server, client):
    session = client.open_session()
    for name in ["../x.pdf", ""]:
        with pytest.raises(CanvasError) as refused:
            session.call("canvas.open", {"document": name})
        assert (refused.value.code, refused.value.data["field"]) == ("INVALID_PARAMS", "document")
    with pytest.raises(CanvasError) as refused:
        session.call("canvas.open", {"page": 0})
    assert (refused.value.code, refused.value.data["field"]) == ("INVALID_PARAMS", "document")
    assert session.call("canvas.state")["state"] == "closed"
    # §5 canvas.open: the target is checked before anything else, on an open canvas too; only
    # a target that is there, and is not the canvas's own, is CONFLICT.
    put(server, "d.pdf")
    session.call("canvas.open", {"document": "d.pdf", "page": 1})
    for params, code in [({"document": "../x.pdf"}, "INVALID_PARAMS"), ({"document": "gone.pdf"}, "NOT_FOUND"),
                         ({"document": "d.pdf", "page": 2}, "NOT_FOUND"), ({"document": "d.pdf", "page": 0}, "CONFLICT")]:
        with pytest.raises(CanvasError) as refused:
            session.call("canvas.open", params)
        assert refused.value.code == code, (params, refused.value)
    assert session.call("canvas.open", {"document": "d.pdf", "page": 1}) == {"state": "open"}


def test_an_open_of_an_open_canvas_keeps_its_size(server, client):
    session = client.open_session(size=(300, 200))
    session.call("canvas.open")
    assert session.call("canvas.open", {"size": {"width": 5, "height": 5}}) == {"state": "open"}
    assert session.call("canvas.state")["size"] == {"width": 300, "height": 200}
    session.call("canvas.minimize")
    session.call("canvas.open", {"size": {"width": 5, "height": 5}})
    assert session.call("canvas.state")["size"] == {"width": 5, "height": 5}


def test_the_image_size_is_the_last_one_an_opening_open_set(server, client):
    """§3.1: size from session.open, then from an open that opens (its size, or its page's),
    kept after the drawing ends; the extent, at least 1 x 1, when no size was ever set."""
    import base64
    from images import decode_png

    def image(session, method="canvas.minimize"):
        width, height, _ = decode_png(base64.b64decode(session.call(method, {"imageData": True})["imageData"]))
        return width, height

    put(server, "d.pdf")
    bare = client.open_session()
    bare.call("canvas.open")
    assert image(bare, "canvas.submit") == (1, 1)   # an empty drawing: one transparent pixel
    bare.call("canvas.open")
    bare.call("drawing.addStroke", {**STROKE, "width": 10})
    assert image(bare) == (49, 39)   # 40 + 0.85 * 10 and 30 + 0.85 * 10, rounded up
    session = client.open_session(size=(300, 200))
    session.call("canvas.open", {"document": "d.pdf", "page": 1})
    assert image(session, "canvas.cancel") == (612, 792)
    session.call("canvas.open")   # no size, no page: the page's size stays
    assert image(session, "canvas.cancel") == (612, 792)
    session.call("canvas.open", {"size": {"width": 20, "height": 30}})
    assert image(session, "canvas.cancel") == (20, 30)
    session.call("canvas.open", {"document": "d.pdf", "size": {"width": 40, "height": 50}})   # the size param wins
    assert image(session, "canvas.cancel") == (40, 50)


def test_restoring_the_current_revision_publishes_nothing(server, client):
    put(server, "d.pdf")
    client.call("document.flatten", {"name": "d.pdf", "page": 0, "drawing": {"strokes": [STROKE]}})
    with EventSubscriber(server.events, prefix="documents.") as events:
        events.ready()
        assert client.call("document.restore", {"name": "d.pdf", "revision": 2})["revision"] == 2
        assert events.drain(0.3) == []
        assert client.call("document.restore", {"name": "d.pdf", "revision": 1})["revision"] == 3
        assert [e.data["revision"] for e in events.drain(0.3)] == [3]


def test_names_differing_only_in_normalisation_are_two_documents(server, client):
    composed, decomposed = "\u00e9.pdf", unicodedata.normalize("NFD", "\u00e9.pdf")
    put(server, composed)
    put(server, decomposed)
    put(server, "f.pdf")
    names = [d["name"] for d in client.call("document.list")["documents"]]
    assert names == sorted(names, key=lambda n: n.encode("utf-8")) and set(names) == {composed, decomposed, "f.pdf"}
    session = client.open_session()
    session.call("canvas.open", {"document": composed})
    with pytest.raises(CanvasError) as refused:
        session.call("canvas.open", {"document": decomposed})
    assert refused.value.code == "CONFLICT" and refused.value.data == {"document": composed, "page": 0}
    session.call("drawing.addStroke", STROKE)
    assert session.call("canvas.submit")["document"]["name"] == composed
    assert [r["revision"] for r in client.call("document.revisions", {"name": decomposed})["revisions"]] == [1]


def test_a_file_name_that_is_not_utf8_is_not_listed(server, client):
    put(server, "ok.pdf")
    with open(os.fsencode(server.documents) + b"/\xff\xfe.pdf", "wb") as odd:
        odd.write(tiny_pdf(1))
    assert [d["name"] for d in client.call("document.list")["documents"]] == ["ok.pdf"]


def test_integral_ids_are_integers_and_nulls_are_absent(server, client):
    reply = client.request({"id": 1.0, "method": "hello"})
    assert reply["id"] == 1 and isinstance(reply["id"], int)
    assert client.request({"id": 1e2, "method": "hello"})["id"] == 100
    assert client.exchange([b'{"id":18446744073709551616,"method":"hello"}'])["error"]["code"] == "INVALID_REQUEST"
    opened = client.call("session.open", {"transitions": None, "size": None, "pencil": None, "initialized": None})
    assert opened["transitions"] == "instant" and opened["pencil"]["initialized"] is True
    session = opened["session"]
    assert client.call("canvas.open", {"document": None, "page": None, "size": None}, session=session) == {"state": "open"}
    assert client.call("canvas.minimize", {"imageData": None}, session=session)["action"] == "minimized"


def test_a_key_written_twice_takes_its_last_value_and_a_bom_is_not_json(server, client):
    reply = client.exchange([b'{"id": 1, "method": "canvas.open", "method": "hello", "id": 2}'])
    assert reply["id"] == 2 and reply["result"]["protocol"].startswith("canvas/1.")
    session = client.open_session()
    reply = client.exchange([('{"id": 3, "method": "session.open", "params": {"size": {"width": 5, "height": 6, '
                              '"width": 7}}}').encode()])
    other = reply["result"]["session"]
    assert client.call("canvas.state", session=other)["size"] == {"width": 7, "height": 6}
    reply = client.exchange([b'\xef\xbb\xbf{"id": 4, "method": "hello"}'])
    assert reply["id"] is None and reply["error"]["code"] == "PARSE_ERROR"
    assert session.call("canvas.state")["state"] == "closed"


def test_a_reply_too_large_to_keep_is_not_run_twice(server, client):
    """§2.4: a reply over maxCachedReplyBytes is sent but not kept; a repeat of drawing.get
    runs again, a repeat of anything else answers UNAVAILABLE replyNotKept and runs nothing."""
    import json
    import random
    limit = client.hello()["limits"]["maxCachedReplyBytes"]
    session = client.open_session(size=(700, 700))
    session.call("canvas.open")
    chance = random.Random(7)   # ink of random colours everywhere: a PNG that does not compress
    for _ in range(20):
        points = [{"x": chance.uniform(0, 700), "y": chance.uniform(0, 700)} for _ in range(20)]
        session.call("drawing.addStroke", {"tool": "pen", "color": "#%06x" % chance.randrange(1 << 24),
                                           "width": 3, "points": points})
    minimize = {"id": 9001, "method": "canvas.minimize", "session": session.id, "params": {"imageData": True}}
    first = client.request(minimize)
    assert len(json.dumps(first)) > limit and first["result"]["action"] == "minimized"
    again = client.request(minimize)
    assert again["error"]["code"] == "UNAVAILABLE" and again["error"]["data"] == {"limit": limit, "reason": "replyNotKept"}
    assert session.state()["state"] == "minimized"   # not run twice, nor anything else
    session.call("canvas.open")
    for _ in range(6):   # a drawing whose JSON is over the limit too
        session.call("drawing.addStroke", {"tool": "pen", "color": "red", "width": 3,
                                           "points": [{"x": chance.uniform(0, 700), "y": 5} for _ in range(2000)]})
    get = {"id": 9002, "method": "drawing.get", "session": session.id}
    drawing = client.request(get)
    assert len(json.dumps(drawing)) > limit
    assert client.request(get) == drawing   # a read simply runs again


def test_document_get_past_the_end_and_of_unreadable_files_and_pdf_in_any_case(server, client, tmp_path):
    import base64
    import subprocess
    data = put(server, "d.pdf")
    past = client.call("document.get", {"name": "d.pdf", "offset": len(data) + 10})
    assert (past["length"], past["data"], past["size"]) == (0, "", len(data))
    (tmp_path / "plain.pdf").write_bytes(tiny_pdf(1))
    subprocess.run(["qpdf", "--encrypt", "user-secret", "owner-secret", "256", "--",
                    str(tmp_path / "plain.pdf"), str(server.documents / "locked.pdf")], check=True)
    locked = (server.documents / "locked.pdf").read_bytes()
    (server.documents / "Scan.PDF").write_bytes(tiny_pdf(3))
    listed = {entry["name"]: entry for entry in client.call("document.list")["documents"]}
    assert listed["locked.pdf"]["problem"]["reason"] == "encrypted" and listed["Scan.PDF"]["pageCount"] == 3
    fetched = client.call("document.get", {"name": "locked.pdf"})
    assert base64.b64decode(fetched["data"]) == locked and fetched["sha256"] == hashlib.sha256(locked).hexdigest()


def test_drawing_get_writes_its_keys_sorted_like_every_other_reply(server, client):
    """A drawing's reply came in the encoder's dictionary order, which changes with each
    process's hash seed: two instances answered the same drawing with different bytes."""
    import json

    import zmq

    session = client.open_session()
    session.open()
    session.call("drawing.addStroke", dict(STROKE, points=[{"x": 1.5, "y": 2, "pressure": 0.25}, {"x": 3, "y": 4}]))
    session.add_text("hé", 5, 6, color="#aBcDeF")
    dealer = zmq.Context.instance().socket(zmq.DEALER)
    dealer.setsockopt(zmq.LINGER, 0)
    dealer.setsockopt(zmq.RCVTIMEO, 5000)
    dealer.connect(server.endpoint)
    try:
        dealer.send_multipart([b"", json.dumps({"id": 1, "method": "drawing.get", "session": session.id}).encode()])
        reply = dealer.recv_multipart()[-1]
    finally:
        dealer.close()
    orders = []
    json.loads(reply, object_pairs_hook=lambda pairs: orders.append([key for key, _ in pairs]) or dict(pairs))
    assert ["canRedo", "canUndo", "strokes", "texts"] in orders
    assert ["color", "points", "tool", "width"] in orders and ["pressure", "x", "y"] in orders
    assert all(keys == sorted(keys) for keys in orders), orders
