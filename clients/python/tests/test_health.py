"""The health endpoint (`--health-endpoint`): liveness from the request loop, readiness with
the session store, and metrics in Prometheus's text format, read over real HTTP from a real
canvasd."""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Iterator, Tuple

import pytest
import zmq

from canvasbridge.client import CanvasError
from conftest import Server
from web import free_port, wait_for_port


def get(port: int, path: str):
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=5) as response:
            return response.status, response.read().decode(), response.headers.get("Content-Type")
    except urllib.error.HTTPError as error:
        return error.code, error.read().decode(), error.headers.get("Content-Type")


SAMPLE = re.compile(r'^[a-zA-Z_:][a-zA-Z0-9_:]*(\{[a-zA-Z_][a-zA-Z0-9_]*="(\\.|[^"\\])*"(,[a-zA-Z_][a-zA-Z0-9_]*="(\\.|[^"\\])*")*\})? -?[0-9.e+]+$|^[a-zA-Z_:][a-zA-Z0-9_:]*(\{.*\})? \+Inf$')


def parse(text: str) -> dict:
    """Samples by name and labels, checking every line is a HELP, TYPE or sample line and
    every sample's family was declared with a TYPE before it."""
    samples, types = {}, {}
    for line in text.splitlines():
        if line.startswith("# HELP "):
            continue
        if line.startswith("# TYPE "):
            _, _, name, kind = line.split(" ", 3)
            assert kind in ("counter", "gauge", "histogram"), line
            types[name] = kind
            continue
        assert SAMPLE.match(line), f"not a sample line: {line!r}"
        name_labels, value = line.rsplit(" ", 1)
        name = name_labels.split("{", 1)[0]
        family = re.sub(r"_(bucket|sum|count)$", "", name) if name not in types else name
        assert family in types, f"{name} has no # TYPE"
        if types[family] == "counter":
            assert name.endswith("_total"), name
        samples[name_labels] = float(value)
    return samples


