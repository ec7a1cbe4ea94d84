"""Where a client written from protocol/ alone still had to guess (issue 33's gaps A-L), each
now decided in the spec and the schemas and held here against a real canvasd: the limits
`hello` must send, `size` on every over-limit refusal, which problems refuse a fetch, which
refused requests keep waiting stroke parts, what a page-ink refusal carries, every
`UNAVAILABLE` reason, the health endpoint's paths and metric names, and the wording of a
`CONFLICT` for a revision not made yet."""

from __future__ import annotations

import base64
import hashlib
import json
import os
import re
import socket
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from canvasbridge import CanvasClient, CanvasError
from conftest import ROOT, Server
from pdfs import tiny_pdf
import schemas

SPEC = (ROOT / "protocol" / "spec.md").read_text(encoding="utf-8")
HEALTH = (ROOT / "protocol" / "health.md").read_text(encoding="utf-8")


def refusal(call) -> CanvasError:
    with pytest.raises(CanvasError) as refused:
        call()
    return refused.value


def section(title: str) -> str:
    """The text of the spec under a heading, up to the next heading."""
    start = SPEC.index(title)
    end = SPEC.find("\n#", start + len(title))
    return SPEC[start:end if end >= 0 else None]


# A: every limit hello sends is required by the schema and listed by the spec.

def test_every_limit_hello_sends_is_required_and_listed(client):
    sent = set(client.hello()["limits"])
    definition = schemas._DOCUMENTS["methods.schema.json"]["$defs"]["hello.result"]["properties"]["limits"]
    assert set(definition["required"]) == sent == set(definition["properties"])
    listed = section("### `hello`").split("`limits` (", 1)[1].split(": every one", 1)[0]
    assert set(re.findall(r"`(\w+)`", listed)) == sent


# B and H: every PAYLOAD_TOO_LARGE carries `size` beside `limit`, and `field` but where §2.3
# says not.

def over(refused: CanvasError, field) -> dict:
    data = refused.data
    assert refused.code == "PAYLOAD_TOO_LARGE", (refused.code, data)
    assert isinstance(data.get("size"), int) and data["size"] > data["limit"], data
    assert data.get("field") == field, data
    return data


