"""Hostile clients against the limits: per owner, not per connection (sessions, uploads); edits
held to the drawing limits by what they make (erase); result images never rendered on the
request loop. Each against a real canvasd; the bystander's `hello` latency is measured and
printed, never asserted (it depends on the machine).
"""

from __future__ import annotations

import hashlib
import json
import time
from pathlib import Path
from typing import List

import pytest
import zmq

from canvasbridge import CanvasClient, CanvasError, EventSubscriber
from conftest import Server
from test_hostile import Watch
from test_security import keys  # noqa: F401 (a fixture: CurveZMQ keys for alice and bob)


@pytest.fixture
def server(tmp_path: Path):
    running = Server(tmp_path, ["--log-level", "error"])
    yield running
    running.stop()


def test_one_owner_over_eleven_connections_holds_only_its_share_of_sessions(server: Server):
    # Every loopback client without a key is the one local owner, however many connections it
    # makes: eleven of them, each opening up to the per-connection limit, get
    # maxSessionsPerOwner in all, not the server's every session.
    clients = [server.client(timeout=10, retries=0) for _ in range(11)]
    try:
        limits = clients[0].hello()["limits"]
        per_owner, per_client = limits["maxSessionsPerOwner"], limits["maxSessionsPerClient"]
        assert per_owner < limits["maxSessions"]
        opened, refusals = 0, []
        for client in clients:
            for _ in range(per_client):
                try:
                    client.open_session()
                    opened += 1
                except CanvasError as refused:
                    refusals.append((refused.code, refused.data))
                    break
        assert opened == per_owner
        assert refusals and all(code == "UNAVAILABLE" for code, _ in refusals)
        assert {"reason": "ownerSessions", "limit": per_owner} in [data for _, data in refusals]
        assert all(data["reason"] in ("ownerSessions", "clientSessions") for _, data in refusals)
    finally:
        for client in clients:
            client.close()


def test_one_key_holds_at_most_its_uploads_and_another_key_still_begins_one(tmp_path: Path, keys):  # noqa: F811
    server = Server(tmp_path / "server", ["--log-level", "error", "--curve-secret-key", str(keys.folder / "server.key"),
                                           "--allowed-keys", str(keys.folder / "allowed")], curve=keys("alice"))
    try:
        with server.client(curve=keys("alice"), timeout=10, retries=0) as alice, \
                server.client(curve=keys("bob"), timeout=10, retries=0) as bob:
            limits = alice.hello()["limits"]
            per_owner = limits["maxUploadsPerOwner"]
            assert per_owner < limits["maxUploads"]
            # The attack: uploads of the largest size begun, never sent, only asked about.
            big = {"size": limits["maxUploadBytes"], "sha256": "0" * 64}
            begun = [alice.call("document.upload.begin", {"name": f"a{n}.pdf", **big})["upload"] for n in range(per_owner)]
            with pytest.raises(CanvasError) as refused:
                alice.call("document.upload.begin", {"name": "more.pdf", **big})
            assert refused.value.code == "UNAVAILABLE"
            assert refused.value.data == {"reason": "ownerUploads", "limit": per_owner}
            for upload in begun:
                assert alice.call("document.upload.status", {"upload": upload})["received"] == 0
            # Another owner is not kept out by alice's.
            assert bob.call("document.upload.begin", {"name": "b.pdf", **big})["received"] == 0
            # An upload given up frees its owner's slot.
            alice.call("document.upload.abort", {"upload": begun[0]})
            alice.call("document.upload.begin", {"name": "again.pdf", **big})
    finally:
        server.stop()


def begin_until_refused(begin, names: str, most: int) -> tuple:
    """Calls `begin(name)` for uploads named after `names` until one is refused; returns how
    many began and the refusal's (code, data)."""
    for count in range(most + 1):
        reply = begin(f"{names}{count}.pdf")
        if "error" in reply:
            return count, (reply["error"]["code"], reply["error"].get("data"))
    return most + 1, None