@contextlib.contextmanager
def redis_server(folder: Path) -> Iterator[Tuple[int, subprocess.Popen]]:
    """A Redis of the test's own (no persistence), listening: its port and process."""
    port = free_port()
    process = subprocess.Popen(["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--dir", str(folder)],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_for_port(port, process, "redis-server")
        yield port, process
    finally:
        process.terminate()
        process.wait(timeout=5)


@contextlib.contextmanager
def served_with_store(folder: Path) -> Iterator[Tuple[Server, int, subprocess.Popen]]:
    """canvasd with a session store in a Redis of its own and a health endpoint: the server,
    the health port and the Redis process (to stop and continue)."""
    port = free_port()
    with redis_server(folder) as (redis_port, store):
        server = Server(folder / "a", ["--session-store", f"redis://127.0.0.1:{redis_port}", "--instance", "a",
                                       "--health-endpoint", str(port)])
        try:
            yield server, port, store
        finally:
            server.stop()


def test_liveness_readiness_and_metrics(tmp_path: Path):
    port = free_port()
    server = Server(tmp_path, ["--health-endpoint", f"127.0.0.1:{port}", "--instance", "probe-1"])
    try:
        assert get(port, "/livez")[0] == 200
        assert get(port, "/readyz")[:2] == (200, "ready\n")
        assert get(port, "/nowhere")[0] == 404
        time.sleep(1.2)
        before = parse(get(port, "/metrics")[1])
        with server.client() as client:
            session = client.open_session()
            session.open()
            for _ in range(3):
                session.state()
            client.request({"id": 9, "method": "no.such"})
        time.sleep(1.2)   # the loop publishes what it counted once a second
        status, text, kind = get(port, "/metrics")
        assert status == 200 and kind.startswith("text/plain; version=0.0.4")
        after = parse(text)
        assert after['canvasd_requests_total{method="canvas.state"}'] - before.get('canvasd_requests_total{method="canvas.state"}', 0) == 3
        assert after['canvasd_requests_total{method="other"}'] >= 1
        assert after['canvasd_replies_total{code="METHOD_NOT_FOUND"}'] >= 1
        assert after['canvasd_info{instance="probe-1"}'] == 1
        assert after['canvasd_request_handling_seconds_bucket{le="+Inf"}'] == after["canvasd_request_handling_seconds_count"]
        assert after["canvasd_resident_memory_bytes"] > 1e6
        assert after["canvasd_sessions"] == 1
    finally:
        server.stop()


def test_a_taken_health_port_is_named(tmp_path: Path):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        port = taken.getsockname()[1]
        from conftest import canvasd_path
        run = subprocess.run([str(canvasd_path()), "--endpoint", f"ipc://{tmp_path}/r", "--events", f"ipc://{tmp_path}/e",
                              "--documents", str(tmp_path), "--health-endpoint", f"127.0.0.1:{port}"],
                             capture_output=True, text=True, timeout=20)
        assert run.returncode != 0
        assert f"127.0.0.1:{port}" in run.stderr and "another port" in run.stderr, run.stderr


@pytest.mark.skipif(not shutil.which("redis-server"), reason="needs redis-server (make system-deps installs it)")
def test_readiness_follows_the_session_store(tmp_path: Path):
    with served_with_store(tmp_path) as (server, port, store):
        assert get(port, "/readyz")[0] == 200
        os.kill(store.pid, signal.SIGSTOP)
        stopped = time.monotonic()
        try:
            deadline = stopped + 3
            while get(port, "/readyz")[0] == 200:
                assert time.monotonic() < deadline, "still ready 3 s after the store stopped"
                time.sleep(0.1)
            status, body, _ = get(port, "/readyz")
            assert status == 503 and "session store" in body
            assert get(port, "/livez")[0] == 200   # alive: it is the store that is gone
            # Asked while away, until the store lanes' rest has grown to seconds (each call
            # that fails doubles it): refused, each at once or after the store's timeout.
            with server.client() as client:
                while time.monotonic() < stopped + 7:
                    with pytest.raises(CanvasError) as refused:
                        client.open_session()
                    assert refused.value.code == "UNAVAILABLE", refused.value
                    time.sleep(0.05)
        finally:
            os.kill(store.pid, signal.SIGCONT)
        deadline = time.monotonic() + 5
        while get(port, "/readyz")[0] != 200:
            assert time.monotonic() < deadline, "not ready again after the store came back"
            time.sleep(0.1)
        # Ready means served: a session opens at once, not after the lanes' rest runs out.
        # What the store was sent: a new session whole, its changes as operations on its log.
        with server.client() as client:
            session = client.open_session()
            session.open()
            session.add_stroke([(10, 10), (20, 20), (30, 25)])
        time.sleep(1.2)   # the loop publishes what it counted once a second
        samples = parse(get(port, "/metrics")[1])
        assert samples['canvasd_session_store_written_bytes_total{kind="whole"}'] > 0, samples
        assert samples['canvasd_session_store_written_bytes_total{kind="operations"}'] > 0, samples


@pytest.mark.skipif(not shutil.which("redis-server"), reason="needs redis-server (make system-deps installs it)")
def test_requests_queued_behind_a_session_are_each_read_and_counted_once(tmp_path: Path):
    """Forty strokes sent at once on one session, with a session store: each waits for the one
    before it (whose change is being written), and when the session is given back the first
    waiting one takes it again. Each must still be decoded and counted once: replaying the
    whole queue through the decoder each time counted 40 * 41 / 2 = 820, and decoded as often."""
    port = free_port()
    with redis_server(tmp_path) as (redis_port, _):
        server = Server(tmp_path / "a", ["--session-store", f"redis://127.0.0.1:{redis_port}", "--instance", "a",
                                         "--health-endpoint", str(port)])
        context = zmq.Context()
        try:
            with server.client() as client:
                session = client.open_session()
                session.open()
            dealer = context.socket(zmq.DEALER)
            dealer.setsockopt(zmq.LINGER, 0)
            dealer.connect(server.endpoint)
            stroke = {"tool": "pen", "color": "red", "width": 2, "points": [{"x": 10, "y": 10}, {"x": 20, "y": 25}]}
            for number in range(40):
                dealer.send(json.dumps({"id": 1000 + number, "method": "drawing.addStroke", "params": stroke,
                                        "session": session.id}).encode())
            replies = []
            while len(replies) < 40:
                assert dealer.poll(10_000), f"{len(replies)} of 40 replies"
                replies.append(json.loads(dealer.recv()))
            assert [r["id"] for r in replies] == list(range(1000, 1040)), "replies out of order"
            assert [r["result"]["strokes"] for r in replies] == list(range(1, 41))
            time.sleep(1.2)   # the loop publishes what it counted once a second
            samples = parse(get(port, "/metrics")[1])
            assert samples['canvasd_requests_total{method="drawing.addStroke"}'] == 40, samples
        finally:
            context.destroy(linger=0)
            server.stop()
