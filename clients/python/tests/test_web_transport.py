"""canvasd's ws:// transport (SwiftNIO, spec §1.2) tried from outside as an attacker and as odd
but honest clients would: what a tokenless peer can do without a request, a flood of tokenless
messages beside pages, messages as browsers send them (fragments, text, empty), a page that
stops reading, tokens revoked one at a time among many pages, a proxy's PROXY v2 header, and the
web ports' own health answer. Real canvasd, real sockets; other client addresses come through
PROXY headers or other loopback addresses (127.0.0.N).

On the libzmq transport (before issue 41) the first three failed: 47 of 60 tokenless peers were
still open past the timeout, pages were cut off by the flood, and fragments, text and empty
messages dropped the connection with no close frame; revoking one token closed every page."""

from __future__ import annotations

import json
import signal
import socket
import struct
import subprocess
import threading
import time
from pathlib import Path
from typing import List, Optional

import zmq

from conftest import Server
from test_hostile_web import ALICE, WebCanvasd
from web import free_port
from zws import ZWSPeer

TOKENS = [f"eyJhbGciOiJIUzI1NiJ9.page-{n:02d}-0123456789abcdef" for n in range(10)]


def served(peer: ZWSPeer, token: str = ALICE, id: int = 1) -> bool:
    try:
        reply = peer.request({"id": id, "method": "document.list", "params": {}, "token": token})
    except (ConnectionError, OSError):
        return False
    return "result" in reply


def rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


def test_tokenless_peers_are_closed_at_the_timeout_whatever_they_send(tmp_path: Path):
    """The `ws_fresh_auth` repro: while a page with a token is busy, tokenless peers send a
    WebSocket ping now and then, half a frame, or a MORE part, none of which is a request."""
    web = WebCanvasd(tmp_path, [ALICE], ["--web-auth-timeout", "2"])
    stop = threading.Event()
    page_failures: List[str] = []

    def busy_page() -> None:
        page = web.peer()
        n = 0
        while not stop.is_set():
            n += 1
            if not served(page, id=n):
                page_failures.append(f"request {n}")
                return

    # Two pages, each with a request always in flight: the old transport judged a peer's first
    # bytes by the messages read in the same moment, all of them a page's.
    pagers = [threading.Thread(target=busy_page) for _ in range(2)]
    for pager in pagers:
        pager.start()
    try:
        peers = []
        for index in range(60):
            peer = ZWSPeer(web.port).handshake()
            kind = index % 3
            if kind == 0:
                peer.send_raw(0x9, b"are you there")
            elif kind == 1:
                peer.send_raw(0x2, b"\x00{\"id\":1", length=100)   # a header promising 100 bytes, 9 sent
            else:
                peer.send_message(b"\x01" + b"a MORE part, never finished")
            peers.append((kind, peer))
        # Pings keep coming from the first kind while the timeout runs.
        deadline = time.monotonic() + 2.6
        while time.monotonic() < deadline:
            for kind, peer in peers:
                if kind == 0:
                    try:
                        peer.send_raw(0x9, b"ping")
                    except OSError:
                        pass
            time.sleep(0.3)
        still_open = [kind for kind, peer in peers if not peer.closed_within(0.8)]
        assert still_open == [], f"{len(still_open)} of 60 tokenless peers open past the timeout (kinds {still_open})"
        # A token holder's new connection gets in and is served.
        assert served(web.peer(), id=99)
    finally:
        stop.set()
        for pager in pagers:
            pager.join()
        web.stop()
    assert page_failures == []


def test_a_tokenless_flood_does_not_cut_off_pages(tmp_path: Path):
    """The `ws_doubt_flood` repro: thousands of tokenless messages a second from peers that
    reconnect as they are closed, while new pages with a token connect and work."""
    web = WebCanvasd(tmp_path, [ALICE], ["--web-auth-timeout", "1"])
    stop = threading.Event()
    sent = [0]

    def flood() -> None:
        while not stop.is_set():
            try:
                peer = ZWSPeer(web.port).handshake()
                while not stop.is_set():
                    for n in range(50):
                        peer.send_frames([json.dumps({"id": n, "method": "document.list"}).encode()])
                    for _ in range(50):
                        peer.receive_frames()
                    sent[0] += 50
            except (ConnectionError, OSError):
                continue

    flooders = [threading.Thread(target=flood) for _ in range(3)]
    for flooder in flooders:
        flooder.start()
    try:
        time.sleep(0.5)
        started = time.monotonic()
        pages = []
        for n in range(3):
            page = web.peer()
            assert served(page, id=1), f"page {n} was not served during the flood"
            pages.append(page)
            time.sleep(0.3)
        while time.monotonic() - started < 4.0:
            for n, page in enumerate(pages):
                assert served(page, id=2), f"page {n} was cut off during the flood"
            time.sleep(0.1)
        rate = sent[0] / (time.monotonic() - started + 0.5)
        print(f"flood: {rate:.0f} tokenless messages/s answered beside 3 pages")
        assert rate > 500, "the flood was too slow to prove anything"
    finally:
        stop.set()
        for flooder in flooders:
            flooder.join()
        web.stop()


