"""The schema conformance checks of conformance.py catch what they are there to catch."""

from __future__ import annotations

import hashlib
import json
import os

import pytest

import conformance
import schemas
from canvasbridge import CanvasClient, CanvasError, EventSubscriber
from pdfs import tiny_pdf

STROKE = {"tool": "pen", "color": "red", "width": 2, "points": [{"x": 1, "y": 1}]}


def test_installed_around_the_client_library():
    assert CanvasClient.request.__name__ == "checked_request"
    assert CanvasClient.exchange.__name__ == "checked_exchange"
    assert EventSubscriber.next.__name__ == "checked_next"


def test_a_live_exchange_is_counted(client):
    before = conformance.counts["replies"], conformance.counts["params accepted"]
    client.hello()
    assert (conformance.counts["replies"], conformance.counts["params accepted"]) == (before[0] + 1, before[1] + 1)


def test_a_reply_off_its_schema_fails():
    with pytest.raises(AssertionError, match="fails the schema"):
        conformance.check_exchange({"id": 1, "method": "canvas.state"}, {"id": 1, "result": {"state": "ajar"}})
    with pytest.raises(AssertionError, match="fails the schema"):
        conformance.check_exchange({"id": 1, "method": "drawing.addStroke", "params": {"width": True}},
                                   {"id": 1, "error": {"code": "INVALID_PARAMS", "message": "width: wrong type"}})


def test_params_taken_but_refused_by_the_schema_fail():
    with pytest.raises(AssertionError, match="took params its schema refuses"):
        conformance.check_exchange({"id": 1, "method": "drawing.addStroke", "params": dict(STROKE, width=0)},
                                   {"id": 1, "result": {"changed": True, "canUndo": True, "canRedo": False,
                                                        "strokes": 1, "texts": 0}})


def test_params_refused_but_taken_by_the_schema_fail():
    with pytest.raises(AssertionError, match="refused params its schema takes"):
        conformance.check_exchange({"id": 1, "method": "drawing.addStroke", "params": STROKE},
                                   {"id": 1, "error": {"code": "INVALID_PARAMS", "message": "?",
                                                       "data": {"field": "width"}}})


def test_an_event_off_its_schema_fails():
    with pytest.raises(AssertionError, match="event fails the schema"):
        conformance.check_event({"session": "s", "event": "canvas.result", "seq": 1,
                                 "data": {"action": "submitted", "hasContent": True, "cause": "client",
                                          "document": {"name": "a.pdf", "revision": 2, "pageCount": 1}}})


def test_a_request_off_the_envelope_schema_that_is_answered_fails():
    with pytest.raises(AssertionError, match="read a request its schema refuses"):
        conformance.check_exchange({"id": 1, "method": "nothing.here", "session": 7},
                                   {"id": 1, "error": {"code": "METHOD_NOT_FOUND", "message": "no method",
                                                       "data": {"method": "nothing.here"}}})


def test_a_request_on_the_envelope_schema_refused_as_invalid_fails():
    with pytest.raises(AssertionError, match="refused a request its schema takes"):
        conformance.check_exchange({"id": 1, "method": "hello"},
                                   {"id": 1, "error": {"code": "INVALID_REQUEST", "message": "?"}})
    # A session method without a session is refused though the envelope is valid: not a fault.
    conformance.check_exchange({"id": 1, "method": "canvas.state"},
                               {"id": 1, "error": {"code": "INVALID_REQUEST", "message": "canvas.state needs a session"}})


# Issue 28, item 1: null is the same as absent, in the envelope and in params, for the schemas too.
def test_null_params_and_session_are_answered_and_valid(client):
    before = conformance.counts["requests accepted"]
    for request in ({"id": "n1", "method": "hello", "params": None}, {"id": "n2", "method": "hello", "session": None}):
        assert client.request(request)["result"]["protocol"] == "canvas/1.9"
        assert schemas.validator("envelope.schema.json", "request").is_valid(request)
    assert conformance.counts["requests accepted"] == before + 2
    session = client.open_session()
    assert session.call("canvas.open", {"page": None})["state"] == "open"
    schemas.check_params("canvas.open", {"page": None})
    with pytest.raises(CanvasError) as refused:
        session.call("canvas.open", {"page": 0, "document": None})
    assert refused.value.code == "INVALID_PARAMS" and refused.value.data["field"] == "document"


