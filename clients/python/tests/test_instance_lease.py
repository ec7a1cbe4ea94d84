"""An instance's name (`--instance`) is a lease in the session store, renewed every second. A
canvasd killed -9 never gives it back; started again at once under its own name, it must wait
the lease out and start (as systemd's `Restart=` or a container restart starts it), not refuse.
It refuses only a name whose lease is renewed for a whole lease period: a live canvasd's.
Real Redis, real canvasd processes, readiness read over the health endpoint."""

from __future__ import annotations

import contextlib
import shutil
import signal
import subprocess
import time
from pathlib import Path
from typing import Iterator, List

import pytest

from canvasbridge import CanvasClient
from conftest import Server, canvasd_path
from test_health import get, redis_server
from web import free_port

pytestmark = pytest.mark.skipif(not shutil.which("redis-server"), reason="needs redis-server (make system-deps installs it)")

# SharedSessions.nameLease.
LEASE = 10.0
WAITING = "waiting to see whether its holder renews it"


class Started:
    """A canvasd started without waiting for it: its process, health port and log."""

    def __init__(self, folder: Path, redis_port: int, name: str):
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "documents").mkdir(exist_ok=True)
        self.health = free_port()
        self.log = folder / "canvasd.log"
        with open(self.log, "ab") as log:
            self.process = subprocess.Popen(
                [str(canvasd_path()), "--endpoint", f"ipc://{folder}/requests", "--events", f"ipc://{folder}/events",
                 "--documents", str(folder / "documents"), "--session-store", f"redis://127.0.0.1:{redis_port}",
                 "--instance", name, "--health-endpoint", f"127.0.0.1:{self.health}", "--drain-seconds", "0"],
                stdout=log, stderr=subprocess.STDOUT)
        self.started = time.monotonic()

    def ready(self) -> bool:
        try:
            return get(self.health, "/readyz")[0] == 200
        except OSError:
            return False

    def ready_within(self, seconds: float) -> float:
        """Seconds from its start until /readyz said 200; fails past `seconds` or if it exits."""
        while not self.ready():
            assert self.process.poll() is None, f"canvasd exited {self.process.returncode}:\n{self.log.read_text()}"
            assert time.monotonic() - self.started < seconds, f"not ready {seconds} s after its start:\n{self.log.read_text()}"
            time.sleep(0.05)
        return time.monotonic() - self.started

    def text(self) -> str:
        return self.log.read_text(errors="replace")

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait()


@contextlib.contextmanager
def processes() -> Iterator[List[Started]]:
    started: List[Started] = []
    try:
        yield started
    finally:
        for each in started:
            each.stop()


def holder(tmp_path: Path, redis_port: int, name: str) -> Server:
    """A canvasd holding `name`, serving, and past its first renewal of the lease."""
    server = Server(tmp_path / "holder", ["--session-store", f"redis://127.0.0.1:{redis_port}", "--instance", name,
                                          "--drain-seconds", "0"])
    time.sleep(1.5)
    return server


def test_an_instance_killed_and_started_again_at_once_is_ready_within_the_lease_and_2_s(tmp_path: Path):
    with redis_server(tmp_path) as (redis_port, _), processes() as started:
        first = holder(tmp_path, redis_port, "east-1")
        first.process.send_signal(signal.SIGKILL)
        first.process.wait()
        again = Started(tmp_path / "again", redis_port, "east-1")
        started.append(again)
        took = again.ready_within(LEASE + 2)
        # It did wait for the killed one's lease, and said why.
        assert WAITING in again.text(), again.text()
        assert "its lease ran out without being renewed" in again.text(), again.text()
        assert took > LEASE - 3, f"ready after {took:.1f} s: the killed instance's lease was not in the way"
        with CanvasClient(f"ipc://{tmp_path}/again/requests") as client:
            assert client.hello()["instance"] == "east-1"
        print(f"\nkilled -9 and started again at once under its own name: ready after {took:.1f} s (lease {LEASE:.0f} s)")


def test_a_second_canvasd_given_a_live_ones_name_refuses_after_a_whole_lease_period(tmp_path: Path):
    with redis_server(tmp_path) as (redis_port, _), processes() as started:
        live = holder(tmp_path, redis_port, "east-1")
        try:
            twin = Started(tmp_path / "twin", redis_port, "east-1")
            started.append(twin)
            code = twin.process.wait(timeout=LEASE + 5)
            took = time.monotonic() - twin.started
            assert code == 1, twin.text()
            assert "held by another live canvasd" in twin.text() and "--instance" in twin.text(), twin.text()
            assert WAITING in twin.text(), twin.text()
            # It watched a whole lease period before it refused.
            assert LEASE <= took < LEASE + 3, f"refused after {took:.1f} s"
            # The live one never noticed.
            assert live.process.poll() is None
            with live.client() as client:
                assert client.hello()["instance"] == "east-1"
        finally:
            live.stop()


def test_a_holder_killed_while_another_waits_for_its_name_lets_it_start(tmp_path: Path):
    """The holder renews for part of the lease period the newcomer watches, then is killed:
    its lease was not renewed for a whole period, so the newcomer waits it out and starts."""
    with redis_server(tmp_path) as (redis_port, _), processes() as started:
        first = holder(tmp_path, redis_port, "east-1")
        again = Started(tmp_path / "again", redis_port, "east-1")
        started.append(again)
        time.sleep(LEASE - 2)
        assert again.process.poll() is None, again.text()
        first.process.send_signal(signal.SIGKILL)
        first.process.wait()
        killed = time.monotonic()
        again.ready_within(LEASE - 2 + LEASE + 2 + 1)
        took = time.monotonic() - killed
        assert took < LEASE + 2, f"ready {took:.1f} s after the holder was killed"
        assert "its lease ran out without being renewed" in again.text(), again.text()


def test_sigterm_while_waiting_for_the_name_stops_at_once(tmp_path: Path):
    with redis_server(tmp_path) as (redis_port, _), processes() as started:
        first = holder(tmp_path, redis_port, "east-1")
        first.process.send_signal(signal.SIGKILL)
        first.process.wait()
        again = Started(tmp_path / "again", redis_port, "east-1")
        started.append(again)
        deadline = time.monotonic() + 5
        while WAITING not in again.text():
            assert time.monotonic() < deadline and again.process.poll() is None, again.text()
            time.sleep(0.05)
        sent = time.monotonic()
        again.process.send_signal(signal.SIGTERM)
        assert again.process.wait(timeout=3) == 0, again.text()
        assert time.monotonic() - sent < 1, "SIGTERM waited for the lease"
        assert "stopped before it served" in again.text(), again.text()
