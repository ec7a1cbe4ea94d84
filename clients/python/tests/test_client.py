"""The typed client against a live canvasd: the brief's walkthrough, events, retries, faults."""

from __future__ import annotations

import base64
import hashlib
import json
import shutil
import time

import pytest
import zmq

import conformance
import schemas
from canvasbridge import CanvasClient, CanvasError, CanvasTimeout, EventSubscriber
from conftest import CORPUS


def test_walkthrough_open_draw_double_tap_minimize_reopen_submit(server, client):
    session = client.open_session()
    with EventSubscriber(server.events, prefix=session.id + ".") as events:
        events.ready()
        assert session.open() == {"state": "open"}
        session.add_stroke([(10, 20, 0.5), (40, 25, 0.9)], color="blue", width=3)
        session.add_text("Hé ✓", 5, 60, font_size=14, color="#AA0033")
        before = session.get_drawing()

        tap = session.double_tap()
        assert tap["outcome"] == "minimized" and tap["state"] == "minimized"
        assert tap["canvasResult"] == {"action": "minimized", "hasContent": True}

        reopen = session.double_tap()
        assert reopen == {"outcome": "opened", "state": "open"}
        assert session.get_drawing() == before, "Property 2: the drawing came back changed"

        submitted = session.submit(image_data=True)
        assert submitted["action"] == "submitted" and submitted["hasContent"] is True
        png = base64.b64decode(submitted["imageData"])
        assert png[:8] == b"\x89PNG\r\n\x1a\n"
        assert session.state()["hasContent"] is False

        received = events.drain()
    for event in received:
        schemas.check_event({"session": event.session, "event": event.event, "seq": event.seq, "data": event.data})
    assert [e.seq for e in received] == list(range(1, len(received) + 1))
    results = [(e.data["action"], e.data["cause"]) for e in received if e.event == "canvas.result"]
    assert results == [("minimized", "pencil"), ("submitted", "client")]
    changes = [(e.data["from"], e.data["to"], e.data["cause"]) for e in received if e.event == "canvas.stateChanged"]
    assert changes == [("closed", "open", "client"), ("open", "minimized", "pencil"),
                       ("minimized", "open", "pencil"), ("open", "closed", "client")]


def test_error_replies_raise_with_code_and_data(client):
    session = client.open_session()
    with pytest.raises(CanvasError) as caught:
        session.add_stroke([(1, 1)])
    assert caught.value.code == "INVALID_STATE"
    assert caught.value.data == {"reason": "notOpen", "state": "closed"}
    with pytest.raises(CanvasError) as caught:
        client.call("no.such.method")
    assert caught.value.code == "METHOD_NOT_FOUND"


def test_retry_with_the_same_id_runs_once(client):
    session = client.open_session()
    session.open()
    stroke = {"tool": "pen", "color": "red", "width": 2, "points": [{"x": 3, "y": 4}]}
    first = client.call("drawing.addStroke", stroke, session=session.id, id="same")
    again = client.call("drawing.addStroke", stroke, session=session.id, id="same")
    assert first == again
    assert len(session.get_drawing()["strokes"]) == 1


def test_a_timed_out_call_is_retried_and_late_replies_are_skipped(server):
    # A server that answers only the second try: the client must resend the same id and
    # return the reply that matches it.
    context = zmq.Context.instance()
    router = context.socket(zmq.ROUTER)
    router.setsockopt(zmq.LINGER, 0)
    port = router.bind_to_random_port("tcp://127.0.0.1")
    with CanvasClient(f"tcp://127.0.0.1:{port}", timeout=0.3, retries=2, context=context) as client:
        import threading

        seen = []

        def serve():
            for attempt in range(2):
                if not router.poll(3000):
                    return
                identity, frame = router.recv_multipart()
                request = json.loads(frame)
                seen.append(request["id"])
                if attempt == 1:
                    stale = {"id": "somebody else", "result": {}}
                    router.send_multipart([identity, json.dumps(stale).encode()])
                    router.send_multipart([identity, json.dumps({"id": request["id"], "result": {"ok": True}}).encode()])

        thread = threading.Thread(target=serve)
        thread.start()
        with conformance.paused():  # the peer is a stand-in that answers {"ok": true}
            assert client.call("hello") == {"ok": True}
        thread.join()
    router.close(0)
    assert len(seen) == 2 and seen[0] == seen[1]


def test_no_server_times_out():
    with CanvasClient("ipc:///nonexistent/canvasd", timeout=0.1, retries=1) as client:
        with pytest.raises(CanvasTimeout):
            client.hello()


def test_garbage_gets_error_replies_and_others_keep_being_served(server, client):
    session = client.open_session()
    session.open()
    with server.client() as vandal:
        for frames in ([b"\xff\xfe"], [b"[]"], [b'{"id":[],"method":{}}'], [b"null", b"\x01"],
                       [b'{"id":1,"method":"canvas.open","session":"nope"}'], [b"{" * 100_000]):
            reply = vandal.exchange(frames)
            schemas.check_reply(None, reply)
            assert "error" in reply, f"{frames[0][:20]!r} got {reply}"
        oversized = {"id": 9, "method": "hello", "params": {"padding": "x" * (2 << 20)}}
        reply = vandal.exchange([json.dumps(oversized).encode()])
        assert reply["error"]["code"] == "PAYLOAD_TOO_LARGE"
    assert session.add_stroke([(1, 1)])["strokes"] == 1
    assert session.state()["state"] == "open"