# Issue 28, item 2: each nudge within its own range, and a refusal names the param at fault.
def test_edit_text_nudges_are_bounded_and_named(client):
    session = client.open_session()
    session.open()
    session.add_text("far", -1e6, 0)
    for change, field in (({"dx": 2000000.0}, "dx"), ({"dy": -1000001.0}, "dy"), ({"x": 1e6 + 1}, "x")):
        with pytest.raises(CanvasError) as refused:
            session.edit_text(0, **change)
        assert (refused.value.code, refused.value.data["field"]) == ("INVALID_PARAMS", field), change
    assert session.get_drawing()["texts"][0]["x"] == -1e6
    # In range, the nudge is taken; one that takes the corner out of range names the coordinate.
    assert session.edit_text(0, dx=2000000.0 / 2)["changed"] is True
    with pytest.raises(CanvasError) as refused:
        session.edit_text(0, x=1e6, dx=0.5)
    assert refused.value.data["field"] == "x"


# Issue 28, item 6: what §5 says is always there is required, and counts agree.
def test_hello_limits_are_all_required_and_page_counts_start_at_one(client):
    limits = client.hello()["limits"]
    hello = schemas.validator("methods.schema.json", "hello.result")
    for name in ("maxUploadBytes", "maxUploads", "maxGetBytes"):
        assert name in limits
        cut = {key: value for key, value in limits.items() if key != name}
        assert not hello.is_valid({"protocol": "canvas/1.8", "server": "s", "methods": [], "limits": cut,
                                   "idleTimeoutMs": 1, "security": "loopback"}), name
    summary = {"name": "a.pdf", "revision": 1, "pageCount": 0, "sha256": "0" * 64}
    assert not schemas.validator("methods.schema.json", "documentSummary").is_valid(summary)
    assert not schemas.validator("methods.schema.json", "document.info.result").is_valid(dict(summary, pages=[]))
    assert not schemas.validator("events.schema.json", "document.saved").is_valid(dict(summary, cause="document.flatten"))


def test_a_get_longer_than_max_get_bytes_is_refused_not_clamped(client, server):
    (server.documents / "a.pdf").write_bytes(tiny_pdf(1))
    limit = client.hello()["limits"]["maxGetBytes"]
    assert schemas.validator("methods.schema.json", "document.get.params").is_valid({"name": "a.pdf", "length": limit + 1})
    with pytest.raises(CanvasError) as refused:
        client.call("document.get", {"name": "a.pdf", "length": limit + 1})
    assert (refused.value.code, refused.value.data["field"]) == ("INVALID_PARAMS", "length")
    assert client.call("document.get", {"name": "a.pdf", "length": limit})["size"] == len(tiny_pdf(1))


# Issue 28, item 7: the ranges the spec now states.
def test_image_size_is_a_whole_number_from_1_to_max_image_side(client):
    side = client.hello()["limits"]["maxImageSide"]
    assert client.call("session.open", {"size": {"width": 100.0, "height": side}})["state"] == "closed"
    for size in ({"width": 0, "height": 1}, {"width": 1, "height": side + 1}, {"width": 1.5, "height": 1}):
        with pytest.raises(CanvasError) as refused:
            client.call("session.open", {"size": size})
        assert refused.value.code == "INVALID_PARAMS" and refused.value.data["field"].startswith("size."), size