def web_begin(peer, token: str, big: dict):
    counter = iter(range(1_000_000))
    return lambda name: peer.request({"id": next(counter), "method": "document.upload.begin",
                                      "params": {"name": name, **big}, "token": token})


def test_one_persons_two_tokens_do_not_take_every_upload_slot(tmp_path: Path):
    """Issue 33, item 4: two tokens of one person held all 4 slots (kept alive with 1-byte
    parts), and everyone else was refused `busy`. Now the slots outnumber two owners at their
    limit, and however many one owner may have, the last free slot is kept for another."""
    from test_hostile_web import WebCanvasd
    person = ["alice-phone-token-0123456789", "alice-laptop-token-0123456789"]
    carol = "carol-token-0123456789abcdef"
    web = WebCanvasd(tmp_path / "two", [f"alice-phone {person[0]}", f"alice-laptop {person[1]}", f"carol {carol}"])
    try:
        peer = web.peer()
        limits = peer.request({"id": 0, "method": "hello", "params": {}})["result"]["limits"]
        big = {"size": limits["maxUploadBytes"], "sha256": "0" * 64}
        taken = 0
        for token in person:
            count, refusal = begin_until_refused(web_begin(peer, token, big), f"t{person.index(token)}-", limits["maxUploads"])
            assert refusal and refusal[0] == "UNAVAILABLE", refusal
            taken += count
        assert taken < limits["maxUploads"], "one person's two tokens took every slot"
        assert "result" in web_begin(peer, carol, big)("carol.pdf"), "another owner was kept out"
    finally:
        web.stop()
    # One owner allowed as many as there are slots still leaves the last one to another.
    web = WebCanvasd(tmp_path / "one", [f"alice {person[0]}", f"carol {carol}"], ["--max-uploads-per-owner", "64"])
    try:
        peer = web.peer()
        limits = peer.request({"id": 0, "method": "hello", "params": {}})["result"]["limits"]
        big = {"size": limits["maxUploadBytes"], "sha256": "0" * 64}
        count, refusal = begin_until_refused(web_begin(peer, person[0], big), "a", limits["maxUploads"])
        assert count == limits["maxUploads"] - 1, count
        assert refusal == ("UNAVAILABLE", {"reason": "busy", "limit": limits["maxUploads"]}), refusal
        assert "result" in web_begin(peer, carol, big)("carol.pdf"), "another owner was kept out"
    finally:
        web.stop()


def test_an_old_part_sent_again_does_not_keep_an_upload_alive(tmp_path: Path):
    """A part the server already has is answered but renews nothing: an upload fed only such
    parts is gone after its idle time, while one fed new bytes as often lives on. (Before, any
    part renewed it, so one byte sent again and again held a slot for ever.)"""
    server = Server(tmp_path, ["--log-level", "error", "--upload-idle-timeout", "2"])
    try:
        with server.client(timeout=10, retries=0) as client:
            data = b"%PDF-" + bytes(200)
            announced = {"size": len(data), "sha256": hashlib.sha256(data).hexdigest()}
            stale = client.call("document.upload.begin", {"name": "stale.pdf", **announced})["upload"]
            fed = client.call("document.upload.begin", {"name": "fed.pdf", **announced})["upload"]
            for upload in (stale, fed):
                assert client.call("document.upload.part", {"upload": upload, "offset": 0}, frames=[data[:5]])["received"] == 5
            offset, began = 5, time.monotonic()
            gone_after = None
            while time.monotonic() < began + 3.5:
                if gone_after is None:
                    try:
                        # The retry is answered as before, adding nothing: only its renewal is gone.
                        reply = client.call("document.upload.part", {"upload": stale, "offset": 0}, frames=[data[:1]])
                        assert reply["received"] == 5
                    except CanvasError as refused:
                        assert refused.code == "NOT_FOUND", refused
                        gone_after = time.monotonic() - began
                offset = client.call("document.upload.part", {"upload": fed, "offset": offset},
                                     frames=[data[offset:offset + 1]])["received"]
                time.sleep(0.25)
            # Gone once its idle time ran out from its last new bytes, not before.
            assert gone_after is not None and gone_after > 1.5, gone_after
            assert client.call("document.upload.status", {"upload": fed})["received"] == offset
    finally:
        server.stop()


