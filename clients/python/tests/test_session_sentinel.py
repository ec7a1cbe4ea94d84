"""Shared sessions kept safe from losing Redis's machine (issue 43, item 2): a primary, two
replicas and three sentinels (real redis-server processes, the sentinels in `--sentinel` mode), canvasd
finding the primary through the sentinels (`--session-store redis-sentinel://...`) and counting a
change only once a replica confirmed it (`--session-store-replicas 1`, Redis's WAIT).

- The primary killed (-9) while a client draws, moving between two instances: Sentinel promotes
  the replica, canvasd follows it, no acknowledged stroke is lost, none is drawn twice, and the
  client is answered again within 10 s.
- The replicas paused (SIGSTOP): a change is refused `UNAVAILABLE sessionStore` after the bound,
  never acknowledged on the primary alone; resumed, the same request is answered once.

Two replicas, so that once one is promoted the other still confirms the new primary's writes (with
one, the changes after a failover are refused until the old primary is back, as a replica).
"""

from __future__ import annotations

import shutil
import signal
import sys
import time
from pathlib import Path
from typing import Iterator, List, Tuple

import pytest

from canvasbridge import CanvasClient, CanvasError, CanvasTimeout
from conftest import ROOT, Server

pytestmark = pytest.mark.skipif(not shutil.which("redis-server"), reason="needs redis-server (make system-deps installs it)")

sys.path.insert(0, str(ROOT / "scripts"))
from redis_sentinel import SentinelRedis  # noqa: E402


@pytest.fixture
def sentinels(tmp_path: Path) -> Iterator[SentinelRedis]:
    with SentinelRedis(tmp_path / "redis") as running:
        yield running


def instance(tmp_path: Path, name: str, sentinels: SentinelRedis, documents: Path) -> Server:
    return Server(tmp_path / name, ["--session-store", sentinels.url, "--session-store-replicas", "1",
                                    "--session-store-replica-timeout", "0.5", "--instance", name], documents=documents)


def stroke(number: int) -> dict:
    """A stroke told from every other by where it starts."""
    return {"tool": "pen", "color": "black", "width": 2,
            "points": [{"x": 10 + number, "y": 20}, {"x": 10 + number, "y": 60}]}


def answered(client: CanvasClient, session: str, request_id: str, params: dict, within: float) -> Tuple[dict, int]:
    """The request, sent with one id again and again (as a client retries) until it is answered
    with a result; the result and how many UNAVAILABLE answers came first."""
    deadline = time.monotonic() + within
    refusals = 0
    while True:
        try:
            return client.call("drawing.addStroke", params, session=session, id=request_id), refusals
        except CanvasError as error:
            assert error.code == "UNAVAILABLE" and error.data.get("reason") == "sessionStore", f"{error}"
            refusals += 1
        except CanvasTimeout:
            pass
        assert time.monotonic() < deadline, f"request {request_id} not answered within {within} s ({refusals} refusals)"
        time.sleep(0.1)


def opened(client: CanvasClient) -> str:
    """A new session with its canvas open, ready for strokes."""
    session = client.call("session.open", {"initialized": True, "transitions": "instant"})["session"]
    client.call("canvas.open", {}, session=session)
    return session


def drawn(client: CanvasClient, session: str) -> List[int]:
    """The numbers of the strokes the session holds, in order."""
    strokes = client.call("drawing.get", session=session)["strokes"]
    return [int(s["points"][0]["x"]) - 10 for s in strokes]


def test_the_primary_killed_while_a_client_draws_loses_no_acknowledged_stroke(tmp_path: Path, sentinels: SentinelRedis) -> None:
    documents = tmp_path / "documents"
    documents.mkdir()
    servers = [instance(tmp_path, "a", sentinels, documents), instance(tmp_path, "b", sentinels, documents)]
    clients = [server.client(timeout=2, retries=0) for server in servers]
    try:
        session = opened(clients[0])
        acknowledged: List[int] = []
        slowest, refusals = 0.0, 0
        killed_at = None
        for number in range(40):
            if number == 12:
                assert sentinels.kill_primary() == sentinels.primary_port
                killed_at = time.monotonic()
            where = (number // 4) % 2   # four strokes through one instance, then the other
            started = time.monotonic()
            result, refused = answered(clients[where], session, f"s{number}", stroke(number), within=10.0)
            slowest = max(slowest, time.monotonic() - started)
            refusals += refused
            assert result["strokes"] == len(acknowledged) + 1, f"stroke {number} answered {result} after {acknowledged}"
            acknowledged.append(number)
        promoted = sentinels.primary_named()
        print(f"\nprimary killed at stroke 12: {refusals} UNAVAILABLE answers, slowest stroke {slowest:.2f} s, "
              f"primary now on port {promoted} (replicas were {sentinels.replica_ports})")
        assert promoted in sentinels.replica_ports
        assert killed_at is not None and slowest <= 10.0
        for client in clients:
            assert drawn(client, session) == acknowledged
    finally:
        for client in clients:
            client.close()
        for server in servers:
            server.stop()


def test_paused_replicas_make_changes_refused_never_acknowledged_on_the_primary_alone(tmp_path: Path, sentinels: SentinelRedis) -> None:
    documents = tmp_path / "documents"
    documents.mkdir()
    server = instance(tmp_path, "a", sentinels, documents)
    client = server.client(timeout=3, retries=0)
    try:
        session = opened(client)
        answered(client, session, "first", stroke(1), within=5)
        for index in range(2):
            sentinels.signal(f"replica{index}", signal.SIGSTOP)
        try:
            started = time.monotonic()
            with pytest.raises(CanvasError) as refused:
                client.call("drawing.addStroke", stroke(2), session=session, id="second")
            took = time.monotonic() - started
            assert refused.value.code == "UNAVAILABLE" and refused.value.data.get("reason") == "sessionStore", f"{refused.value}"
            print(f"\nreplicas paused: the change refused after {took:.2f} s ({refused.value.message})")
            assert took >= 0.4, "refused before the replicas had their time"
            # Still refused while the replicas are paused, however often it is asked.
            time.sleep(0.6)
            with pytest.raises(CanvasError):
                client.call("drawing.addStroke", stroke(2), session=session, id="second")
        finally:
            for index in range(2):
                sentinels.signal(f"replica{index}", signal.SIGCONT)
        SentinelRedis.wait(lambda: all(sentinels.link_up(port) for port in sentinels.replica_ports), "the replicas to catch up")
        # The same request again: answered once, the stroke drawn once.
        result, _ = answered(client, session, "second", stroke(2), within=10)
        assert result["strokes"] == 2
        assert drawn(client, session) == [1, 2]
    finally:
        client.close()
        server.stop()