def test_messages_as_browsers_send_them(tmp_path: Path):
    """A fragmented message is put together; a text or empty message gets a close code that
    says why; Firefox's and Safari's upgrade requests are taken as they are."""
    web = WebCanvasd(tmp_path, [ALICE])
    try:
        peer = web.peer()
        padding = "x" * 200_000
        request = json.dumps({"id": 7, "method": "document.list", "params": {"pad": padding}, "token": ALICE}).encode()
        peer.send_fragmented(b"\x00" + request, parts=7)
        assert "result" in json.loads(peer.receive_frames()[-1])
        assert served(peer, id=8)

        text = web.peer()
        text.send_raw(0x1, b"\x00{\"id\":1,\"method\":\"hello\"}")
        assert text.close_code() == 1003
        empty = web.peer()
        empty.send_raw(0x2, b"")
        assert empty.close_code() == 1002

        for connection_header in ("keep-alive, Upgrade", "Upgrade"):
            raw = socket.create_connection(("127.0.0.1", web.port), timeout=5)
            raw.sendall((f"GET /requests HTTP/1.1\r\nHost: 127.0.0.1\r\nUser-Agent: Mozilla/5.0 Firefox/140.0\r\n"
                         f"Connection: {connection_header}\r\nUpgrade: websocket\r\nSec-WebSocket-Version: 13\r\n"
                         f"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Protocol: ZWS2.0\r\n"
                         f"Sec-WebSocket-Extensions: permessage-deflate\r\nOrigin: http://127.0.0.1\r\n\r\n").encode())
            head = raw.recv(4096)
            assert head.startswith(b"HTTP/1.1 101"), head[:80]
            assert b"sec-websocket-protocol: ZWS2.0" in head.lower().replace(b"zws2.0", b"ZWS2.0")
            raw.close()
        # Without the subprotocol: refused, saying what to ask for.
        raw = socket.create_connection(("127.0.0.1", web.port), timeout=5)
        raw.sendall(b"GET / HTTP/1.1\r\nHost: x\r\nConnection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Version: 13\r\n"
                    b"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n")
        answer = raw.recv(4096)
        assert answer.startswith(b"HTTP/1.1 400") and b"ZWS2.0" in answer
        raw.close()
    finally:
        web.stop()


def small_window_peer(port: int) -> ZWSPeer:
    """A peer upgraded with a 4 KiB receive window: one that stops reading fills it at once."""
    peer = ZWSPeer.__new__(ZWSPeer)
    peer.buffer = b""
    peer.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    peer.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    peer.sock.settimeout(5)
    peer.sock.connect(("127.0.0.1", port))
    return peer.handshake()


def stuck_subscriber(port: int, topic: bytes) -> ZWSPeer:
    """A subscriber that never reads."""
    peer = small_window_peer(port)
    peer.send_frames([b"\x01" + topic])
    return peer


