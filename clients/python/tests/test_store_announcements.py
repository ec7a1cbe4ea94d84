"""What a soak with the session store found (issue 47): a save never announced, an idle
session never told it expired. Each case runs with and without `--session-store` (a real
redis-server), and both must say the same to a subscriber.

- The document feed's mark, which keeps a save from being announced twice, was keyed on the
  document's name, the revision and its sha256. A history that starts again (its folder
  removed, which spec 5.1 allows) hands out the same numbers, and the same edit makes the same
  bytes: the second save was never announced with the store. Each mark also lived a day.
- With the store, an idle session's key in Redis lived exactly the idle timeout, so Redis let
  it go before the sweep expired the session; the sweep's removal came back "lost" and the
  session was dropped with no `session.expired` and nothing logged.
"""

from __future__ import annotations

import shutil
import time
from pathlib import Path
import pytest

from canvasbridge import CanvasError, EventSubscriber
from conftest import ROOT, Server

pytestmark = pytest.mark.skipif(not shutil.which("redis-server"), reason="needs redis-server (make system-deps installs it)")

IDLE = 2
DRAWING = {"strokes": [{"tool": "pen", "color": "blue", "width": 3,
                        "points": [{"x": 72, "y": 220, "pressure": 0.5}, {"x": 200.25, "y": 250}]}], "texts": []}


def start(tmp_path: Path, store, keeping: str, idle: int = IDLE) -> Server:
    url, _ = store
    arguments = ["--idle-timeout", str(idle), "--log-level", "info"]
    if keeping != "local":
        arguments += ["--session-store", url, "--instance", "a"]
    return Server(tmp_path / "server", arguments)


@pytest.mark.parametrize("keeping", ["local", "shared", "shared, key gone"])
def test_an_idle_session_is_announced_expired_once_and_logged(tmp_path: Path, store, keeping: str) -> None:
    """`session.expired` once, about the idle timeout after the last request, and a line in the
    log; afterwards the session is unknown. "key gone": the store lets the session's key go
    before the sweep (deleted by hand, as an eviction or a restart without persistence would)."""
    _, redis_client = store
    server = start(tmp_path, store, keeping)
    try:
        with server.client(timeout=10, retries=0) as client:
            session = client.open_session(transitions="instant")
            with EventSubscriber(server.events, f"{session.id}.") as events:
                events.ready()
                session.open()
                touched = time.monotonic()
                if keeping == "shared, key gone":
                    assert redis_client.delete(f"canvas:session:{{{session.id}}}") == 1
                heard, expired_at = [], None
                while expired_at is None and time.monotonic() < touched + IDLE + 8:
                    event = events.next(timeout=0.2)
                    if event is not None:
                        heard.append(event)
                        if event.event == "session.expired":
                            expired_at = time.monotonic()
                heard += events.drain(quiet=2.0)
            names = [event.event for event in heard]
            assert names.count("session.expired") == 1, names
            assert IDLE - 0.1 <= expired_at - touched <= IDLE + 2.5, expired_at - touched
            with pytest.raises(CanvasError) as unknown:
                session.state()
            assert unknown.value.code == "UNKNOWN_SESSION"
        logged = [line for line in server.log.read_text().splitlines() if "session.expired" in line and session.id in line]
        assert len(logged) == 1, server.log.read_text()[-3000:]
        if keeping != "local":
            assert not redis_client.keys(f"canvas:session:{{{session.id}}}*"), "the expired session is still in the store"
    finally:
        server.stop()


@pytest.mark.parametrize("keeping", ["local", "shared"])
def test_a_save_is_announced_again_when_its_history_starts_again(tmp_path: Path, store, keeping: str) -> None:
    """The same edit saved into the same document twice, the history's folder removed in
    between: both saves are revision 2 with the same sha256, and both are announced. With the
    store, the marks that keep a save from being announced twice live no longer than a
    session can retry its request."""
    _, redis_client = store
    server = start(tmp_path, store, keeping, idle=60)
    document = server.documents / "doc.pdf"
    original = (ROOT / "samples" / "notes.pdf").read_bytes()
    document.write_bytes(original)
    try:
        with server.client(timeout=10, retries=0) as client, EventSubscriber(server.events, "documents.") as events:
            events.ready()
            saves = []
            for round in range(3):
                if round:
                    shutil.rmtree(server.documents / ".canvas-revisions" / "doc.pdf")
                    document.write_bytes(original)
                result = client.call("document.flatten", {"name": "doc.pdf", "page": 0, "drawing": DRAWING})
                saves.append((result["revision"], result["sha256"]))
            assert saves == [saves[0]] * 3, f"the premise: one save made three times ({saves})"
            heard = [event for event in events.drain(quiet=1.5) if event.event == "document.saved"]
        assert [(event.data["revision"], event.data["sha256"]) for event in heard] == saves
        seqs = [event.seq for event in heard]
        assert seqs == list(range(seqs[0], seqs[0] + 3)), seqs
        if keeping == "shared":
            marks = redis_client.keys("canvas:documents:announced:*")
            assert marks, "no mark kept: a save announced again would not be dropped"
            ttls = [redis_client.ttl(mark) for mark in marks]
            assert all(0 < ttl <= 2 * 60 for ttl in ttls), ttls
    finally:
        server.stop()


def test_another_programs_message_on_the_document_feed_is_skipped_and_logged(tmp_path: Path, store) -> None:
    """Another program's PUBLISH on the feed's channel is no announcement: it reaches no
    subscriber, the next save is relayed as ever, and canvasd's log says it skipped one (before,
    it was dropped with nothing said anywhere)."""
    _, redis_client = store
    server = start(tmp_path, store, "shared", idle=60)
    document = server.documents / "doc.pdf"
    document.write_bytes((ROOT / "samples" / "notes.pdf").read_bytes())
    try:
        with server.client(timeout=10, retries=0) as client, EventSubscriber(server.events, "documents.") as events:
            events.ready()
            assert redis_client.publish("canvas:documents:feed", b"not an announcement") == 1
            result = client.call("document.flatten", {"name": "doc.pdf", "page": 0, "drawing": DRAWING})
            heard = [event for event in events.drain(quiet=1.5)]
        assert [(event.event, event.data["revision"]) for event in heard] == [("document.saved", result["revision"])]
        skipped = [line for line in server.log.read_text().splitlines() if "no announcement; skipped" in line]
        assert len(skipped) == 1 and "not an announcement" in skipped[0], server.log.read_text()[-3000:]
    finally:
        server.stop()
