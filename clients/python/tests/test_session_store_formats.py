"""Sessions an earlier canvasd left in Redis are taken over by this one, exactly.

tests/fixtures/session-store/*.json were captured from a real canvasd of an earlier build (its
commit in the file) with real Redis: a session drawn, edited, undone and retried on it, then
every key it kept, byte for byte, and the replies its client was given. Each test restores those
keys into a redis-server of its own, lets this build take the session over, and checks that it
answers as the earlier one did: the drawing, the state, a retry of an answered request; then
that it writes on from there (the earlier build's log of byte deltas, then this build's
operation entries) and that a second instance takes that over too.

To capture a new fixture from another build (not run by the tests):

    CANVASD=/path/to/old/canvasd python tests/test_session_store_formats.py capture NAME
"""

from __future__ import annotations

import base64
import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest

from canvasbridge import CanvasClient
from conftest import Server

FIXTURES = Path(__file__).parent / "fixtures" / "session-store"


def strokes(count: int):
    """Wavy strokes of different lengths and pressures, one after the other along a line."""
    for index in range(count):
        length = 15 + (index * 37) % 90
        yield [{"x": round(40 + index * 11.3 + step * 0.9, 2), "y": round(100 + 30 * math.sin(step / 7 + index), 2),
                "pressure": round(0.3 + 0.5 * abs(math.sin(step / 11)), 3)} for step in range(length)]


def scenario():
    """The requests the fixture's session got, in order (method, params)."""
    steps = [("canvas.open", {})]
    for index, points in enumerate(strokes(24)):
        steps.append(("drawing.addStroke", {"tool": "highlighter" if index % 9 == 4 else "pen",
                                            "color": ["black", "blue", "#12AbEf"][index % 3], "width": 2 + index % 4,
                                            "points": points}))
        if index % 8 == 7:
            steps.append(("drawing.undo", {}))
        if index == 12:
            steps.append(("drawing.addText", {"text": "margin note ✓", "x": 30.5, "y": 400, "fontSize": 14}))
            steps.append(("drawing.erase", {"x": 300, "y": 100, "radius": 8, "mode": "partial"}))
    steps.append(("pencil.doubleTap", {}))
    steps.append(("pencil.doubleTap", {}))
    return steps


def capture(name: str) -> None:
    import redis
    import tempfile
    from web import free_port, wait_for_port

    canvasd = os.environ["CANVASD"]
    commit = subprocess.run(["git", "-C", str(Path(canvasd).parents[2]), "rev-parse", "HEAD"],
                            capture_output=True, text=True).stdout.strip()
    with tempfile.TemporaryDirectory() as folder:
        port = free_port()
        redis_process = subprocess.Popen(["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", "",
                                          "--appendonly", "no", "--dir", folder], stdout=subprocess.DEVNULL)
        wait_for_port(port, redis_process, "redis-server")
        server = Server(Path(folder) / "old", ["--session-store", f"redis://127.0.0.1:{port}", "--instance", "old"])
        try:
            sent = []
            with server.client() as client:
                opened = client.request({"id": 1, "method": "session.open", "params": {"transitions": "instant"}})
                session = opened["result"]["session"]
                for number, (method, params) in enumerate(scenario(), start=2):
                    message = {"id": number, "method": method, "params": params, "session": session}
                    sent.append({"message": message, "reply": client.request(message)})
                final = {method: client.request({"id": 10_000 + i, "method": method, "params": {}, "session": session})
                         for i, method in enumerate(["drawing.get", "canvas.state"])}
            keys = {}
            kept = redis.Redis(port=port)
            for key in kept.scan_iter(match=b"canvas:session:*"):
                if b":instance:" in key:
                    continue
                kind = kept.type(key)
                if kind == b"hash":
                    keys[key.decode()] = {"hash": {field.decode(): base64.b64encode(value).decode()
                                                   for field, value in kept.hgetall(key).items()}}
                elif kind == b"list":
                    keys[key.decode()] = {"list": [base64.b64encode(value).decode() for value in kept.lrange(key, 0, -1)]}
            FIXTURES.mkdir(parents=True, exist_ok=True)
            (FIXTURES / f"{name}.json").write_text(json.dumps({
                "canvasd": commit, "session": session, "sent": sent, "final": final, "keys": keys}, indent=1) + "\n")
        finally:
            server.stop()
            redis_process.terminate()