def stroke(points: int, x: float = 0) -> dict:
    return {"tool": "pen", "color": "blue", "width": 2, "points": [{"x": x + i % 500, "y": i // 500} for i in range(points)]}


def text(length: int = 2) -> dict:
    return {"text": "t" * length, "x": 5, "y": 5, "fontSize": 12, "color": "black"}


def test_every_over_limit_refusal_of_a_request_carries_its_size(client):
    limits = client.hello()["limits"]
    big = {"id": 1, "method": "hello", "params": {"padding": "x" * limits["maxMessageBytes"]}}
    reply = client.request(big)
    assert reply["error"]["code"] == "PAYLOAD_TOO_LARGE" and reply["error"]["data"]["size"] > limits["maxMessageBytes"]
    assert "field" not in reply["error"]["data"]

    session = client.open_session()
    session.open()
    over(refusal(lambda: session.call("drawing.addStroke", stroke(limits["maxPointsPerStroke"] + 1))), "points")
    over(refusal(lambda: session.call("drawing.addStroke", dict(stroke(limits["maxPointsPerStroke"] + 1), continued=True))),
         "points")
    over(refusal(lambda: session.call("drawing.addText", text(limits["maxTextLength"] + 1))), "text")
    session.call("drawing.addText", text())
    over(refusal(lambda: session.call("drawing.editText", {"index": 0, "text": "t" * (limits["maxTextLength"] + 1)})), "text")

    data = over(refusal(lambda: client.call("document.upload.begin", {
        "name": "u.pdf", "size": limits["maxUploadBytes"] + 1, "sha256": "0" * 64})), "size")
    assert data["size"] == limits["maxUploadBytes"] + 1
    begun = client.call("document.upload.begin", {"name": "u.pdf", "size": 10, "sha256": "0" * 64})
    data = over(refusal(lambda: client.call("document.upload.part", {"upload": begun["upload"], "offset": 0},
                                            frames=[b"x" * 11])), "size")
    assert (data["size"], data["limit"]) == (11, 10)
    data = over(refusal(lambda: client.call("document.upload.part", {"upload": begun["upload"], "offset": 0},
                                            frames=[b"x" * (begun["partBytes"] + 1)])), "part")
    assert data["size"] == begun["partBytes"] + 1


@pytest.fixture
def roomy(tmp_path: Path):
    """A server whose requests may be large enough to carry a whole drawing past its limits."""
    running = Server(tmp_path, ["--max-message-bytes", str(64 << 20), "--log-level", "error"])
    yield running
    running.stop()


def test_every_over_limit_refusal_of_a_drawing_carries_its_size(roomy):
    with roomy.client(timeout=60) as client:
        limits = client.hello()["limits"]
        session = client.open_session()
        session.open()
        full = stroke(limits["maxPointsPerStroke"])
        for _ in range(limits["maxPointsPerDrawing"] // limits["maxPointsPerStroke"]):
            session.call("drawing.addStroke", full)
        data = over(refusal(lambda: session.call("drawing.addStroke", stroke(1))), "points")
        assert data["size"] == limits["maxPointsPerDrawing"] // limits["maxPointsPerStroke"] * limits["maxPointsPerStroke"] + 1
        session.call("drawing.clear")
        for _ in range(limits["maxStrokesPerDrawing"]):
            session.call("drawing.addStroke", stroke(1))
        data = over(refusal(lambda: session.call("drawing.addStroke", stroke(1))), "strokes")
        assert data["size"] == limits["maxStrokesPerDrawing"] + 1
        for _ in range(limits["maxTextsPerDrawing"]):
            session.call("drawing.addText", text())
        data = over(refusal(lambda: session.call("drawing.addText", text())), "texts")
        assert data["size"] == limits["maxTextsPerDrawing"] + 1

        (roomy.documents / "d.pdf").write_bytes(tiny_pdf(1))

        def flatten(drawing: dict):
            return lambda: client.call("document.flatten", {"name": "d.pdf", "page": 0, "drawing": drawing})

        one = stroke(1)
        data = over(refusal(flatten({"strokes": [one] * (limits["maxStrokesPerDrawing"] + 1)})), "drawing.strokes")
        assert data["size"] == limits["maxStrokesPerDrawing"] + 1
        data = over(refusal(flatten({"texts": [text()] * (limits["maxTextsPerDrawing"] + 1)})), "drawing.texts")
        assert data["size"] == limits["maxTextsPerDrawing"] + 1
        strokes = [full] * (limits["maxPointsPerDrawing"] // limits["maxPointsPerStroke"]) + [one]
        data = over(refusal(flatten({"strokes": strokes})), "drawing.strokes")
        assert data["size"] == sum(len(s["points"]) for s in strokes)
        data = over(refusal(flatten({"strokes": [one, stroke(limits["maxPointsPerStroke"] + 1)]})), "drawing.strokes[1].points")
        assert data["size"] == limits["maxPointsPerStroke"] + 1
        data = over(refusal(flatten({"texts": [text(limits["maxTextLength"] + 1)]})), "drawing.texts[0].text")
        assert data["size"] == limits["maxTextLength"] + 1

        # H: a page's ink past maxPointsPerPage, every save's together.
        whole = {"strokes": [full] * (limits["maxPointsPerDrawing"] // limits["maxPointsPerStroke"])}
        stored = 0
        while stored + limits["maxPointsPerDrawing"] <= limits["maxPointsPerPage"]:
            flatten(whole)()
            stored += limits["maxPointsPerDrawing"]
        data = over(refusal(flatten({"strokes": [stroke(limits["maxPointsPerPage"] - stored + 1)]})
                            if stored < limits["maxPointsPerPage"] else flatten({"strokes": [one]})), "drawing")
        assert set(data) == {"field", "name", "page", "pageInk", "size", "limit"}
        assert (data["name"], data["page"], data["pageInk"], data["limit"]) == ("d.pdf", 0, stored, limits["maxPointsPerPage"])


def test_the_schema_requires_size_of_every_over_limit_refusal():
    reply = {"id": 1, "error": {"code": "PAYLOAD_TOO_LARGE", "message": "m", "data": {"field": "texts", "limit": 500}}}
    with pytest.raises(Exception):
        schemas.check_reply("drawing.addText", reply)
    reply["error"]["data"]["size"] = 501
    schemas.check_reply("drawing.addText", reply)


# F: which problems refuse a document.get.

def test_a_fetch_is_refused_for_what_is_not_read_and_served_for_what_is_damaged(server, client):
    documents = server.documents
    (documents / "broken.pdf").write_bytes(b"%PDF-1.4\nnot a PDF at all\n")
    (documents / "real.pdf").write_bytes(tiny_pdf(1))
    os.symlink(documents / "real.pdf", documents / "link.pdf")
    with open(documents / "huge.pdf", "wb") as huge:
        huge.truncate((1 << 30) + 1)   # sparse: a few bytes on disk
    listed = {entry["name"]: entry.get("problem", {}).get("reason") for entry in client.call("document.list")["documents"]}
    assert (listed["broken.pdf"], listed["link.pdf"], listed["huge.pdf"]) == ("damaged", "notRegularFile", "tooLarge")
    fetched = client.call("document.get", {"name": "broken.pdf"})
    assert base64.b64decode(fetched["data"]) == (documents / "broken.pdf").read_bytes()
    for name, reason in (("link.pdf", "notRegularFile"), ("huge.pdf", "tooLarge")):
        refused = refusal(lambda: client.call("document.get", {"name": name}))
        assert (refused.code, refused.data["reason"], refused.data["name"]) == ("UNAVAILABLE", reason, name)
    assert "`notRegularFile`" in section("### `document.get`") and "`tooLarge`" in section("### `document.get`")


# G: a refused request of any method keeps the waiting parts.

def test_a_refused_request_keeps_the_waiting_stroke_parts(client):
    session = client.open_session()
    session.open()
    session.call("drawing.addStroke", dict(stroke(3), continued=True))
    assert refusal(lambda: session.call("drawing.moveText", {"index": 4, "x": 1, "y": 1})).code == "NOT_FOUND"
    assert refusal(lambda: session.call("drawing.erase", {"x": 1, "y": 1, "radius": -1, "mode": "stroke"})).code == "INVALID_PARAMS"
    assert refusal(lambda: session.call("canvas.finishTransition")).code == "INVALID_STATE"
    done = session.call("drawing.addStroke", stroke(2, x=600))
    assert (done["changed"], done["strokes"]) == (True, 1)
    assert len(session.call("drawing.get")["strokes"][0]["points"]) == 5
    # A request that runs drops them, even one that changes nothing.
    session.call("drawing.addStroke", dict(stroke(3), continued=True))
    session.call("canvas.initialize")
    session.call("drawing.addStroke", stroke(2, x=600))
    assert [len(s["points"]) for s in session.call("drawing.get")["strokes"]] == [5, 2]


# I: every UNAVAILABLE reason is in §2.3's table and the schema, with the `limit` both say.

def unavailable_reasons_in_spec() -> set:
    table = SPEC.split("Every `reason` of `UNAVAILABLE`", 1)[1].split("\n\n", 2)[1]
    reasons = set()
    for row in table.splitlines()[2:]:
        reasons |= set(re.findall(r"`(\w+)`", row.split("|")[1]))
    return reasons


def test_the_spec_and_the_schema_list_the_same_unavailable_reasons():
    rules = schemas._DOCUMENTS["envelope.schema.json"]["$defs"]["failure"]["properties"]["error"]["allOf"]
    (rule,) = [r for r in rules if r["if"]["properties"]["code"]["const"] == "UNAVAILABLE"]
    assert set(rule["then"]["properties"]["data"]["properties"]["reason"]["enum"]) == unavailable_reasons_in_spec()
    # Every reason canvasd's sources send is one of them.
    sources = "\n".join(p.read_text(encoding="utf-8") for p in (ROOT / "Sources").rglob("*.swift"))
    sent = set(re.findall(r'\.unavailable,[^\n]*"reason": "(\w+)"', sources))
    sent |= set(re.findall(r'\.unreadable\(name: \w+, reason: "(\w+)"', sources))
    assert sent and sent <= unavailable_reasons_in_spec(), sent - unavailable_reasons_in_spec()


def test_session_limits_answer_their_reason_and_limit(tmp_path):
    server = Server(tmp_path / "a", ["--max-sessions-per-client", "1", "--max-sessions-per-owner", "2"])
    try:
        with server.client() as first, server.client() as second, server.client() as third:
            first.call("session.open")
            refused = refusal(lambda: first.call("session.open"))
            assert (refused.code, refused.data) == ("UNAVAILABLE", {"reason": "clientSessions", "limit": 1})
            second.call("session.open")
            refused = refusal(lambda: third.call("session.open"))
            assert (refused.code, refused.data) == ("UNAVAILABLE", {"reason": "ownerSessions", "limit": 2})
    finally:
        server.stop()
    server = Server(tmp_path / "b", ["--max-sessions", "1"])
    try:
        with server.client() as first, server.client() as second:
            first.call("session.open")
            refused = refusal(lambda: second.call("session.open"))
            assert (refused.code, refused.data) == ("UNAVAILABLE", {"reason": "serverSessions", "limit": 1})
    finally:
        server.stop()
    # The schema holds these to their `limit`.
    with pytest.raises(Exception):
        schemas.check_reply("session.open", {"id": 1, "error": {"code": "UNAVAILABLE", "message": "m",
                                                                 "data": {"reason": "ownerSessions"}}})


# J: the health endpoint's paths, codes and metric names, as protocol/health.md gives them.

def get(port: int, path: str):
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=5) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, error.read().decode()


def test_the_health_endpoint_is_as_protocol_describes_it(tmp_path):
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    server = Server(tmp_path, ["--health-endpoint", f"127.0.0.1:{port}", "--instance", "gaps-1"])
    try:
        with server.client() as client:
            client.call("session.open")
        assert get(port, "/livez") == (200, "ok\n")
        assert get(port, "/healthz") == (200, "ok\n")
        assert get(port, "/readyz") == (200, "ready\n")
        assert get(port, "/nowhere")[0] == 404
        time.sleep(1.2)   # the loop publishes what it counted once a second; a family appears with its first sample
        status, metrics = get(port, "/metrics")
        assert status == 200
    finally:
        server.stop()
    served = dict(re.findall(r"^# TYPE (\w+) (\w+)$", metrics, flags=re.M))
    documented = dict(re.findall(r"^\| `(canvasd_\w+)` \| (\w+) \|", HEALTH, flags=re.M))
    assert served == documented
    assert 'canvasd_info{instance="gaps-1"} 1' in metrics
    for path in ("/livez", "/healthz", "/readyz", "/metrics"):
        assert f"`{path}`" in HEALTH
    assert "health.md" in SPEC.split("## 1.", 1)[0]


# K: cases with documents need a fresh folder, and the README of the vectors says so.

def test_the_vectors_readme_says_documents_cases_need_a_fresh_folder():
    readme = (ROOT / "protocol" / "vectors" / "README.md").read_text(encoding="utf-8")
    entry = readme.split("- `documents` (optional)", 1)[1].split("\n- ", 1)[0]
    assert "fresh" in entry


# L: an expectedRevision past the current one is a CONFLICT that does not say "saved since".

def test_a_revision_not_made_yet_is_not_called_saved_since(server, client):
    data = tiny_pdf(1)
    (server.documents / "d.pdf").write_bytes(data)
    refused = refusal(lambda: client.call("document.upload.begin", {
        "name": "d.pdf", "size": len(data), "sha256": hashlib.sha256(data).hexdigest(), "expectedRevision": 5}))
    assert (refused.code, refused.data) == ("CONFLICT", {"name": "d.pdf", "expectedRevision": 5, "revision": 1})
    assert "saved since" not in str(refused) and "no revision 5" in str(refused)
    drawing = {"strokes": [stroke(2)]}
    client.call("document.flatten", {"name": "d.pdf", "page": 0, "drawing": drawing})
    refused = refusal(lambda: client.call("document.flatten", {"name": "d.pdf", "page": 0, "drawing": drawing,
                                                                "expectedRevision": 1}))
    assert refused.data["revision"] == 2 and "saved since" in str(refused)


# C: a revision number is handed out once per name, for good; the one way to start again at 1
# is to remove the history's folder by hand, and a log removed alone is refused.

def test_revision_numbers_are_never_handed_out_again(server, client):
    documents = server.documents
    (documents / "d.pdf").write_bytes(tiny_pdf(1))
    client.call("document.flatten", {"name": "d.pdf", "page": 0, "drawing": {"strokes": [stroke(2)]}})
    (documents / "d.pdf").unlink()
    (documents / "d.pdf").write_bytes(tiny_pdf(2))
    assert client.call("document.info", {"name": "d.pdf"})["revision"] == 3
    assert [r["revision"] for r in client.call("document.revisions", {"name": "d.pdf"})["revisions"]] == [1, 2, 3]
    (documents / ".canvas-revisions" / "d.pdf" / "history.log").unlink()
    refused = refusal(lambda: client.call("document.info", {"name": "d.pdf"}))
    assert (refused.code, refused.data["reason"]) == ("UNAVAILABLE", "damaged")
    assert "handed out once per name, for good" in section("### `document.revisions`")


# Issue 44: what a second client written from protocol/ alone still had to guess (M-R), each
# now stated in the spec and the schemas and held here against a real canvasd.

from canvasbridge import EventSubscriber  # noqa: E402


def events_of(subscriber: EventSubscriber) -> list:
    return [(event.event, event.data) for event in subscriber.drain()]


# M: drawing.erase's mode is required; more generally a param without `?` is.

def test_an_erase_without_a_mode_is_refused_and_changes_nothing(server, client):
    session = client.open_session()
    session.open()
    session.call("drawing.addStroke", stroke(3))
    watch = EventSubscriber(server.events, session.id + ".")
    watch.ready()
    erase = {"x": 1, "y": 0, "radius": 5}
    for params in (erase, dict(erase, mode=None), dict(erase, mode="object")):
        refused = refusal(lambda: session.call("drawing.erase", params))
        assert (refused.code, refused.data) == ("INVALID_PARAMS", {"field": "mode"}), params
        assert not schemas.validator("methods.schema.json", "drawing.erase.params").is_valid(params)
    assert session.state()["tool"] == {"current": "pen", "previous": "eraser"}
    assert session.call("drawing.get")["strokes"] == [stroke(3)]
    assert events_of(watch) == []
    watch.close()
    drawing = section("### `drawing.addStroke`")
    assert "there is no default mode" in drawing and '`field: "mode"`' in drawing
    assert "required" in schemas._DOCUMENTS["methods.schema.json"]["$defs"]["drawing.erase.params"]["properties"]["mode"]["description"]


def test_every_required_param_absent_or_null_is_invalid_params_naming_it(server, client):
    """§5: a param is required unless marked `?`; absent or `null`, it is INVALID_PARAMS naming
    it. Every `required` of every params schema, against the server."""
    data = tiny_pdf(1)
    (server.documents / "d.pdf").write_bytes(data)
    session = client.open_session()
    session.open()
    session.call("drawing.addText", text())
    digest = hashlib.sha256(data).hexdigest()
    upload = client.call("document.upload.begin", {"name": "u.pdf", "size": len(data), "sha256": digest})["upload"]
    valid = {
        "drawing.addStroke": stroke(1), "drawing.addText": text(), "drawing.moveText": {"index": 0, "x": 1, "y": 1},
        "drawing.erase": {"x": 1, "y": 1, "radius": 2, "mode": "stroke"}, "drawing.editText": {"index": 0, "x": 3},
        "document.info": {"name": "d.pdf"}, "document.revisions": {"name": "d.pdf"}, "document.get": {"name": "d.pdf"},
        "document.flatten": {"name": "d.pdf", "page": 0, "drawing": {"strokes": [stroke(1)]}},
        "document.restore": {"name": "d.pdf", "revision": 1},
        "document.upload.begin": {"name": "v.pdf", "size": len(data), "sha256": digest},
        "document.upload.part": {"upload": upload, "offset": 0}, "document.upload.status": {"upload": upload},
        "document.upload.commit": {"upload": upload}, "document.upload.abort": {"upload": upload},
    }
    definitions = schemas._DOCUMENTS["methods.schema.json"]["$defs"]

    def required_of(definition: dict) -> list:
        parts = [definition] + definition.get("allOf", [])
        names = [name for part in parts for name in part.get("required", [])]
        return names + [name for part in parts if "$ref" in part
                        for name in required_of(definitions[part["$ref"].split("/")[-1]])]

    checked = 0
    for method, params in valid.items():
        required = required_of(definitions[f"{method}.params"])
        assert required, method
        for name in required:
            for value in ("absent", None):
                sent = {key: item for key, item in params.items() if key != name}
                if value is None:
                    sent[name] = None
                call = (lambda: session.call(method, sent)) if method.startswith("drawing.") else \
                    (lambda: client.call(method, sent, frames=[data] if method.endswith(".part") else ()))
                refused = refusal(call)
                assert (refused.code, refused.data.get("field")) == ("INVALID_PARAMS", name), (method, name, value, refused)
                checked += 1
    assert checked >= 50
    assert "A param is\nrequired unless it is marked `?`" in SPEC


# N: a fresh session's tools, and what changes them.

def test_a_new_session_holds_the_pen_with_the_eraser_before_it(server, client):
    fresh = client.open_session()
    assert fresh.state()["tool"] == {"current": "pen", "previous": "eraser"}
    # The first switchPrevious reaches the eraser, as on an iPad; switchEraser goes there and back.
    swapper = client.open_session(policy="respectPreference", preferred_tap_action="switchPrevious")
    swapper.open()
    tapped = swapper.double_tap()
    assert (tapped["outcome"], tapped["tool"]) == ("switchPrevious", {"current": "eraser", "previous": "pen"})
    toggler = client.open_session(policy="respectPreference", preferred_tap_action="switchEraser")
    toggler.open()
    assert toggler.double_tap()["tool"] == {"current": "eraser", "previous": "pen"}
    assert toggler.double_tap()["tool"] == {"current": "pen", "previous": "eraser"}
    # The tools are the session's: kept through the canvas's end and a new open, not undone.
    session = client.open_session()
    session.open()
    session.call("drawing.addStroke", dict(stroke(2), tool="highlighter"))
    seen = [session.state()["tool"]]
    session.call("drawing.undo")
    seen.append(session.state()["tool"])
    session.cancel()
    session.open()
    seen.append(session.state()["tool"])
    assert seen == [{"current": "highlighter", "previous": "pen"}] * 3
    assert all(tools["current"] != tools["previous"] for tools in seen)
    assert '{"current": "pen", "previous": "eraser"}' in section("### `canvas.state`")
    assert "pen" in schemas._DOCUMENTS["methods.schema.json"]["$defs"]["tools"]["description"]


# O: an erase that touches nothing still takes the eraser and says so.

def test_an_erase_that_touches_nothing_takes_the_eraser_and_publishes_it(server, client):
    session = client.open_session()
    session.open()
    session.call("drawing.addStroke", dict(stroke(2), tool="highlighter"))
    watch = EventSubscriber(server.events, session.id + ".")
    watch.ready()
    before = session.state()
    erased = session.call("drawing.erase", {"x": 900, "y": 900, "radius": 1, "mode": "partial"})
    assert erased == {"changed": False, "canUndo": True, "canRedo": False, "strokes": 1, "texts": 0}
    assert events_of(watch) == [("pencil.toolChanged", {"tool": {"current": "eraser", "previous": "highlighter"}})]
    after = session.state()
    assert after["tool"] == {"current": "eraser", "previous": "highlighter"}
    assert after["seq"] == before["seq"] + 1
    # No undo step was made: the undo takes back the stroke, and leaves the eraser in hand.
    undone = session.call("drawing.undo")
    assert (undone["strokes"], session.state()["tool"]["current"]) == (0, "eraser")
    # The eraser already in hand: nothing to publish. A refused erase changes no tool.
    session.call("drawing.erase", {"x": 900, "y": 900, "radius": 1, "mode": "stroke"})
    refusal(lambda: session.call("drawing.erase", {"x": 900, "y": 900, "radius": 0, "mode": "stroke"}))
    session.call("drawing.addStroke", dict(stroke(2), continued=True))   # a part: no tool yet
    assert session.state()["tool"]["current"] == "eraser"
    assert events_of(watch) == []
    session.call("drawing.addStroke", stroke(1, x=3))
    assert events_of(watch) == [("pencil.toolChanged", {"tool": {"current": "pen", "previous": "eraser"}})]
    watch.close()
    assert "still takes the eraser in hand" in section("### `drawing.addStroke`")


# P: the documents feed's envelope `session` and `seq`, against `data.session`.

def test_the_documents_feed_has_its_own_session_name_and_count(tmp_path):
    server = Server(tmp_path / "a")
    (server.documents / "d.pdf").write_bytes(tiny_pdf(1))
    drawing = {"strokes": [stroke(2)]}
    try:
        with server.client() as client:
            feed = EventSubscriber(server.events, "documents.")
            feed.ready()
            session = client.open_session()
            own = EventSubscriber(server.events, session.id + ".")
            own.ready()
            client.call("document.flatten", {"name": "d.pdf", "page": 0, "drawing": drawing})
            session.call("document.flatten", {"name": "d.pdf", "page": 0, "drawing": drawing})
            session.open(document="d.pdf")
            session.call("drawing.addStroke", stroke(2))
            session.submit()
            announced = feed.drain()
            mine = own.drain()
            last = session.state()["seq"]
        feed.close()
        own.close()
    finally:
        server.stop()
    assert [(e.topic, e.session, e.seq) for e in announced] == [("documents.document.saved", "documents", n) for n in (1, 2, 3)]
    assert [e.data.get("session") for e in announced] == [None, session.id, session.id]
    assert [e.data["cause"] for e in announced] == ["document.flatten", "document.flatten", "canvas.submit"]
    # The submit's own document.saved: the session's envelope and count, no data.session.
    (saved,) = [e for e in mine if e.event == "document.saved"]
    assert (saved.topic, saved.session, "session" in saved.data) == (f"{session.id}.document.saved", session.id, False)
    assert [e.seq for e in mine] == list(range(1, len(mine) + 1)) and saved.seq == last == len(mine)
    assert {k: v for k, v in saved.data.items()} == {k: v for k, v in announced[2].data.items() if k != "session"}
    # A canvasd started again on the same folder counts its feed from 1 again.
    again = Server(tmp_path / "b", documents=server.documents)
    try:
        with again.client() as client:
            feed = EventSubscriber(again.events, "documents.")
            feed.ready()
            client.call("document.flatten", {"name": "d.pdf", "page": 0, "drawing": drawing})
            assert [(e.session, e.seq) for e in feed.drain()] == [("documents", 1)]
            feed.close()
    finally:
        again.stop()
    feed_text = SPEC.split("The two frames differ:", 1)[1].split("\n### ", 1)[0]
    assert '`"documents"`' in feed_text and "starts again at 1" in feed_text and "`data.session`" in feed_text
    assert '"documents"' in schemas._DOCUMENTS["envelope.schema.json"]["$defs"]["event"]["properties"]["session"]["description"]


# Q: the schemas are loaded together by $id, and each method's whole reply has a definition.

def registry_by_id():
    """The three schemas as a client must load them: each under its $id, and nothing else."""
    from referencing import Registry, Resource
    return Registry().with_resources([(doc["$id"], Resource.from_contents(doc)) for doc in schemas._DOCUMENTS.values()])


def reply_validator(registry, method: str):
    from jsonschema import Draft202012Validator
    methods = schemas._DOCUMENTS["methods.schema.json"]["$id"]
    return Draft202012Validator({"$ref": f"{methods}#/$defs/{method}.reply"}, registry=registry)


def test_every_method_has_its_reply_and_the_schemas_load_by_id(server, client):
    served = client.hello()["methods"]
    definitions = schemas._DOCUMENTS["methods.schema.json"]["$defs"]
    for method in served:
        assert {f"{method}.params", f"{method}.result", f"{method}.reply"} <= set(definitions), method
    assert {name.rsplit(".", 1)[0] for name in definitions if name.endswith(".reply")} == set(served)
    assert set(schemas._DOCUMENTS) == {"envelope.schema.json", "methods.schema.json", "events.schema.json"}
    registry = registry_by_id()
    (server.documents / "d.pdf").write_bytes(tiny_pdf(1))
    session = client.open_session()
    requests = [("hello", {}, None), ("canvas.state", {}, session.id), ("canvas.open", {}, session.id),
                ("drawing.addStroke", stroke(2), session.id), ("drawing.get", {}, session.id),
                ("pencil.doubleTap", {}, session.id), ("canvas.submit", {"imageData": True}, session.id),
                ("document.list", {}, None), ("document.info", {"name": "d.pdf"}, None),
                ("document.info", {"name": "none.pdf"}, None), ("canvas.minimize", {}, session.id),
                ("drawing.erase", {"x": 1, "y": 1, "radius": 1}, session.id)]
    for index, (method, params, named) in enumerate(requests):
        message = {"id": f"q{index}", "method": method, "params": params}
        if named:
            message["session"] = named
        reply = client.request(message)
        reply_validator(registry, method).validate(reply)
        if "result" in reply and method != "hello":
            # Another method's result is not this one's reply.
            assert not reply_validator(registry, "hello").is_valid(reply), method
    # Loaded alone, or by file name, the references between the files do not resolve.
    from jsonschema import Draft202012Validator
    from referencing import Registry, Resource
    from referencing.exceptions import Unresolvable
    alone = Registry().with_resource(schemas._DOCUMENTS["methods.schema.json"]["$id"],
                                     Resource.from_contents(schemas._DOCUMENTS["methods.schema.json"]))
    with pytest.raises(Unresolvable):
        reply_validator(alone, "hello").is_valid({"id": 1, "result": {}})
    events = schemas._DOCUMENTS["events.schema.json"]
    without_methods = Registry().with_resource(events["$id"], Resource.from_contents(events))
    with pytest.raises(Unresolvable):
        Draft202012Validator({"$ref": f"{events['$id']}#/$defs/pencil.toolChanged"}, registry=without_methods).is_valid(
            {"tool": {"current": "pen", "previous": "eraser"}})
    schemas_text = section("### 2.6 Schemas")
    for document in schemas._DOCUMENTS.values():
        name = document["$id"].rsplit("/", 1)[1]
        assert f"`…/{name}`" in schemas_text or f"`{document['$id']}`" in schemas_text, name
    assert "`methods.schema.json#/$defs/<method>.reply`" in schemas_text


# R: which replies and events carry imageData.

def test_result_images_are_where_the_spec_says(server, client):
    with_images = client.open_session(result_images=True)
    without = client.open_session()
    watch = {s.id: EventSubscriber(server.events, s.id + ".canvas.result") for s in (with_images, without)}
    for subscriber in watch.values():
        subscriber.ready()

    def result_event(session) -> dict:
        (event,) = [data for name, data in events_of(watch[session.id])]
        return event

    for session in (with_images, without):
        session.open()
        session.call("drawing.addStroke", stroke(3))
        asked = session.call("canvas.minimize", {"imageData": True})
        assert asked["imageData"].startswith("iVBORw0KGgo") and "imageOmitted" not in asked
        event = result_event(session)
        assert ("imageData" in event) == (session is with_images) and "imageOmitted" not in event
        session.open()
        for value in (False, None):
            unasked = session.call("canvas.minimize", {"imageData": value})
            assert "imageData" not in unasked and "imageOmitted" not in unasked
            assert ("imageData" in result_event(session)) == (session is with_images)
            session.open()
        # A double-tap's minimize: never an image in the reply; the event as for any result.
        tapped = session.double_tap()
        assert tapped["outcome"] == "minimized" and set(tapped["canvasResult"]) == {"action", "hasContent"}
        assert ("imageData" in result_event(session)) == (session is with_images)
    for subscriber in watch.values():
        subscriber.close()
    tap = {"outcome": "minimized", "state": "minimized",
           "canvasResult": {"action": "minimized", "hasContent": True, "imageData": "iVBORw0KGgo="}}
    assert not schemas.validator("methods.schema.json", "pencil.doubleTap.result").is_valid(tap)
    images = section("### 3.1 CanvasResult")
    assert "never `imageData` nor `imageOmitted`" in images and "`resultImages: true`" in images