def test_a_page_that_stops_reading_is_closed_alone(tmp_path: Path):
    """20 subscribers that never read while 36,000 events go out: each is closed once its own
    queue passes --web-queue-bytes; the subscriber that reads gets every event in order, and
    canvasd's memory grows by about the bounded queues, not by what the stuck ones were sent."""
    events_port = free_port()
    server = Server(tmp_path, ["--web-endpoint", f"ws://127.0.0.1:{free_port()}", "--web-events", f"ws://127.0.0.1:{events_port}",
                               "--web-queue-bytes", "65536", "--log-level", "warning"])
    context = zmq.Context()
    try:
        dealer = context.socket(zmq.DEALER)
        dealer.connect(server.endpoint)
        dealer.send_multipart([b"", json.dumps({"id": 1, "method": "session.open", "params": {"transitions": "instant"}}).encode()])
        session = json.loads(dealer.recv_multipart()[-1])["result"]["session"]
        topic = f"{session}.".encode()
        stuck = [stuck_subscriber(events_port, topic) for _ in range(20)]
        reader = ZWSPeer(events_port).handshake()
        reader.send_frames([b"\x01" + topic])
        time.sleep(0.3)
        before = rss_kib(server.process.pid)
        received: List[int] = []

        def read_all() -> None:
            while True:
                try:
                    frames = reader.receive_frames()
                except (ConnectionError, OSError):
                    return
                received.append(json.loads(frames[1])["seq"])
                if received[-1] == last[0]:
                    return

        last = [-1]
        thread = threading.Thread(target=read_all)
        thread.start()
        # Pipelined, 100 at a time: each double tap publishes 2 or 3 events, ~150 bytes each.
        started = time.monotonic()
        for batch in range(120):
            for n in range(100):
                dealer.send_multipart([b"", json.dumps({"id": 10 + batch * 100 + n, "method": "pencil.doubleTap",
                                                        "session": session}).encode()])
            for n in range(100):
                dealer.recv_multipart()
        elapsed = time.monotonic() - started
        dealer.send_multipart([b"", json.dumps({"id": 2, "method": "canvas.state", "session": session}).encode()])
        last[0] = json.loads(dealer.recv_multipart()[-1])["result"]["seq"]
        thread.join(timeout=30)
        after = rss_kib(server.process.pid)
        closed = sum(1 for peer in stuck if peer.closed_within(0.5))
        print(f"{last[0]} events in {elapsed:.1f} s; reader got {len(received)}; {closed} of 20 stuck subscribers closed; "
              f"RSS {before} -> {after} KiB")
        assert closed == 20, f"only {closed} of 20 subscribers that never read were closed"
        assert received == list(range(received[0], received[0] + len(received))) and received[-1] == last[0]
        # 20 queues of 64 KiB, and what 12,000 requests cost the process anyway: nowhere near
        # the 20 x 5 MB of events the stuck subscribers were sent.
        assert after - before < 40 * 1024
    finally:
        context.destroy(linger=0)
        server.stop()


def test_revoking_one_token_closes_its_pages_and_no_other(tmp_path: Path):
    """10 tokens, 10 pages each (a request connection and an event connection); one token
    revoked by SIGHUP: its 10 pages are closed within a second, the other 90 keep their sockets
    and are served on them."""
    web = WebCanvasd(tmp_path, TOKENS)
    try:
        pages = []
        for token in TOKENS:
            for n in range(10):
                peer = web.peer()
                assert served(peer, token=token, id=n)
                events = ZWSPeer(web.events_port).handshake()
                events.send_frames([b"\x01" + f"{token}\ndocuments.".encode()])
                pages.append((token, peer, events))
        time.sleep(0.3)
        revoked = TOKENS[3]
        web.write_tokens([token for token in TOKENS if token != revoked])
        web.server.process.send_signal(signal.SIGHUP)
        started = time.monotonic()
        for token, peer, events in pages:
            if token == revoked:
                assert peer.closed_within(1.0) and events.closed_within(1.0), "a revoked page stayed open"
        assert time.monotonic() - started < 1.5
        kept = 0
        for index, (token, peer, events) in enumerate(pages):
            if token != revoked:
                assert served(peer, token=token, id=100 + index), "a page of another token lost its connection"
                kept += 1
        assert kept == 90
        assert not any(events.closed_within(0.01) for token, _, events in pages if token != revoked)
    finally:
        web.stop()


def proxy_header(source: str, command: int = 1) -> bytes:
    signature = b"\r\n\r\n\x00\r\nQUIT\n"
    if command == 0:
        return signature + bytes([0x20, 0x00]) + struct.pack(">H", 0)
    body = socket.inet_aton(source) + socket.inet_aton("127.0.0.1") + struct.pack(">HH", 40000, 80)
    return signature + bytes([0x21, 0x11]) + struct.pack(">H", len(body)) + body


class ProxiedPeer(ZWSPeer):
    """A client as HAProxy forwards it: a PROXY v2 header naming `client`, then the upgrade."""

    def __init__(self, port: int, client: str) -> None:
        super().__init__(port)
        self.sock.sendall(proxy_header(client))


def test_a_proxys_header_names_each_client(tmp_path: Path):
    """With --web-proxy, each client through the proxy counts under its own address: one that
    fills its share pushes out only its own, and a client that authenticated keeps its place."""
    web = WebCanvasd(tmp_path, [ALICE], ["--web-proxy", "127.0.0.1", "--max-web-connections-per-source", "2"])
    try:
        page = ProxiedPeer(web.port, "198.51.100.7").handshake()
        assert served(page)
        crowd = [ProxiedPeer(web.port, "203.0.113.9").handshake() for _ in range(2)]
        third = ProxiedPeer(web.port, "203.0.113.9").handshake()
        assert crowd[0].closed_within(1.0), "the oldest of one client's silent connections was not closed past its share"
        assert not crowd[1].closed_within(0.2)
        # The page's address is another client's: untouched, and it has room for one more.
        assert served(page, id=2)
        assert served(ProxiedPeer(web.port, "198.51.100.7").handshake(), id=3)
        # A connection from the proxy without a header is not taken.
        bare = ZWSPeer(web.port)
        bare.sock.sendall(bare.upgrade_request())
        assert bare.closed_within(2.0)
        # HAProxy's own health check: a LOCAL header, then a plain GET.
        check = socket.create_connection(("127.0.0.1", web.port), timeout=5)
        check.sendall(proxy_header("", command=0) + b"GET /readyz HTTP/1.1\r\nHost: x\r\n\r\n")
        assert check.recv(4096).startswith(b"HTTP/1.1 200")
        third.close()
    finally:
        web.stop()