def restore(fixture, client) -> None:
    for key, value in fixture["keys"].items():
        if "hash" in value:
            client.hset(key, mapping={field: base64.b64decode(data) for field, data in value["hash"].items()})
        else:
            client.rpush(key, *[base64.b64decode(data) for data in value["list"]])
        client.pexpire(key, 600_000)


@pytest.mark.parametrize("name", sorted(path.stem for path in FIXTURES.glob("*.json")))
def test_an_earlier_canvasds_session_is_taken_over_exactly(tmp_path: Path, store, name: str):
    url, kept = store
    fixture = json.loads((FIXTURES / f"{name}.json").read_text())
    restore(fixture, kept)
    session = fixture["session"]
    untagged, key = f"canvas:session:{session}", f"canvas:session:{{{session}}}"
    # What the earlier build left, under keys without a hash tag: a base and a log of its byte
    # deltas, held by it.
    assert kept.hget(untagged, "holder") == b"old"
    assert kept.llen(f"{untagged}:log") > 0 and all(entry.startswith(b"CBD1") for entry in kept.lrange(f"{untagged}:log", 0, -1))

    new = Server(tmp_path / "new", ["--session-store", url, "--instance", "new"])
    other = Server(tmp_path / "other", ["--session-store", url, "--instance", "other"])
    try:
        with new.client() as client:
            for method, recorded in fixture["final"].items():
                reply = client.request({"id": recorded["id"], "method": method, "params": {}, "session": session})
                assert reply == recorded, method
            assert kept.hget(key, "holder") == b"new"
            # Moved to the tagged keys, every one, none without a time to live.
            assert not kept.keys(f"{untagged}*")
            assert sorted(kept.keys(f"{key}*")) == sorted(name.replace(untagged, key).encode() for name in fixture["keys"])
            assert kept.pttl(f"{key}:log") > 0
            # A retry of the last change, and of one long before it: the reply the client was
            # given, from the reply cache and from the store's record of answered requests.
            for exchange in (fixture["sent"][-1], fixture["sent"][5]):
                assert client.request(exchange["message"]) == exchange["reply"], exchange["message"]["method"]
            # It writes on from there: its own entries after the earlier build's deltas.
            added = client.request({"id": 20_000, "method": "drawing.addStroke", "session": session,
                                    "params": {"tool": "pen", "color": "red", "width": 3, "points": next(strokes(1))}})
            assert "result" in added, added
            # (That entry carries the replies of the reads before it, which a retry of them
            # is answered with, byte for byte, wherever it goes; the next carries its stroke.)
            added = client.request({"id": 20_001, "method": "drawing.addStroke", "session": session,
                                    "params": {"tool": "pen", "color": "red", "width": 3, "points": next(strokes(1))[:30]}})
            log = kept.lrange(f"{key}:log", 0, -1)
            assert all(entry.startswith(b"CBD1") for entry in log[:-2]) and log[-1].startswith(b"CBO1"), [entry[:4] for entry in log]
            assert len(log[-1]) < 400, len(log[-1])
            undone = client.request({"id": 20_009, "method": "drawing.undo", "session": session, "params": {}})
            assert undone["result"]["strokes"] == added["result"]["strokes"] - 1
            drawing = client.request({"id": 20_002, "method": "drawing.get", "session": session, "params": {}})
        # Another instance takes over the mixed log: the same drawing, and the redo it left.
        with other.client() as client:
            taken = client.request({"id": 20_002, "method": "drawing.get", "session": session, "params": {}})
            assert taken == drawing
            redone = client.request({"id": 20_003, "method": "drawing.redo", "session": session, "params": {}})
            assert redone["result"]["strokes"] == added["result"]["strokes"]
            assert kept.hget(key, "holder") == b"other"
    finally:
        new.stop()
        other.stop()


if __name__ == "__main__" and len(sys.argv) == 3 and sys.argv[1] == "capture":
    capture(sys.argv[2])