def test_hello_and_session_results_match_their_schemas(client):
    schemas.check_reply("hello", {"id": 1, "result": client.hello()})
    session = client.open_session(transitions=250, policy="respectPreference", preferred_tap_action="ignore")
    schemas.check_reply("session.open", {"id": 1, "result": session.opened})
    assert session.opened["transitions"] == {"ms": 250}
    schemas.check_reply("canvas.state", {"id": 1, "result": session.state()})
    assert session.close() == {"closed": True}
    with pytest.raises(CanvasError) as caught:
        session.state()
    assert caught.value.code == "UNKNOWN_SESSION"


def test_sigterm_stops_the_server(server):
    assert server.stop() == 0
    assert "canvasd stopped" in server.log.read_text()


def test_an_empty_submit_into_a_document_saves_nothing_and_says_nothing(server, client):
    shutil.copy(CORPUS / "rotation.pdf", server.documents / "rotation.pdf")
    session = client.open_session()
    with EventSubscriber(server.events, prefix="") as events:
        events.ready()
        session.open(document="rotation.pdf", page=0)
        submitted = session.submit()
        original = hashlib.sha256((CORPUS / "rotation.pdf").read_bytes()).hexdigest()
        assert (submitted["hasContent"], submitted["document"]) == (False, {"name": "rotation.pdf", "revision": 1,
                                                                            "pageCount": 2, "sha256": original})
        received = [(e.session, e.event) for e in events.drain()]
    assert (session.id, "canvas.result") in received, "the subscriber saw nothing at all"
    assert [e for e in received if e[1] == "document.saved"] == []
    assert client.call("document.info", {"name": "rotation.pdf"})["revision"] == 1


def test_submit_into_a_document_publishes_document_saved(server, client):
    shutil.copy(CORPUS / "rotation.pdf", server.documents / "rotation.pdf")
    session = client.open_session()
    with EventSubscriber(server.events, prefix="") as events:
        events.ready()
        session.open(document="rotation.pdf", page=1)
        assert session.state()["size"] == {"width": 792, "height": 612}, "the canvas takes the page's display size"
        session.add_stroke([(100, 100), (200, 150)], color="red", width=5)
        submitted = session.submit()
        import hashlib
        current = hashlib.sha256((server.documents / "rotation.pdf").read_bytes()).hexdigest()
        assert submitted["document"] == {"name": "rotation.pdf", "revision": 2, "pageCount": 2, "sha256": current}
        flattened = client.call("document.flatten", {"name": "rotation.pdf", "page": 0, "expectedRevision": 2,
                                                     "drawing": {"strokes": [], "texts": [{"text": "ok", "x": 9, "y": 9,
                                                                                           "fontSize": 10, "color": "black"}]}})
        assert flattened["revision"] == 3
        restored = client.call("document.restore", {"name": "rotation.pdf", "revision": 1}, session=session.id)
        assert restored["revision"] == 4
        received = events.drain()
    # §5.1: on the documents topic, `session` names the session whose request saved (a submit,
    # or a document request naming one) and is absent for a save no session asked for; on the
    # session's own topic it is never there, the topic says it.
    saved = [(e.topic, e.data["revision"], e.data["cause"], e.data.get("session")) for e in received if e.event == "document.saved"]
    assert saved == [(f"{session.id}.document.saved", 2, "canvas.submit", None),
                     ("documents.document.saved", 2, "canvas.submit", session.id),
                     ("documents.document.saved", 3, "document.flatten", None),
                     ("documents.document.saved", 4, "document.restore", session.id)]
    for event in received:
        schemas.check_event({"session": event.session, "event": event.event, "seq": event.seq, "data": event.data})
    assert [e.seq for e in received if e.session == "documents"] == [1, 2, 3]


def test_an_empty_flatten_makes_no_revision_and_publishes_nothing(server, client):
    shutil.copy(CORPUS / "rotation.pdf", server.documents / "rotation.pdf")
    original = hashlib.sha256((CORPUS / "rotation.pdf").read_bytes()).hexdigest()
    empty = {"strokes": [], "texts": []}
    with EventSubscriber(server.events, prefix="documents.") as events:
        events.ready()
        result = client.call("document.flatten", {"name": "rotation.pdf", "page": 1, "drawing": empty, "expectedRevision": 1})
        assert result == {"name": "rotation.pdf", "revision": 1, "pageCount": 2, "sha256": original}
        # The same checks as a real save: the page must exist, the revision must be the expected one.
        with pytest.raises(CanvasError) as missing:
            client.call("document.flatten", {"name": "rotation.pdf", "page": 2, "drawing": empty})
        assert missing.value.code == "NOT_FOUND"
        with pytest.raises(CanvasError) as stale:
            client.call("document.flatten", {"name": "rotation.pdf", "page": 0, "drawing": empty, "expectedRevision": 5})
        assert stale.value.code == "CONFLICT"
        time.sleep(0.2)
        assert events.drain() == []
    assert client.call("document.revisions", {"name": "rotation.pdf"})["revisions"][-1]["revision"] == 1
