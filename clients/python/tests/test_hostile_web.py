"""Hostile web peers: a real canvasd with ws:// endpoints and access tokens, reached by a bare
ZWS 2.0 peer (zws.py) that sends what the browser client never would.

What must hold: a request runs only under the token it carries (no second reading of the
frames), two tokens are two owners however alike they start, a revoked token loses its
connections, and half-finished WebSocket upgrades cannot take the process's descriptors."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import signal
import socket
import stat
import threading
import time
from pathlib import Path
from typing import List

import pytest

from conftest import CORPUS, Server, canvasd_path
from web import free_port
from zws import ZWSPeer

ALICE = "eyJhbGciOiJIUzI1NiJ9.alice-token-0123456789"
BOB = "eyJhbGciOiJIUzI1NiJ9.bob-token-9876543210"


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


class WebCanvasd:
    """canvasd with ws:// endpoints on free ports, tokens from a file, and a document."""

    def __init__(self, folder: Path, tokens: List[str], extra: List[str] = ()) -> None:
        folder.mkdir(parents=True, exist_ok=True)
        self.tokens_file = folder / "tokens"
        self.write_tokens(tokens)
        self.port, self.events_port = free_port(), free_port()
        documents = folder / "documents"
        documents.mkdir(parents=True)
        shutil.copy(CORPUS / "basicapi.pdf", documents / "notes.pdf")
        self.document = documents / "notes.pdf"
        self.server = Server(folder, ["--web-endpoint", f"ws://127.0.0.1:{self.port}",
                                      "--web-events", f"ws://127.0.0.1:{self.events_port}",
                                      "--web-tokens", str(self.tokens_file), "--log-level", "warning", *extra])

    def write_tokens(self, tokens: List[str]) -> None:
        self.tokens_file.write_text("".join(f"{token}\n" for token in tokens))

    def peer(self) -> ZWSPeer:
        return ZWSPeer(self.port).handshake()

    def stop(self) -> None:
        self.server.stop()


@pytest.fixture
def web(tmp_path: Path):
    running = WebCanvasd(tmp_path, [ALICE, BOB])
    yield running
    running.stop()


def test_an_empty_frame_before_the_request_does_not_skip_the_token(web: WebCanvasd):
    before = digest(web.document)
    peer = web.peer()
    attempts = [
        {"id": 1, "method": "document.list", "params": {}},
        {"id": 2, "method": "document.get", "params": {"name": "notes.pdf"}},
        {"id": 3, "method": "document.flatten", "params": {"name": "notes.pdf", "page": 0,
                                                           "drawing": {"strokes": [], "texts": []}}},
        {"id": 4, "method": "session.open", "params": {}},
    ]
    for extra in ([b""], [b"", b""], [b"x"], [b"{}"]):
        for attempt in attempts:
            reply = peer.request(attempt, extra_first=extra)
            assert "result" not in reply, f"{attempt['method']} after {extra!r} ran without a token: {reply}"
            assert reply["error"]["code"] in ("PARSE_ERROR", "INVALID_REQUEST", "UNAUTHORIZED"), reply
    # Without the extra frame, and without a token, the same request is refused by the token check.
    reply = peer.request(attempts[0])
    assert reply["error"]["code"] == "UNAUTHORIZED" and reply["id"] == 1
    # A duplicated key cannot split the reading either: the last token counts, as for every key.
    raw = b'{"id": 5, "method": "document.list", "token": "' + ALICE.encode() + b'", "token": "not-a-token-at-all!"}'
    peer.send_frames([raw])
    assert json.loads(peer.receive_frames()[-1])["error"]["code"] == "UNAUTHORIZED"
    # With a token the peer is served, so the refusals above were the token check's.
    reply = peer.request({"id": 6, "method": "document.list", "params": {}, "token": ALICE})
    assert [d["name"] for d in reply["result"]["documents"]] == ["notes.pdf"]
    assert digest(web.document) == before
    with web.server.client() as local:
        assert local.call("document.info", {"name": "notes.pdf"})["revision"] == 1