def test_two_local_clients_each_have_their_own_uploads(server: Server):
    """Every loopback client without a key was one owner for uploads, so a second local client
    was refused `ownerUploads` while the first had its share. Now each connection is one."""
    with server.client(timeout=10, retries=0) as first, server.client(timeout=10, retries=0) as second:
        limits = first.hello()["limits"]
        per_owner = limits["maxUploadsPerOwner"]
        big = {"size": limits["maxUploadBytes"], "sha256": "0" * 64}
        for client, name in ((first, "first"), (second, "second")):
            for n in range(per_owner):
                assert client.call("document.upload.begin", {"name": f"{name}{n}.pdf", **big})["received"] == 0
        # Each is still held to its own share.
        with pytest.raises(CanvasError) as refused:
            first.call("document.upload.begin", {"name": "more.pdf", **big})
        assert (refused.value.code, refused.value.data) == ("UNAVAILABLE", {"reason": "ownerUploads", "limit": per_owner})


def zigzag(teeth: int, y: float) -> List[dict]:
    """Points of a zigzag between y and y + 10, one unit apart in x."""
    return [{"x": i, "y": y + (10 if i % 2 else 0)} for i in range(2 * teeth + 1)]


def test_erases_that_would_multiply_past_the_drawing_limits_change_nothing(server: Server):
    with server.client(timeout=30, retries=0) as client:
        limits = client.hello()["limits"]
        session = client.open_session()
        session.call("canvas.open")
        # Legal strokes: 4 zigzags of 2,500 teeth, 20,004 points in all.
        for n in range(4):
            session.call("drawing.addStroke", {"tool": "pen", "color": "black", "width": 1, "points": zigzag(2500, y=n * 20)})
        before = hashlib.sha256(json.dumps(session.call("drawing.get"), sort_keys=True).encode()).hexdigest()
        state = session.call("canvas.state")
        # The attack: eleven erases of about 110 bytes. A disc so large that its edge is nearly
        # a straight line across a zigzag cuts each tooth off on its own: 2,500 strokes from one.
        refusals = []
        for n in range(11):
            edge = (n % 4) * 20 + 5
            with pytest.raises(CanvasError) as refused:
                session.call("drawing.erase", {"x": 2500, "y": edge - 1_000_000, "radius": 1_000_000, "mode": "partial"})
            refusals.append(refused.value)
        for refused in refusals:
            assert refused.code == "PAYLOAD_TOO_LARGE"
            assert refused.data["field"] == "strokes" and refused.data["limit"] == limits["maxStrokesPerDrawing"]
            assert refused.data["size"] > limits["maxStrokesPerDrawing"]
        after = hashlib.sha256(json.dumps(session.call("drawing.get"), sort_keys=True).encode()).hexdigest()
        assert after == before, "a refused erase changed the drawing"
        assert session.call("canvas.state") == state, "a refused erase changed the session (tool, history)"
        # An erase whose result fits still works: whole strokes out.
        assert session.call("drawing.erase", {"x": 0, "y": 0, "radius": 1, "mode": "stroke"})["strokes"] == 3


