"""CurveZMQ: only allowed keys get in, and each client's sessions and events are its own.

The server's and one client's keys come from ``canvasctl keygen``, the others from the Python
client's ``generate_keys``, so both writers and both readers of key files are exercised.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import time
from pathlib import Path

import pytest
import zmq

from canvasbridge import CanvasClient, CanvasError, CanvasTimeout, CurveKeys, EventSubscriber, generate_keys
from conftest import CORPUS, Server, canvasd_path



def canvasctl(*arguments: str) -> subprocess.CompletedProcess:
    return subprocess.run([str(canvasd_path().parent / "canvasctl"), *arguments], capture_output=True, text=True)


@pytest.fixture
def keys(tmp_path: Path):
    folder = tmp_path / "keys"
    allowed = folder / "allowed"
    allowed.mkdir(parents=True)
    assert canvasctl("keygen", str(folder / "server")).returncode == 0
    assert canvasctl("keygen", str(folder / "alice")).returncode == 0
    generate_keys(folder / "bob")
    generate_keys(folder / "mallory")
    assert oct((folder / "alice.key").stat().st_mode & 0o777) == "0o600"
    shutil.copy(folder / "alice.pub", allowed)
    shutil.copy(folder / "bob.pub", allowed)

    def credentials(name: str) -> CurveKeys:
        return CurveKeys.from_files(folder / "server.pub", folder / f"{name}.key")

    credentials.folder = folder
    return credentials


@pytest.fixture
def secure(tmp_path: Path, keys):
    server = Server(tmp_path / "server", ["--curve-secret-key", str(keys.folder / "server.key"),
                                           "--allowed-keys", str(keys.folder / "allowed")],
                    curve=keys("alice"))
    yield server
    server.stop()


def no_reply(server: Server, curve) -> bool:
    """True when a hello from a client with these keys (or none) gets no reply at all."""
    with CanvasClient(server.endpoint, timeout=1.0, retries=0, curve=curve) as client:
        try:
            client.hello()
        except CanvasTimeout:
            return True
    return False


def test_only_allowed_keys_get_replies(secure, keys):
    assert not no_reply(secure, keys("alice"))
    assert not no_reply(secure, keys("bob"))
    assert no_reply(secure, None), "a client without keys got a reply"
    assert no_reply(secure, keys("mallory")), "a client with an unknown key got a reply"
    # A client that trusts the wrong server key cannot complete the handshake either.
    wrong_server = CurveKeys(keys("mallory").public, keys("alice").public, keys("alice").secret)
    assert no_reply(secure, wrong_server)
    assert "client key refused" in secure.log.read_text()


def test_strangers_see_no_events(secure, keys):
    alice = CanvasClient(secure.endpoint, curve=keys("alice"))
    session = alice.open_session()
    mine = EventSubscriber(secure.events, prefix=session.id + ".", curve=keys("alice"))
    mine.ready()
    strangers = []
    for curve in (None, keys("mallory")):
        subscriber = EventSubscriber(secure.events, prefix="", curve=curve)
        strangers.append(subscriber)
    # An allowed client that asks for everything, for alice's session, or for a prefix that
    # would match it, gets none of it.
    for prefix in ("", session.id + ".", session.id, session.id[:1], session.id + ".canvas"):
        subscriber = EventSubscriber(secure.events, prefix=prefix, curve=keys("bob"))
        subscriber.ready()
        strangers.append(subscriber)
    time.sleep(0.2)

    session.open()
    session.add_stroke([(10, 10), (20, 20)])
    session.double_tap()
    seen = mine.drain()
    assert {"canvas.stateChanged", "canvas.result", "pencil.doubleTap"} <= {e.event for e in seen}, seen
    assert [e.seq for e in seen] == list(range(1, len(seen) + 1))
    assert all(e.session == session.id for e in seen)
    for subscriber in strangers:
        assert subscriber.drain(0.3) == [], "another client saw alice's events"
    for subscriber in [mine, *strangers]:
        subscriber.close()
    alice.close()


def test_sessions_belong_to_their_client(secure, keys):
    with CanvasClient(secure.endpoint, curve=keys("alice")) as alice, \
            CanvasClient(secure.endpoint, curve=keys("bob")) as bob:
        session = alice.open_session()
        session.open()
        session.add_stroke([(10, 10), (20, 20)])
        before = session.get_drawing()
        for method, params in [("canvas.state", {}), ("drawing.get", {}), ("drawing.clear", {}),
                               ("canvas.cancel", {}), ("pencil.doubleTap", {}), ("session.close", {})]:
            with pytest.raises(CanvasError) as refused:
                bob.call(method, params, session=session.id)
            assert refused.value.code == "UNKNOWN_SESSION"
            # Exactly what a session that never existed gets: nothing tells bob it is there.
            with pytest.raises(CanvasError) as missing:
                bob.call(method, params, session="0123456789abcdef")
            assert missing.value.message.replace("0123456789abcdef", session.id) == refused.value.message
        assert session.get_drawing() == before
        assert session.state()["state"] == "open"
        # Bob's own sessions work as usual.
        assert bob.open_session().open()["state"] == "open"


def test_shared_document_events_name_no_session(secure, keys, tmp_path):
    shutil.copy(CORPUS / "labelled_pages.pdf", secure.documents / "notes.pdf")
    with CanvasClient(secure.endpoint, curve=keys("alice")) as alice, \
            EventSubscriber(secure.events, prefix="documents.", curve=keys("bob")) as documents:
        documents.ready()
        session = alice.open_session()
        session.open(document="notes.pdf", page=0)
        session.add_stroke([(10, 10), (20, 20)], color="red", width=3)
        assert session.submit()["document"]["revision"] == 2
        events = documents.drain()
        assert [e.event for e in events] == ["document.saved"]
        assert events[0].data["name"] == "notes.pdf" and "session" not in events[0].data
        assert session.id not in json.dumps(events[0].data)


def test_allowed_keys_reload_on_sighup(secure, keys):
    assert no_reply(secure, keys("mallory"))
    shutil.copy(keys.folder / "mallory.pub", keys.folder / "allowed")
    secure.process.send_signal(signal.SIGHUP)
    deadline = time.monotonic() + 5
    while "allowed keys reloaded" not in secure.log.read_text() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not no_reply(secure, keys("mallory"))
    # Removing a key shuts out new connections of that client.
    (keys.folder / "allowed" / "mallory.pub").unlink()
    secure.process.send_signal(signal.SIGHUP)
    time.sleep(0.3)
    assert no_reply(secure, keys("mallory"))


def test_per_client_session_limit(tmp_path, keys):
    server = Server(tmp_path / "limited", ["--curve-secret-key", str(keys.folder / "server.key"),
                                            "--allowed-keys", str(keys.folder / "allowed"),
                                            "--max-sessions-per-client", "2"], curve=keys("alice"))
    try:
        with CanvasClient(server.endpoint, curve=keys("alice")) as alice, \
                CanvasClient(server.endpoint, curve=keys("bob")) as bob:
            assert alice.hello()["limits"]["maxSessionsPerClient"] == 2
            first = alice.open_session()
            alice.open_session()
            with pytest.raises(CanvasError) as full:
                alice.open_session()
            assert full.value.code == "UNAVAILABLE"
            bob.open_session()  # another client is not held back by alice's sessions
            first.close()
            alice.open_session()
    finally:
        server.stop()


def test_without_keys_only_loopback(tmp_path):
    documents = tmp_path / "documents"
    documents.mkdir()
    refused = subprocess.run([str(canvasd_path()), "--endpoint", "tcp://0.0.0.0:0", "--events", "tcp://127.0.0.1:0",
                              "--documents", str(documents)], capture_output=True, text=True, timeout=10)
    assert refused.returncode != 0
    assert "refusing to serve tcp://0.0.0.0:0 without authentication" in refused.stderr
    server = Server(tmp_path / "open")
    try:
        log = server.log.read_text()
        assert "serving without authentication, on loopback only" in log
        assert f"requests={server.endpoint}" in log, log  # the endpoint clients use, not an internal one
    finally:
        server.stop()
    # Half a key configuration is a usage error, not a silently open server.
    half = subprocess.run([str(canvasd_path()), "--allowed-keys", str(tmp_path)], capture_output=True, text=True, timeout=10)
    assert half.returncode != 0 and "go together" in half.stderr


def test_allowed_keys_as_one_file_of_bare_keys(tmp_path, keys):
    """A single file, one bare Z85 key per line: keys that contain '=' or start with '#' (both
    Z85 characters) are keys, not assignments or comments."""
    import zmq

    others = [zmq.curve_keypair()[0].decode() for _ in range(60)]
    alice = keys("alice").public.decode()
    listing = tmp_path / "allowed.txt"
    listing.write_text("# the allowed clients\n" + "\n".join(others + [alice]) + "\n")
    assert any("=" in key for key in others)
    server = Server(tmp_path / "file", ["--curve-secret-key", str(keys.folder / "server.key"),
                                         "--allowed-keys", str(listing)], curve=keys("alice"))
    try:
        assert not no_reply(server, keys("alice"))
        assert no_reply(server, keys("bob"))
        assert "allowedKeys=61" in server.log.read_text()
    finally:
        server.stop()