def test_the_web_ports_answer_a_health_check(tmp_path: Path):
    web = WebCanvasd(tmp_path, [ALICE])
    try:
        for port in (web.port, web.events_port):
            for path, status in ((b"/livez", b"200"), (b"/readyz", b"200"), (b"/", b"426")):
                check = socket.create_connection(("127.0.0.1", port), timeout=5)
                check.sendall(b"GET " + path + b" HTTP/1.1\r\nHost: x\r\n\r\n")
                assert check.recv(4096).split(b"\r\n")[0] == b"HTTP/1.1 " + status + (b" OK" if status == b"200" else b" Upgrade Required")
                check.close()
    finally:
        web.stop()


def server_side_established(port: int, client_port: int) -> bool:
    """Whether canvasd's end of the connection from `client_port` is still established."""
    listing = subprocess.run(["ss", "-Htn", "state", "established", f"( sport = :{port} and dport = :{client_port} )"],
                             capture_output=True, text=True).stdout
    return bool(listing.strip())


def let_go_within(seconds: float, port: int, client_port: int, failure: str) -> None:
    """Waits until canvasd's end of the connection from `client_port` is no longer established."""
    deadline = time.monotonic() + seconds
    while server_side_established(port, client_port):
        assert time.monotonic() < deadline, failure
        time.sleep(0.1)


def test_a_peer_that_closes_and_stops_reading_is_let_go(tmp_path: Path):
    """A peer whose receive window is full sends its close frame and reads nothing more: the
    echo of its close can never be written, and canvasd must end the connection anyway (once,
    it waited for that write for ever, and no rule could close the connection after)."""
    web = WebCanvasd(tmp_path, [ALICE])
    try:
        peer = small_window_peer(web.port)
        assert served(peer)
        for _ in range(4000):   # their pongs fill the window and canvasd's send buffer
            peer.send_raw(0x9, b"x" * 100)
        peer.send_raw(0x8, struct.pack(">H", 1000))
        let_go_within(4.0, web.port, peer.sock.getsockname()[1], "canvasd kept the connection of a peer that closed and stopped reading")
    finally:
        web.stop()


def test_pings_from_a_peer_that_does_not_read_are_held_to_the_queue_bound(tmp_path: Path):
    """Every ping is answered with a pong; a peer that pings and never reads has its pongs
    queued like any message, and is closed once they pass --web-queue-bytes."""
    web = WebCanvasd(tmp_path, [ALICE], ["--web-queue-bytes", "65536"])
    try:
        peer = small_window_peer(web.port)
        assert served(peer)   # authenticated: no timeout will close it
        client_port = peer.sock.getsockname()[1]
        try:
            for _ in range(20000):
                peer.send_raw(0x9, b"x" * 120)
        except OSError:
            pass   # closed while pinging
        let_go_within(4.0, web.port, client_port, "a peer's unread pongs grew without bound")
    finally:
        web.stop()


def test_commands_are_no_requests_and_a_large_message_waits_for_authentication(tmp_path: Path):
    """A SUBSCRIBE command on the request endpoint is not a request (no reply); before it has
    authenticated a peer may send no message larger than a request can be (1009), after it a
    larger one in fragments is read and refused as too large, politely."""
    web = WebCanvasd(tmp_path, [ALICE])
    try:
        peer = web.peer()
        peer.send_message(b"\x02\x09SUBSCRIBE" + b"documents.")
        peer.send_message(b"\x02\x00")   # a command with an empty name
        assert served(peer, id=5)   # the next reply is the request's: nothing answered the commands

        stranger = web.peer()
        stranger.send_raw(0x2, b"\x00" + b"x" * (2 << 20))
        assert stranger.close_code() == 1009

        big = json.dumps({"id": 9, "method": "document.list", "token": ALICE, "params": {"pad": "y" * (2 << 20)}}).encode()
        peer.send_fragmented(b"\x00" + big, parts=40)
        reply = json.loads(peer.receive_frames()[-1])
        assert reply["id"] == 9 and reply["error"]["code"] == "PAYLOAD_TOO_LARGE"
        assert served(peer, id=10)
    finally:
        web.stop()