def test_an_erase_that_would_pass_the_point_limit_changes_nothing(server: Server):
    with server.client(timeout=30, retries=0) as client:
        limits = client.hello()["limits"]
        per_stroke, per_drawing = limits["maxPointsPerStroke"], limits["maxPointsPerDrawing"]
        session = client.open_session()
        session.call("canvas.open")
        # Straight strokes holding exactly the drawing's points.
        for n in range(per_drawing // per_stroke):
            points = [{"x": i, "y": n * 10} for i in range(per_stroke)]
            session.call("drawing.addStroke", {"tool": "pen", "color": "black", "width": 0.1, "points": points})
        assert session.call("drawing.get")["strokes"][0]["points"][1] == {"x": 1, "y": 0}
        # A small disc between two points removes none and adds two cut points.
        with pytest.raises(CanvasError) as refused:
            session.call("drawing.erase", {"x": 100.5, "y": 0, "radius": 0.2, "mode": "partial"})
        assert refused.value.code == "PAYLOAD_TOO_LARGE"
        assert refused.value.data == {"field": "points", "size": per_drawing + 2, "limit": per_drawing}
        assert len(session.call("drawing.get")["strokes"]) == per_drawing // per_stroke


def test_result_images_past_the_owners_renders_go_without_and_hold_nobody_up(server: Server):
    # The attack: sessions with result images of the largest size, each double-tapped twice
    # (minimize, which renders its image, then open again), all sent at once.
    sessions_count, taps = 80, 2
    context = zmq.Context.instance()
    with server.client(timeout=30, retries=0) as client:
        side = client.hello()["limits"]["maxImageSide"]
        sessions = []
        for _ in range(sessions_count):
            session = client.open_session(result_images=True, size=(side, side))
            session.call("canvas.open")
            sessions.append(session.id)
    with EventSubscriber(server.events) as events, Watch(server) as watch:
        events.ready()
        dealer = context.socket(zmq.DEALER)
        dealer.setsockopt(zmq.LINGER, 0)
        dealer.connect(server.endpoint)
        started = time.monotonic()
        sent = 0
        for tap in range(taps):
            for n, session in enumerate(sessions):
                request = json.dumps({"id": tap * sessions_count + n, "method": "pencil.doubleTap", "session": session}).encode()
                sent += len(request)
                dealer.send(request)
        replies = {}
        while len(replies) < sessions_count * taps and dealer.poll(300_000):
            reply = json.loads(dealer.recv())
            replies[reply["id"]] = reply
        took = time.monotonic() - started
        dealer.close(0)
        time.sleep(0.3)
        received = events.drain(quiet=1.0)
    latencies = sorted(watch.latencies)
    print(f"\n{sessions_count * taps} double-taps ({sent} bytes) answered in {took:.1f} s; a bystander's hello: "
          f"median {latencies[len(latencies) // 2] * 1000:.1f} ms, worst {latencies[-1] * 1000:.0f} ms ({len(latencies)} calls)")
    assert server.process.poll() is None, "canvasd died"
    assert latencies, "the bystander was never answered"
    assert len(replies) == sessions_count * taps, "some double-taps were never answered"
    # Each double-tap did exactly what the state table says: minimize, then open again.
    for n in range(sessions_count):
        first, second = replies[n]["result"], replies[sessions_count + n]["result"]
        assert first["outcome"] == "minimized" and first["state"] == "minimized", first
        assert first["canvasResult"] == {"action": "minimized", "hasContent": False}
        assert second["outcome"] == "opened" and second["state"] == "open", second
    results = [event.data for event in received if event.event == "canvas.result"]
    assert len(results) == sessions_count
    # An image rendered but too large for an event (past 128 KiB) says "tooLarge"; one that
    # could not be rendered beside the loop says "busy" or "ownerBusy"; one whose render passed
    # the time budget (a loaded machine, four of the largest at once) says "timeout".
    rendered = [data for data in results if "imageData" in data or data.get("imageOmitted") in ("tooLarge", "timeout")]
    omitted = [data for data in results if data.get("imageOmitted") in ("busy", "ownerBusy")]
    assert len(rendered) + len(omitted) == sessions_count, "every result has its image or says why not"
    assert omitted, "past the owner's renders in flight, images were still rendered (on the loop)"
    print(f"{len(rendered)} images rendered beside the loop, {len(omitted)} left out")
