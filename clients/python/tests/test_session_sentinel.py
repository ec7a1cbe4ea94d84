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

import os
import shutil
import signal
import subprocess
import time
from pathlib import Path
from typing import Dict, Iterator, List, Optional, Tuple

import pytest
import redis

from canvasbridge import CanvasClient, CanvasError, CanvasTimeout
from conftest import Server
from web import free_port, wait_for_port

pytestmark = pytest.mark.skipif(not shutil.which("redis-server"), reason="needs redis-server (make system-deps installs it)")

MASTER = "canvas"


class SentinelRedis:
    """A primary, two replicas and three sentinels on loopback, nothing saved to disk."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        folder.mkdir(parents=True, exist_ok=True)
        self.processes: Dict[str, subprocess.Popen] = {}
        self.primary_port = free_port()
        self._start("primary", ["--port", str(self.primary_port)])
        self.replica_ports = [free_port(), free_port()]
        for index, port in enumerate(self.replica_ports):
            self._start(f"replica{index}", ["--port", str(port), "--replicaof", "127.0.0.1", str(self.primary_port)])
        self.sentinel_ports: List[int] = []
        for index in range(3):
            port = free_port()
            config = folder / f"sentinel{index}.conf"
            # Sentinel rewrites its file as it learns; each gets its own.
            config.write_text(f"port {port}\nbind 127.0.0.1\ndir {folder}\n"
                              f"sentinel monitor {MASTER} 127.0.0.1 {self.primary_port} 2\n"
                              f"sentinel down-after-milliseconds {MASTER} 1000\n"
                              f"sentinel failover-timeout {MASTER} 4000\n"
                              f"sentinel parallel-syncs {MASTER} 1\n")
            self.processes[f"sentinel{index}"] = subprocess.Popen(
                ["redis-server", str(config), "--sentinel"], stdout=open(folder / f"sentinel{index}.log", "wb"), stderr=subprocess.STDOUT)
            wait_for_port(port, self.processes[f"sentinel{index}"], "redis-sentinel")
            self.sentinel_ports.append(port)
        self.wait(lambda: all(self.link_up(port) for port in self.replica_ports), "the replicas' links to the primary")
        self.wait(lambda: all(len(self.sentinel(i).sentinel_slaves(MASTER)) == 2 for i in range(3)), "every sentinel to know both replicas")

    def _start(self, name: str, arguments: List[str]) -> None:
        port = int(arguments[1])
        self.processes[name] = subprocess.Popen(
            ["redis-server", "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--dir", str(self.folder), *arguments],
            stdout=open(self.folder / f"{name}.log", "wb"), stderr=subprocess.STDOUT)
        wait_for_port(port, self.processes[name], f"redis-server ({name})")

    @property
    def url(self) -> str:
        return "redis-sentinel://" + ",".join(f"127.0.0.1:{port}" for port in self.sentinel_ports) + f"/{MASTER}"

    def sentinel(self, index: int) -> redis.Redis:
        return redis.Redis(port=self.sentinel_ports[index], socket_timeout=2)

    def link_up(self, port: int) -> bool:
        try:
            return redis.Redis(port=port, socket_timeout=1).info("replication").get("master_link_status") == "up"
        except redis.RedisError:
            return False

    def primary_named(self) -> Optional[int]:
        try:
            host, port = self.sentinel(0).sentinel_get_master_addr_by_name(MASTER)
            return int(port)
        except (redis.RedisError, TypeError):
            return None

    @staticmethod
    def wait(condition, what: str, timeout: float = 20.0) -> None:
        deadline = time.monotonic() + timeout
        while not condition():
            if time.monotonic() > deadline:
                raise AssertionError(f"waited {timeout} s for {what}")
            time.sleep(0.1)

    def signal(self, name: str, number: int) -> None:
        os.kill(self.processes[name].pid, number)

    def stop(self) -> None:
        for process in self.processes.values():
            if process.poll() is None:
                try:
                    os.kill(process.pid, signal.SIGCONT)
                except ProcessLookupError:
                    pass
                process.kill()
                process.wait(timeout=5)


@pytest.fixture
def sentinels(tmp_path: Path) -> Iterator[SentinelRedis]:
    running = SentinelRedis(tmp_path / "redis")
    try:
        yield running
    finally:
        running.stop()


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
                sentinels.signal("primary", signal.SIGKILL)
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