def test_tokens_that_start_alike_are_two_owners(web: WebCanvasd):
    assert ALICE[:8] == BOB[:8]
    alice, bob = web.peer(), web.peer()
    opened = alice.request({"id": 1, "method": "session.open", "params": {}, "token": ALICE})
    session = opened["result"]["session"]
    alice.request({"id": 2, "method": "canvas.open", "session": session, "params": {}, "token": ALICE})
    for method in ("canvas.state", "drawing.get", "canvas.cancel"):
        reply = bob.request({"id": 3, "method": method, "session": session, "params": {}, "token": BOB})
        assert reply["error"]["code"] == "UNKNOWN_SESSION", (method, reply)
    state = alice.request({"id": 4, "method": "canvas.state", "session": session, "params": {}, "token": ALICE})
    assert state["result"]["state"] == "open"


def test_a_revoked_token_loses_its_connections_on_sighup_and_no_other(web: WebCanvasd):
    alice, bob = web.peer(), web.peer()
    assert "result" in alice.request({"id": 1, "method": "document.list", "params": {}, "token": ALICE})
    assert "result" in bob.request({"id": 1, "method": "document.list", "params": {}, "token": BOB})
    subscriber = ZWSPeer(web.events_port).handshake()
    subscriber.send_frames([b"\x01" + f"{BOB}\ndocuments.".encode()])
    alice_events = ZWSPeer(web.events_port).handshake()
    alice_events.send_frames([b"\x01" + f"{ALICE}\ndocuments.".encode()])
    time.sleep(0.2)
    web.write_tokens([ALICE])
    web.server.process.send_signal(signal.SIGHUP)
    assert subscriber.closed_within(1.0), "the revoked token's event connection stayed open"
    assert bob.closed_within(1.0), "the revoked token's request connection stayed open"
    # Alice's connections are not touched: the same socket goes on being served, and her
    # subscription on receiving (a save announced on documents.).
    assert not alice_events.closed_within(0.5), "another token's event connection was closed"
    assert "result" in alice.request({"id": 2, "method": "document.list", "params": {}, "token": ALICE})
    assert alice.request({"id": 3, "method": "document.list", "params": {}, "token": BOB})["error"]["code"] == "UNAUTHORIZED"
    # A subscription that shows the revoked token now ends its connection at once: a subscriber
    # has no reply to be refused in.
    late = ZWSPeer(web.events_port).handshake()
    late.send_frames([b"\x01" + f"{BOB}\ndocuments.".encode()])
    assert late.closed_within(1.0)