def test_an_upload_of_zero_bytes_is_refused(client):
    with pytest.raises(CanvasError) as refused:
        client.call("document.upload.begin", {"name": "e.pdf", "size": 0, "sha256": hashlib.sha256(b"").hexdigest()})
    assert (refused.value.code, refused.value.data["field"]) == ("INVALID_PARAMS", "size")


def test_an_upload_onto_a_damaged_document_at_revision_1_makes_revision_2(client, server):
    (server.documents / "d.pdf").write_bytes(b"%PDF-1.4 not really")
    listed = client.call("document.list")["documents"]
    assert [entry["name"] for entry in listed] == ["d.pdf"] and "revision" not in listed[0]
    with pytest.raises(CanvasError) as stale:
        client.upload_document("d.pdf", tiny_pdf(2), expected_revision=2)
    assert stale.value.code == "CONFLICT" and stale.value.data["revision"] == 1
    saved = client.upload_document("d.pdf", tiny_pdf(2), expected_revision=1)
    assert (saved["revision"], saved["pageCount"]) == (2, 2)
    assert (server.documents / "d.pdf").read_bytes() == tiny_pdf(2)


# Issue 28, item 4: a part of exactly partBytes fits in as many frames as §5 reckons, no more.
def test_a_full_part_fits_in_the_frames_the_spec_reckons(client):
    limits = client.hello()["limits"]
    data = os.urandom(3 << 20)
    begun = client.call("document.upload.begin",
                        {"name": "f.pdf", "size": len(data), "sha256": hashlib.sha256(data).hexdigest()})
    part = begun["partBytes"]
    assert part == limits["maxMessageBytes"] - 5120 and limits["frameOverheadBytes"] == 64
    message = {"id": "part-1", "method": "document.upload.part", "params": {"upload": begun["upload"], "offset": 0}}
    head = json.dumps(message, separators=(",", ":")).encode("utf-8")
    fitting = (5120 - len(head)) // 64 - 1   # binary frames besides the JSON frame

    def frames(count):
        cuts = [part * i // count for i in range(count + 1)]
        return [head] + [data[a:b] for a, b in zip(cuts, cuts[1:])]

    too_many = client.exchange(frames(fitting + 1))
    assert too_many["error"]["code"] == "PAYLOAD_TOO_LARGE"
    assert too_many["error"]["data"]["size"] == part + len(head) + (fitting + 2) * 64
    assert client.call("document.upload.status", {"upload": begun["upload"]})["received"] == 0
    assert client.exchange(frames(fitting))["result"]["received"] == part
    client.call("document.upload.abort", {"upload": begun["upload"]})


# Issue 28 item 3, issue 27 deliver 1, issue 22 item 7: strokes in parts are transactions.
def part(points, continued=True, color="#FFD400", width=2, **extra):
    params = {"tool": "pen", "color": color, "width": width,
              "points": [{"x": float(x), "y": float(y)} for x, y in points], **extra}
    if continued:
        params["continued"] = True
    return params


def strokes_of(session):
    return [(stroke["color"], len(stroke["points"])) for stroke in session.get_drawing()["strokes"]]


def test_a_part_past_the_stroke_limit_is_refused_at_once_and_ends_the_stroke(client):
    limit = client.hello()["limits"]["maxPointsPerStroke"]
    session = client.open_session()
    session.open()
    half = [(i % 500, i // 500) for i in range(limit // 2 + 1)]
    assert session.call("drawing.addStroke", part(half))["pendingPoints"] == len(half)
    with pytest.raises(CanvasError) as refused:
        session.call("drawing.addStroke", part(half))
    assert refused.value.code == "PAYLOAD_TOO_LARGE" and refused.value.data == {
        "field": "points", "size": 2 * len(half), "limit": limit}
    # Nothing waits: the next stroke is a stroke of its own, not the end of the refused one.
    assert session.call("drawing.addStroke", part([(500, 700), (520, 720)], continued=False))["strokes"] == 1
    assert strokes_of(session) == [("#FFD400", 2)]


def test_a_part_past_the_drawing_limit_is_refused_at_once(client):
    limits = client.hello()["limits"]
    session = client.open_session()
    session.open()
    full = [(i % 1000, i // 1000) for i in range(limits["maxPointsPerStroke"])]
    for _ in range(limits["maxPointsPerDrawing"] // len(full)):
        session.call("drawing.addStroke", part(full, continued=False))
    with pytest.raises(CanvasError) as refused:
        session.call("drawing.addStroke", part([(1, 1)]))
    assert refused.value.code == "PAYLOAD_TOO_LARGE" and refused.value.data == {
        "field": "points", "size": limits["maxPointsPerDrawing"] // len(full) * len(full) + 1,
        "limit": limits["maxPointsPerDrawing"]}
    session.undo()
    assert session.call("drawing.addStroke", part([(1, 1)]))["pendingPoints"] == 1


def test_parts_agree_on_colour_as_a_colour_and_a_disagreeing_part_ends_the_stroke(client):
    session = client.open_session()
    session.open()
    session.call("drawing.addStroke", part([(1, 1)], color="#FFD400", width=2))
    session.call("drawing.addStroke", part([(2, 2)], color="#ffd400", width=2.0, unknown="x" * 1000))
    assert session.call("drawing.addStroke", part([(3, 3)], continued=False, color="#FfD400"))["strokes"] == 1
    assert strokes_of(session) == [("#FFD400", 3)]
    session.call("drawing.addStroke", part([(1, 1)], color="yellow"))
    session.call("drawing.addStroke", part([(2, 2)], color="#FFFF00"))
    with pytest.raises(CanvasError) as refused:
        session.call("drawing.addStroke", part([(3, 3)], color="red"))
    assert (refused.value.code, refused.value.data["field"]) == ("INVALID_PARAMS", "continued")
    assert session.call("drawing.addStroke", part([(4, 4)], continued=False, color="red"))["strokes"] == 2
    assert strokes_of(session) == [("#FFD400", 3), ("red", 1)]


KEEP = [("canvas.state", None), ("drawing.get", None), ("document.list", None),
        ("drawing.moveText", {"index": 5, "x": 1, "y": 1})]   # refused: NOT_FOUND
DROP = [("canvas.open", {}), ("canvas.initialize", None), ("pencil.configure", {}),
        ("drawing.addText", {"text": "a", "x": 1, "y": 1, "fontSize": 14, "color": "black"}), ("drawing.undo", None), ("drawing.clear", None),
        ("drawing.erase", {"x": 900, "y": 900, "radius": 1, "mode": "stroke"})]


@pytest.mark.parametrize("method,params", KEEP + DROP, ids=[m for m, _ in KEEP + DROP])
def test_spec_5_says_which_requests_drop_waiting_parts(client, method, params):
    session = client.open_session()
    session.open()
    session.call("drawing.addStroke", part([(1, 1), (2, 2)]))
    try:
        session.call(method, params)
    except CanvasError as error:
        assert (method, error.code) == ("drawing.moveText", "NOT_FOUND")
    session.call("drawing.addStroke", part([(3, 3)], continued=False))
    kept = (method, params) in KEEP
    assert strokes_of(session) == [("#FFD400", 3 if kept else 1)], method


def test_a_request_too_large_to_read_is_no_part_and_ends_nothing(client):
    limit = client.hello()["limits"]["maxMessageBytes"]
    session = client.open_session()
    session.open()
    session.call("drawing.addStroke", part([(1, 1), (2, 2)]))
    huge = {"id": "big", "method": "drawing.addStroke", "session": session.id,
            "params": dict(part([(3, 3)]), padding="x" * limit)}
    refused = client.exchange([json.dumps(huge).encode()])
    assert refused["id"] == "big" and refused["error"]["code"] == "PAYLOAD_TOO_LARGE"
    session.call("drawing.addStroke", part([(4, 4)], continued=False))
    assert strokes_of(session) == [("#FFD400", 3)]