def test_half_open_upgrades_do_not_take_the_descriptors(tmp_path: Path, monkeypatch):
    """1,100 connections that send half an upgrade, against a process limited to 1,024
    descriptors: canvasd stays up, lists its folder, saves, and serves a page that connects
    properly, and cuts the half-open ones off once their upgrade time runs out."""
    wrapper = tmp_path / "canvasd-1024"
    wrapper.write_text(f"#!/bin/sh\nulimit -n 1024\nexec {canvasd_path()} \"$@\"\n")
    wrapper.chmod(wrapper.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setenv("CANVASD", str(wrapper))
    web = WebCanvasd(tmp_path / "server", [ALICE])
    half_open: List[socket.socket] = []
    try:
        request = ZWSPeer.upgrade_request(None)   # type: ignore[arg-type]
        for _ in range(1_100):
            try:
                connection = socket.create_connection(("127.0.0.1", web.port), timeout=2)
                connection.sendall(request[:35])
                half_open.append(connection)
            except OSError:
                pass
        time.sleep(0.5)
        assert web.server.process.poll() is None, "canvasd died"
        with web.server.client(timeout=10, retries=0) as local:
            listed = local.call("document.list")
            assert [d["name"] for d in listed["documents"]] == ["notes.pdf"], listed
            saved = local.call("document.flatten", {"name": "notes.pdf", "page": 0, "drawing": {
                "strokes": [{"tool": "pen", "color": "blue", "width": 2, "points": [{"x": 10, "y": 10}, {"x": 60, "y": 40}]}],
                "texts": []}})
            assert saved["revision"] == 2
        # Past the upgrade time (5 s) the half-open ones are cut off, and a page gets in.
        deadline = time.monotonic() + 15
        while True:
            try:
                page = web.peer()
                reply = page.request({"id": 1, "method": "document.list", "params": {}, "token": ALICE})
                break
            except (ConnectionError, OSError):
                assert time.monotonic() < deadline, "no page could connect"
                time.sleep(0.2)
        assert [d["name"] for d in reply["result"]["documents"]] == ["notes.pdf"]
        closed = 0
        for connection in half_open:
            connection.settimeout(0.01)
            try:
                if connection.recv(1) == b"":
                    closed += 1
            except socket.timeout:   # an OSError too: caught first
                pass
            except OSError:
                closed += 1
        assert closed >= len(half_open) * 0.9, f"only {closed} of {len(half_open)} half-open upgrades were cut off"
        assert web.server.process.poll() is None
    finally:
        for connection in half_open:
            connection.close()
        web.stop()


def test_out_of_descriptors_is_unavailable_never_an_empty_folder(tmp_path: Path, monkeypatch):
    """With every descriptor taken (here by raw connections to the tcp:// event endpoint, which
    no guard bounds: it is loopback or CurveZMQ only), a listing answers UNAVAILABLE
    tooManyOpenFiles, not an empty folder, and lists the document again once they are let go.
    (Not ipc://: libzmq 4.3.4's ipc listener aborts the process on EMFILE, an assertion of its
    own, ipc_listener.cpp:325.)"""
    wrapper = tmp_path / "canvasd-48"
    wrapper.write_text(f"#!/bin/sh\nulimit -n 48\nexec {canvasd_path()} \"$@\"\n")
    wrapper.chmod(wrapper.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setenv("CANVASD", str(wrapper))
    folder = tmp_path / "server"
    (folder / "documents").mkdir(parents=True)
    shutil.copy(CORPUS / "basicapi.pdf", folder / "documents" / "notes.pdf")
    events_port = free_port()
    server = Server(folder, ["--log-level", "critical", "--events", f"tcp://127.0.0.1:{events_port}"])
    hogs: List[socket.socket] = []
    try:
        with server.client(timeout=10, retries=0) as local:
            assert [d["name"] for d in local.call("document.list")["documents"]] == ["notes.pdf"]
            for _ in range(60):
                hogs.append(socket.create_connection(("127.0.0.1", events_port)))
            time.sleep(0.5)
            from canvasbridge import CanvasError
            with pytest.raises(CanvasError) as refused:
                local.call("document.list")
            assert refused.value.code == "UNAVAILABLE" and refused.value.data.get("reason") == "tooManyOpenFiles", refused.value
            for hog in hogs:
                hog.close()
            hogs.clear()
            deadline = time.monotonic() + 10
            while True:
                try:
                    assert [d["name"] for d in local.call("document.list")["documents"]] == ["notes.pdf"]
                    break
                except CanvasError:
                    assert time.monotonic() < deadline, "the listing did not come back"
                    time.sleep(0.2)
        assert server.process.poll() is None
    finally:
        for hog in hogs:
            hog.close()
        server.stop()


def collect_events(peer: ZWSPeer, seconds: float) -> List[List[bytes]]:
    """The events `peer` receives within `seconds`, until then or until the server closes it."""
    events: List[List[bytes]] = []
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        peer.sock.settimeout(max(0.01, deadline - time.monotonic()))
        try:
            events.append(peer.receive_frames())
        except socket.timeout:
            break
        except (ConnectionError, OSError):
            break
    return events


def test_a_rotated_token_receives_no_more_events_on_sighup(tmp_path: Path):
    """The same name with a new token: what the old token subscribed ends as for a removed
    token (issue 33, item 3). Before, revocation was by name, so the rotated token's
    subscription went on receiving the owner's `canvas.stateChanged` and `document.saved`."""
    old, new = "rotating-token-old-0123456789", "rotating-token-new-9876543210"
    web = WebCanvasd(tmp_path, [f"alice {ALICE}", f"bob {old}"])
    try:
        bob = web.peer()
        session = bob.request({"id": 1, "method": "session.open", "params": {}, "token": old})["result"]["session"]
        subscriber = ZWSPeer(web.events_port).handshake()
        for topic in (f"{session}.", "documents."):
            subscriber.send_frames([b"\x01" + f"{old}\n{topic}".encode()])

        def cause_events(peer: ZWSPeer, token: str, request_id: int) -> None:
            # A state change on bob's session, and a save every subscriber of `documents.` hears.
            reply = peer.request({"id": request_id, "method": "canvas.open", "session": session, "params": {}, "token": token})
            assert reply["result"]["state"] == "open", reply
            reply = peer.request({"id": request_id + 1, "method": "canvas.cancel", "session": session, "params": {}, "token": token})
            assert "result" in reply, reply
            with web.server.client() as local:
                revision = local.call("document.info", {"name": "notes.pdf"})["revision"]
                local.call("document.flatten", {"name": "notes.pdf", "page": 0, "expectedRevision": revision,
                                                "drawing": {"strokes": [{"tool": "pen", "color": "blue", "width": 2,
                                                                         "points": [{"x": 10, "y": 10}, {"x": 60, "y": 40}]}],
                                                            "texts": []}})

        # Applied subscriptions are vetted on the loop: wait until the first events arrive, so
        # the count after the rotation is of a subscription known to have worked.
        deadline = time.monotonic() + 5
        before: List[List[bytes]] = []
        request_id = 10
        wanted = {f"{session}.canvas.stateChanged".encode(), b"documents.document.saved"}
        while not wanted <= {frames[0] for frames in before}:
            assert time.monotonic() < deadline, f"the old token's subscription never worked: {before}"
            cause_events(bob, old, request_id)
            request_id += 10
            before += collect_events(subscriber, 0.5)

        web.write_tokens([f"alice {ALICE}", f"bob {new}"])
        web.server.process.send_signal(signal.SIGHUP)
        # Whatever the old subscription receives from now on counts, until the server ends it.
        # Reconnecting only after that: libzmq can abort (an assertion in ws_engine.cpp) when a
        # peer connects while the endpoints are being bound anew, which is not what this tests.
        after = collect_events(subscriber, 3.0)
        # Once the old token is refused, the reload has happened.
        deadline, attempts = time.monotonic() + 5, []
        while True:
            try:
                bob = ZWSPeer(web.port, timeout=1.0).handshake()
                reply = bob.request({"id": 2, "method": "document.list", "params": {}, "token": old})
                if reply.get("error", {}).get("code") == "UNAUTHORIZED":
                    break
            except (ConnectionError, OSError) as error:
                attempts.append(repr(error))
            assert time.monotonic() < deadline, f"the old token was never refused: {attempts[:3]} {web.server.log.read_text()[-2000:]}"
            time.sleep(0.1)
        # The new token is bob's: his session, and his subscription to it, are there for it.
        bob = web.peer()
        fresh = ZWSPeer(web.events_port).handshake()
        for topic in (f"{session}.", "documents."):
            fresh.send_frames([b"\x01" + f"{new}\n{topic}".encode()])
        time.sleep(0.3)
        cause_events(bob, new, 100)
        after += collect_events(subscriber, 2.0)
        assert after == [], f"the rotated token's subscription still received {len(after)} events: {after}"
        heard = {frames[0] for frames in collect_events(fresh, 1.0)}
        assert wanted <= heard, heard
    finally:
        web.stop()


def test_revocations_while_pages_connect_leave_canvasd_up(tmp_path: Path):
    """Twenty revocations (SIGHUP after a token is removed and put back) while peers keep
    connecting to both ws:// endpoints. Revocation used to close and bind both sockets again,
    and with peers connecting meanwhile libzmq 4.3.4 took the process down (SIGSEGV within six
    revocations, three runs of three); now the connections are cut at the TCP level and the
    sockets stay bound."""
    web = WebCanvasd(tmp_path, [ALICE, BOB])
    stop = threading.Event()

    def connect_forever(port: int) -> None:
        while not stop.is_set():
            try:
                peer = ZWSPeer(port, timeout=1).handshake()
                peer.close()
            except (ConnectionError, OSError):
                time.sleep(0.01)

    threads = [threading.Thread(target=connect_forever, args=(port,), daemon=True)
               for port in (web.port, web.events_port, web.port, web.events_port)]
    for thread in threads:
        thread.start()
    try:
        for round in range(20):
            web.write_tokens([ALICE] if round % 2 == 0 else [ALICE, BOB])
            web.server.process.send_signal(signal.SIGHUP)
            time.sleep(0.1)
            assert web.server.process.poll() is None, f"canvasd died at revocation {round + 1}"
    finally:
        stop.set()
        for thread in threads:
            thread.join(5)
    try:
        page = web.peer()
        assert "result" in page.request({"id": 1, "method": "document.list", "params": {}, "token": ALICE})
    finally:
        web.stop()
