"""Several canvasd instances behind HAProxy (deploy/haproxy.cfg), sessions in Redis, one document
folder: real processes over real sockets, started by scripts/cluster.py.

Clients, each from its own loopback source address (so HAProxy's source hash spreads them),
open sessions, draw and submit into their documents; the instance holding one of them is killed
with SIGKILL. Every client's next requests, retried with the same ids, must be answered by
another instance: a retry of an answered request with the very same reply bytes, the drawing
exactly as last acknowledged, events going on with the next seq, and every acknowledged
revision of every document still there with its sha256. Then the load bench runs through
HAProxy and must lose no reply.
"""

from __future__ import annotations

import json
import random
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Dict, List, Optional, Tuple

import pytest
import redis
import zmq

from conftest import ROOT, canvasd_path

sys.path.insert(0, str(ROOT / "scripts"))
from cluster import Cluster  # noqa: E402

pytestmark = pytest.mark.skipif(not (shutil.which("haproxy") or Path("/usr/sbin/haproxy").exists())
                                or not shutil.which("redis-server"),
                                reason="needs haproxy and redis-server (make system-deps installs them)")

CLIENTS = 6
STROKE = {"tool": "pen", "color": "blue", "width": 3, "points": [{"x": 72, "y": 220, "pressure": 0.5}, {"x": 200.25, "y": 250}]}


def lingerless_context() -> zmq.Context:
    """A context whose sockets have no linger: a test that fails before closing them must not
    leave a context whose clean-up (its term, from the garbage collector) waits forever."""
    context = zmq.Context()
    context.setsockopt(zmq.LINGER, 0)
    return context


class RawClient:
    """A DEALER that sends requests with chosen ids and keeps the reply bytes as they came."""

    def __init__(self, context: zmq.Context, endpoint: str):
        self.socket = context.socket(zmq.DEALER)
        self.socket.setsockopt(zmq.LINGER, 0)
        self.socket.connect(endpoint)
        self.next_id = 1000

    def send(self, request_id: int, method: str, params: Optional[dict] = None, session: Optional[str] = None,
             timeout: float = 1.0, tries: int = 20) -> bytes:
        """The reply's bytes. On no reply within `timeout`, the same request (same id) again."""
        message = {"id": request_id, "method": method, "params": params or {}}
        if session is not None:
            message["session"] = session
        frame = json.dumps(message).encode()
        for _ in range(tries):
            self.socket.send(frame)
            deadline = time.monotonic() + timeout
            while time.monotonic() < deadline:
                if self.socket.poll(max(1, int((deadline - time.monotonic()) * 1000))):
                    reply = self.socket.recv()
                    if json.loads(reply)["id"] == request_id:
                        return reply
        raise AssertionError(f"{method} id {request_id}: no reply after {tries} tries")

    def call(self, method: str, params: Optional[dict] = None, session: Optional[str] = None) -> Tuple[int, dict]:
        self.next_id += 1
        reply = json.loads(self.send(self.next_id, method, params, session))
        assert "result" in reply, f"{method}: {reply}"
        return self.next_id, reply["result"]


class Subscriber:
    """A SUB with a monitor kept open, so the test can see it connect again after a failover."""

    def __init__(self, context: zmq.Context, endpoint: str, prefix: str):
        self.socket = context.socket(zmq.SUB)
        self.socket.setsockopt(zmq.LINGER, 0)
        self.monitor = self.socket.get_monitor_socket(zmq.EVENT_HANDSHAKE_SUCCEEDED)
        self.socket.setsockopt(zmq.SUBSCRIBE, prefix.encode())
        self.socket.connect(endpoint)

    def connected(self, timeout: float = 5.0) -> None:
        assert self.monitor.poll(int(timeout * 1000)), "the event connection was not made"
        self.monitor.recv_multipart()
        time.sleep(0.1)   # the subscription reaches the publisher

    def events(self, quiet: float = 0.5) -> List[dict]:
        found = []
        while self.socket.poll(int(quiet * 1000)):
            _, body = self.socket.recv_multipart()
            found.append(json.loads(body))
        return found

    def close(self) -> None:
        self.socket.disable_monitor()
        self.monitor.close(0)
        self.socket.close(0)


def readiness(instance) -> int:
    """The HTTP status of an instance's /readyz (what HAProxy checks); 0 when it does not answer."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{instance.health}/readyz", timeout=2) as response:
            return response.status
    except urllib.error.HTTPError as error:
        return error.code
    except (urllib.error.URLError, OSError):
        return 0


class Drawers:
    """Clients through HAProxy, each from its own source address with a session of its own,
    drawing strokes on threads until stopped; a request with no reply is sent again with its
    id. Counts what each was acknowledged, and any error reply."""

    def __init__(self, context: zmq.Context, cluster: Cluster, count: int, first_source: int):
        self.clients, self.sessions = [], []
        for index in range(count):
            client = RawClient(context, Cluster.from_source(cluster.endpoint, f"127.0.0.{first_source + index}"))
            _, opened = client.call("session.open", {"transitions": "instant"})
            client.call("canvas.open", {}, opened["session"])
            self.clients.append(client)
            self.sessions.append(opened["session"])
        self.acknowledged = [0] * count
        self.errors: List[dict] = []
        self._stop = threading.Event()
        self._workers = [threading.Thread(target=self._draw, args=(index,)) for index in range(count)]
        for worker in self._workers:
            worker.start()

    def _draw(self, index: int) -> None:
        client, session = self.clients[index], self.sessions[index]
        while not self._stop.is_set():
            client.next_id += 1
            reply = json.loads(client.send(client.next_id, "drawing.addStroke", STROKE, session, tries=60))
            if "result" in reply:
                self.acknowledged[index] += 1
            else:
                self.errors.append(reply)
            time.sleep(0.02)

    def stop(self) -> None:
        self._stop.set()
        for worker in self._workers:
            worker.join(timeout=120)

    def check(self) -> None:
        """No error was answered, and every drawing holds exactly the strokes acknowledged."""
        assert not self.errors, self.errors[:3]
        for index, (client, session) in enumerate(zip(self.clients, self.sessions)):
            _, drawing = client.call("drawing.get", {}, session)
            assert len(drawing["strokes"]) == self.acknowledged[index], (index, len(drawing["strokes"]), self.acknowledged[index])

    def close(self) -> None:
        for client in self.clients:
            client.socket.close(0)


def test_failover_through_haproxy(tmp_path: Path) -> None:
    documents = tmp_path / "documents"
    documents.mkdir()
    for index in range(CLIENTS):
        shutil.copy(ROOT / "samples" / "notes.pdf", documents / f"notes-{index}.pdf")
    context = lingerless_context()
    with Cluster(canvasd_path(), documents, tmp_path / "cluster", instances=3) as cluster:
        store = redis.Redis(port=cluster.redis_port)
        clients: List[RawClient] = []
        subscribers: List[Subscriber] = []
        sessions: List[str] = []
        revisions: Dict[str, List[Tuple[int, str]]] = {}
        try:
            # Each client: a session, a submit into its document (revision 2), then more ink.
            for index in range(CLIENTS):
                source = f"127.0.0.{20 + index}"
                client = RawClient(context, Cluster.from_source(cluster.endpoint, source))
                _, opened = client.call("session.open", {"transitions": "instant"})
                session = opened["session"]
                subscriber = Subscriber(context, Cluster.from_source(cluster.events, source), f"{session}.")
                subscriber.connected()
                name = f"notes-{index}.pdf"
                client.call("canvas.open", {"document": name, "page": 0}, session)
                client.call("drawing.addStroke", STROKE, session)
                _, submitted = client.call("canvas.submit", {}, session)
                assert submitted["document"]["revision"] == 2
                revisions[name] = [(2, submitted["document"]["sha256"])]
                client.call("canvas.open", {"document": name, "page": 1}, session)
                for _ in range(3):
                    client.call("drawing.addStroke", STROKE, session)
                client.call("drawing.undo", None, session)
                clients.append(client)
                subscribers.append(subscriber)
                sessions.append(session)
            holders = [store.hget(f"canvas:session:{{{s}}}", "holder").decode() for s in sessions]
            assert len(set(holders)) >= 2, f"the source hash put every client on one instance: {holders}"

            # What each client last had acknowledged: a tap's reply (to retry), the drawing, seq.
            before = []
            for client, session, subscriber in zip(clients, sessions, subscribers):
                tap_id = client.next_id = client.next_id + 1
                tap_reply = client.send(tap_id, "pencil.doubleTap", None, session)      # minimized
                reopen_id = client.next_id = client.next_id + 1
                reopen_reply = client.send(reopen_id, "pencil.doubleTap", None, session)  # open again
                _, drawing = client.call("drawing.get", None, session)
                _, state = client.call("canvas.state", None, session)
                seen = [e["seq"] for e in subscriber.events()]
                assert seen and seen == list(range(seen[0], state["seq"] + 1)), f"events before the move: {seen}"
                before.append((tap_id, tap_reply, reopen_id, reopen_reply, drawing, state))

            victim = cluster.instance(holders[0])
            cluster.kill(victim)
            moved = [i for i, holder in enumerate(holders) if holder == victim.name]
            assert 0 in moved

            for index, (client, session) in enumerate(zip(clients, sessions)):
                tap_id, tap_reply, reopen_id, reopen_reply, drawing, state = before[index]
                # Retries of answered requests: the very same bytes, from whichever instance.
                assert client.send(reopen_id, "pencil.doubleTap", None, session) == reopen_reply
                assert client.send(tap_id, "pencil.doubleTap", None, session) == tap_reply
                _, after = client.call("drawing.get", None, session)
                assert after == drawing, f"client {index}: the drawing changed in the move"
                _, now = client.call("canvas.state", None, session)
                assert now["seq"] == state["seq"] and now["state"] == "open"
                holder = store.hget(f"canvas:session:{{{session}}}", "holder").decode()
                if index in moved:
                    assert holder != victim.name and cluster.instance(holder).alive
                else:
                    assert holder == holders[index], "a session on a live instance moved"

            # Events go on, with seq continuing, on the instance each client is on now.
            for index in moved:
                subscribers[index].connected()
            for index, (client, session, subscriber) in enumerate(zip(clients, sessions, subscribers)):
                subscriber.events(0.1)   # anything left from before
                seq = before[index][5]["seq"]
                _, tapped = client.call("pencil.doubleTap", None, session)
                assert tapped["outcome"] == "minimized"
                got = subscriber.events()
                assert [e["seq"] for e in got] == list(range(seq + 1, seq + 1 + len(got))) and len(got) >= 2, \
                    f"client {index}: events after the move {got}"
                # And the moved session can still save into its document: revision 3.
                _, submitted = client.call("canvas.submit", {}, session)
                revisions[f"notes-{index}.pdf"].append((3, submitted["document"]["sha256"]))

            # No acknowledged revision lost: each listed with the sha256 that was acknowledged.
            lister = RawClient(context, Cluster.from_source(cluster.endpoint, "127.0.0.99"))
            clients.append(lister)
            for name, acknowledged in revisions.items():
                _, listed = lister.call("document.revisions", {"name": name})
                kept = {r["revision"]: r["sha256"] for r in listed["revisions"]}
                for revision, sha in acknowledged:
                    assert kept.get(revision) == sha, f"{name} revision {revision}"
        finally:
            for subscriber in subscribers:
                subscriber.close()
            for client in clients:
                client.socket.close(0)
            context.destroy(linger=0)


class Patient(RawClient):
    """A client as spec 2.4 asks: a request without a reply, or answered `UNAVAILABLE`
    sessionMoved or sessionStore, is sent again with the same id until it is answered."""

    def ask(self, method: str, params: Optional[dict] = None, session: Optional[str] = None, within: float = 60.0) -> dict:
        self.next_id += 1
        deadline = time.monotonic() + within
        while True:
            reply = json.loads(self.send(self.next_id, method, params, session, timeout=1.0, tries=int(within)))
            error = reply.get("error", {})
            if not (error.get("code") == "UNAVAILABLE" and error.get("data", {}).get("reason") in ("sessionMoved", "sessionStore")):
                assert "result" in reply, f"{method}: {reply}"
                return reply["result"]
            assert time.monotonic() < deadline, f"{method}: still {reply} after {within} s"
            time.sleep(0.05)


def test_haproxy_killed_and_restarted_mid_session_loses_nothing(tmp_path: Path) -> None:
    """Clients drawing and saving through HAProxy while it is killed (-9) and started again
    three times, and the instance holding a session is killed once: every client's connection
    is cut, libzmq connects again, and requests without a reply are sent again. At the end
    each drawing holds exactly the strokes acknowledged since its last save, and each document
    exactly the revisions acknowledged, with their sha256: none lost, none made twice or
    unasked."""
    documents = tmp_path / "documents"
    documents.mkdir()
    clients_count, rounds = 4, 24
    for index in range(clients_count):
        shutil.copy(ROOT / "samples" / "notes.pdf", documents / f"notes-{index}.pdf")
    context = lingerless_context()
    failures: List[str] = []
    acknowledged: Dict[int, Dict[str, object]] = {}
    progress = [0] * clients_count

    def drive(index: int) -> None:
        client = Patient(context, Cluster.from_source(cluster.endpoint, f"127.0.0.{40 + index}"))
        name = f"notes-{index}.pdf"
        model: Dict[str, object] = {"revisions": {}, "strokes": []}
        acknowledged[index] = model
        try:
            session = client.ask("session.open", {"transitions": "instant"})["session"]
            model["session"] = session
            client.ask("canvas.open", {"document": name, "page": 0}, session)
            for number in range(rounds):
                stroke = dict(STROKE, points=[{"x": 20 + 10 * number, "y": 40 + index * 60}, {"x": 25 + 10 * number, "y": 80 + index * 60}])
                strokes = client.ask("drawing.addStroke", stroke, session)["strokes"]
                model["strokes"].append(stroke)
                assert strokes == len(model["strokes"]), f"client {index}: {strokes} strokes, {len(model['strokes'])} acknowledged"
                if number % 6 == 5:
                    saved = client.ask("canvas.submit", {}, session)["document"]
                    model["revisions"][saved["revision"]] = saved["sha256"]
                    model["strokes"] = []
                    client.ask("canvas.open", {"document": name, "page": 0}, session)
                progress[index] = number + 1
                time.sleep(0.05)
        except AssertionError as failure:
            failures.append(f"client {index}: {failure}")
        finally:
            client.socket.close(0)

    with Cluster(canvasd_path(), documents, tmp_path / "cluster", instances=3) as cluster:
        try:
            threads = [threading.Thread(target=drive, args=(index,)) for index in range(clients_count)]
            for thread in threads:
                thread.start()
            for fault in range(4):
                # Each fault once every client has gone on since the last.
                marks = list(progress)
                deadline = time.monotonic() + 60
                while any(p <= m and p < rounds for p, m in zip(progress, marks)) and not failures:
                    assert time.monotonic() < deadline, f"no progress since the last fault: {progress}"
                    time.sleep(0.05)
                if fault == 2:
                    # The instance holding the first client's session: at least one session moves.
                    holder = redis.Redis(port=cluster.redis_port).hget(f"canvas:session:{{{acknowledged[0]['session']}}}", "holder")
                    cluster.kill(cluster.instance(holder.decode()))
                else:
                    cluster.restart_haproxy(kill=True)
            for thread in threads:
                thread.join(timeout=120)
            assert not failures, "\n".join(failures)
            assert progress == [rounds] * clients_count, f"clients did not finish: {progress}"
            checker = Patient(context, Cluster.from_source(cluster.endpoint, "127.0.0.99"))
            checker.next_id = 1_000_000   # ids of its own within each client's session
            for index, model in acknowledged.items():
                drawing = checker.ask("drawing.get", None, model["session"])
                if drawing["strokes"] != model["strokes"]:
                    failures.append(f"client {index}: the drawing has {len(drawing['strokes'])} strokes, "
                                    f"{len(model['strokes'])} acknowledged since the last save")
                listed = checker.ask("document.revisions", {"name": f"notes-{index}.pdf"})["revisions"]
                kept = {r["revision"]: r["sha256"] for r in listed if r["revision"] != 1}
                if kept != model["revisions"]:
                    failures.append(f"notes-{index}.pdf: revisions {sorted(kept)} kept, {sorted(model['revisions'])} acknowledged"
                                    + ("" if set(kept) != set(model["revisions"]) else ": their sha256 differ"))
            checker.socket.close(0)
            assert not failures, "\n".join(failures)
        finally:
            context.destroy(linger=0)


def test_load_through_haproxy_loses_no_reply(tmp_path: Path) -> None:
    bench = canvasd_path().parent / "canvasbench"
    if not bench.exists():
        pytest.skip(f"no canvasbench at {bench}")
    documents = tmp_path / "documents"
    with Cluster(canvasd_path(), documents, tmp_path / "cluster", instances=3) as cluster:
        run = subprocess.run([str(bench), "load", "--clients", "6", "--requests", "150", "--window", "4",
                              "--connect", cluster.endpoint, "--connect-events", cluster.events,
                              "--documents", str(documents), "--sources", "6", "--reply-timeout", "30"],
                             capture_output=True, text=True, timeout=180)
        assert run.returncode == 0, run.stdout + run.stderr
        assert "replies: 900 of 900; lost 0, mismatched 0, wrong 0" in run.stdout, run.stdout


def test_an_instance_whose_port_is_taken_is_started_on_others_not_taken_for_started(tmp_path: Path) -> None:
    """The harness every cluster test stands on: an instance given a port another server
    listens on (here its ws:// port, bound after its request port) dies of "Address already in
    use" just after it listened on its request port. A check that only connected to the request
    port took it for started, and the test then talked to a dead instance (a CI run waited 20 s
    for replies that could not come). It must be started again on other ports, and answer."""
    documents = tmp_path / "documents"
    documents.mkdir()
    cluster = Cluster(canvasd_path(), documents, tmp_path / "cluster", instances=1, session_store=False)
    instance = cluster.instances[0]
    with socket.socket() as squatter:
        squatter.bind(("127.0.0.1", instance.ws_requests))
        squatter.listen()
        taken = instance.ws_requests
        try:
            cluster.folder.mkdir(parents=True, exist_ok=True)
            cluster.start_instance(instance)
            assert instance.ws_requests != taken
            assert "Address already in use" in (cluster.folder / f"{instance.name}.log").read_text()
            context = lingerless_context()
            try:
                client = context.socket(zmq.DEALER)
                client.connect(f"tcp://127.0.0.1:{instance.requests}")
                client.send(json.dumps({"id": 1, "method": "document.list", "params": {}}).encode())
                assert client.poll(5000), "the instance the harness started does not answer"
                assert json.loads(client.recv())["id"] == 1
            finally:
                context.destroy(linger=0)
        finally:
            cluster.stop()


def test_haproxy_configs_are_valid() -> None:
    """Both configs as HAProxy itself reads them, with every address set (the ws:// one carries
    a browser's traffic in test_web_cluster.py)."""
    environment = dict(os.environ, CANVAS_BIND="127.0.0.1", CANVAS_REQUESTS_PORT="1", CANVAS_EVENTS_PORT="2",
                       CANVAS_WS_PORT="3", CANVAS_STATS_SOCKET="/tmp/haproxy-check.sock")
    for number in (1, 2, 3):
        environment.update({f"CANVAS{number}_HOST": "127.0.0.1", f"CANVAS{number}_REQUESTS": f"1{number}",
                            f"CANVAS{number}_EVENTS": f"2{number}", f"CANVAS{number}_WS_REQUESTS": f"3{number}",
                            f"CANVAS{number}_WS_EVENTS": f"4{number}", f"CANVAS{number}_HEALTH": f"5{number}"})
    haproxy = shutil.which("haproxy") or "/usr/sbin/haproxy"
    check = subprocess.run([haproxy, "-c", "-f", str(ROOT / "deploy" / "haproxy.cfg"), "-f", str(ROOT / "deploy" / "haproxy-ws.cfg")],
                           env=environment, capture_output=True, text=True, timeout=30)
    assert check.returncode == 0 and "Configuration file is valid" in check.stdout + check.stderr, check.stdout + check.stderr


def test_a_redis_restart_keeps_every_session_and_haproxy_reads_readiness(tmp_path: Path) -> None:
    """Redis runs as a store (AOF, appendfsync everysec): restarted, it still has every session,
    and clients go on with their drawings as acknowledged. Each instance's /readyz, which
    HAProxy checks, says not ready while Redis is down and ready once it is back."""
    documents = tmp_path / "documents"
    documents.mkdir()
    context = lingerless_context()
    with Cluster(canvasd_path(), documents, tmp_path / "cluster", instances=2) as cluster:
        clients, sessions = [], []
        try:
            for index in range(4):
                client = RawClient(context, Cluster.from_source(cluster.endpoint, f"127.0.0.{40 + index}"))
                _, opened = client.call("session.open", {"transitions": "instant"})
                client.call("canvas.open", {}, opened["session"])
                for stroke in range(index + 1):
                    client.call("drawing.addStroke", dict(STROKE, points=[{"x": 10 + stroke, "y": 10}, {"x": 50, "y": 60}]),
                                opened["session"])
                clients.append(client)
                sessions.append(opened["session"])
            assert all(readiness(instance) == 200 for instance in cluster.instances)
            cluster.redis.send_signal(signal.SIGTERM)
            cluster.redis.wait(timeout=10)
            deadline = time.monotonic() + 3
            while any(readiness(instance) == 200 for instance in cluster.instances):
                assert time.monotonic() < deadline, "an instance stayed ready 3 s without its session store"
                time.sleep(0.1)
            cluster.start_redis()
            deadline = time.monotonic() + 5
            while not all(readiness(instance) == 200 for instance in cluster.instances):
                assert time.monotonic() < deadline, "not ready again after Redis came back"
                time.sleep(0.1)
            for index, (client, session) in enumerate(zip(clients, sessions)):
                # An instance lets a store that failed rest for a moment (up to 2 s) before it
                # asks again; UNAVAILABLE sessionStore says to retry with the same id.
                deadline = time.monotonic() + 10
                while True:
                    reply = json.loads(client.send(9000 + index, "drawing.get", {}, session))
                    if "result" in reply or time.monotonic() > deadline:
                        break
                    assert reply["error"]["data"]["reason"] == "sessionStore", reply
                    time.sleep(0.2)
                assert len(reply["result"]["strokes"]) == index + 1, (index, reply)
        finally:
            for client in clients:
                client.socket.close(0)
            context.term()


def test_a_drained_instance_hands_its_clients_over_without_an_error(tmp_path: Path) -> None:
    """SIGTERM drains: the instance answers /readyz 503 at once, HAProxy stops sending to it,
    it serves on for its drain time and exits. Clients drawing all along see no error (a
    request that got no reply is sent again with its id, as §2.4 says), and every stroke they
    were acknowledged is in their drawing afterwards."""
    documents = tmp_path / "documents"
    documents.mkdir()
    context = lingerless_context()
    with Cluster(canvasd_path(), documents, tmp_path / "cluster", instances=2) as cluster:
        drawers = Drawers(context, cluster, 6, first_source=60)
        try:
            time.sleep(1.0)
            victim = cluster.instances[0]
            started = time.monotonic()
            victim.process.send_signal(signal.SIGTERM)
            time.sleep(0.2)
            with pytest.raises(urllib.error.HTTPError, match="503") as unready:
                urllib.request.urlopen(f"http://127.0.0.1:{victim.health}/readyz", timeout=2)
            assert b"draining" in unready.value.read()
            victim.process.wait(timeout=10)
            stopped = time.monotonic() - started
            time.sleep(1.5)
        finally:
            drawers.stop()
        print(f"\ndrained in {stopped:.1f} s; strokes acknowledged {sum(drawers.acknowledged)}, errors {len(drawers.errors)}")
        drawers.check()
        drawers.close()
    context.term()


def test_one_document_feed_across_instances(tmp_path: Path) -> None:
    """A viewer subscribed to `documents.` through HAProxy hears every save once, whichever
    instance made it, numbered in one sequence; a save announced again (the same revision)
    is not heard twice."""
    documents = tmp_path / "documents"
    documents.mkdir()
    for index in range(6):
        shutil.copy(ROOT / "samples" / "notes.pdf", documents / f"feed-{index}.pdf")
    context = lingerless_context()
    with Cluster(canvasd_path(), documents, tmp_path / "cluster", instances=3) as cluster:
        viewer = Subscriber(context, Cluster.from_source(cluster.events, "127.0.0.90"), "documents.")
        viewer.connected()
        clients = [RawClient(context, Cluster.from_source(cluster.endpoint, f"127.0.0.{70 + index}")) for index in range(6)]
        saved = []
        for round in range(3):
            for index, client in enumerate(clients):
                drawing = {"strokes": [dict(STROKE, points=[{"x": 10 + round, "y": 10 + index}, {"x": 60, "y": 80}])], "texts": []}
                _, result = client.call("document.flatten", {"name": f"feed-{index}.pdf", "page": 0, "drawing": drawing})
                saved.append((f"feed-{index}.pdf", result["revision"]))
        holders = {json.loads(client.send(1, "hello"))["result"]["instance"] for client in clients}
        heard = viewer.events(quiet=1.5)
        # HAProxy's statistics socket names every instance of the backend, up.
        with socket.socket(socket.AF_UNIX) as stats:
            stats.connect(str(cluster.stats_socket))
            stats.sendall(b"show stat\n")
            table = b""
            while chunk := stats.recv(65536):
                table += chunk
        rows = [line.split(",") for line in table.decode().splitlines() if line.startswith("canvasd_requests,canvasd")]
        assert sorted(row[1] for row in rows) == ["canvasd1", "canvasd2", "canvasd3"] and all(row[17] == "UP" for row in rows), table
        print(f"\n{len(saved)} saves through {len(holders)} instances; the viewer heard {len(heard)}")
        assert len(holders) > 1, "the clients all reached one instance: the test shows nothing"
        assert sorted((event["data"]["name"], event["data"]["revision"]) for event in heard) == sorted(saved)
        seqs = [event["seq"] for event in heard]
        assert seqs == list(range(seqs[0], seqs[0] + len(seqs))), seqs
        viewer.close()
        for client in clients:
            client.socket.close(0)
    context.term()


def test_a_rolling_restart_of_every_instance_loses_nothing(tmp_path: Path) -> None:
    """Each of three instances in turn drained (SIGTERM), restarted, and waited for until
    ready, while twelve clients draw through HAProxy: no client sees an error (a request with
    no reply is sent again with its id), and every drawing holds exactly the strokes
    acknowledged."""
    documents = tmp_path / "documents"
    documents.mkdir()
    context = lingerless_context()
    with Cluster(canvasd_path(), documents, tmp_path / "cluster", instances=3) as cluster:
        drawers = Drawers(context, cluster, 12, first_source=100)
        try:
            for instance in cluster.instances:
                time.sleep(0.5)
                instance.process.send_signal(signal.SIGTERM)
                instance.process.wait(timeout=15)
                cluster.start_instance(instance)
                deadline = time.monotonic() + 15
                while readiness(instance) != 200:
                    assert time.monotonic() < deadline, f"{instance.name} not ready after its restart"
                    time.sleep(0.1)
                time.sleep(1.5)   # HAProxy's checks see it ready (rise 2) before the next goes
        finally:
            drawers.stop()
        print(f"\nrolling restart of 3 instances under 12 clients: {sum(drawers.acknowledged)} strokes acknowledged, "
              f"{len(drawers.errors)} errors")
        drawers.check()
        drawers.close()
    context.term()


# `make cluster` itself: scripts/cluster.py as the Makefile runs it, with fixed ports.

def free_block(length: int) -> int:
    """The first of `length` consecutive loopback ports all free now."""
    for _ in range(200):
        base = random.randrange(20000, 30000)
        probes = []
        try:
            for port in range(base, base + length):
                probe = socket.socket()
                probes.append(probe)
                probe.bind(("127.0.0.1", port))
            return base
        except OSError:
            continue
        finally:
            for probe in probes:
                probe.close()
    raise AssertionError("no free block of ports")


@pytest.fixture
def short_tmp():
    """A folder for the script's TMPDIR with a short path: HAProxy's statistics socket goes in
    the cluster's folder, and a socket's path has at most 107 bytes."""
    folder = Path(tempfile.mkdtemp(prefix="cc-", dir="/tmp"))
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


def run_cluster_script(tmp_path: Path, base: int, demo: int) -> subprocess.Popen:
    """scripts/cluster.py as `make cluster` runs it, with tmp_path as its TMPDIR."""
    documents = tmp_path / "documents"
    documents.mkdir(exist_ok=True)
    return subprocess.Popen([sys.executable, str(ROOT / "scripts" / "cluster.py"), "--instances", "3",
                             "--documents", str(documents), "--canvasd", str(canvasd_path()),
                             "--ports", str(base), "--demo-port", str(demo)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=dict(os.environ, TMPDIR=str(tmp_path)))


@pytest.mark.parametrize("taken", ["demo", "canvasd2 health", "Redis"])
def test_make_cluster_checks_every_port_before_it_starts_anything(short_tmp, taken):
    tmp_path = short_tmp
    base = free_block(41)
    demo = base + 40
    port = {"demo": demo, "canvasd2 health": base + 24, "Redis": base + 3}[taken]
    holder = socket.socket()
    holder.bind(("127.0.0.1", port))
    holder.listen()
    try:
        process = run_cluster_script(tmp_path, base, demo)
        out, err = process.communicate(timeout=20)
    finally:
        holder.close()
    assert process.returncode != 0, out
    variable = "CLUSTER_DEMO_PORT" if taken == "demo" else "CLUSTER_PORTS"
    assert f"port {port} is in use" in err and f"make cluster {variable}=" in err, err
    assert "make run" not in err
    # Nothing started: no folder made for its logs, and none of its ports listened on.
    assert not list(tmp_path.glob("canvas-cluster-*"))
    for other in range(base, base + 41):
        if other != port:
            with socket.socket() as probe:
                assert probe.connect_ex(("127.0.0.1", other)) != 0, other



def test_make_cluster_names_every_busy_port_at_once(short_tmp):
    tmp_path = short_tmp
    base = free_block(41)
    demo = base + 40
    taken = [base + 3, base + 24, demo]   # Redis, canvasd2's health endpoint, the demo page
    holders = []
    for port in taken:
        holder = socket.socket()
        holder.bind(("127.0.0.1", port))
        holder.listen()
        holders.append(holder)
    try:
        process = run_cluster_script(tmp_path, base, demo)
        out, err = process.communicate(timeout=20)
    finally:
        for holder in holders:
            holder.close()
    assert process.returncode != 0, out
    assert "3 ports are in use; nothing was started" in err, err
    for port in taken:
        assert f"port {port} is in use" in err, err
    assert f"make cluster CLUSTER_PORTS={base + 100} CLUSTER_DEMO_PORT={demo + 100}" in err, err
    assert not list(tmp_path.glob("canvas-cluster-*"))

def test_make_cluster_removes_its_folder_when_stopped(short_tmp):
    tmp_path = short_tmp
    base = free_block(41)
    process = run_cluster_script(tmp_path, base, base + 40)
    try:
        lines = []
        for line in process.stdout:
            lines.append(line)
            if line.startswith("Ctrl-C stops them all"):
                break
        else:
            raise AssertionError(f"it did not start: {process.stderr.read()}")
        (folder,) = tmp_path.glob("canvas-cluster-*")
        assert any(line.startswith(f"logs      {folder}") for line in lines), lines
        with urllib.request.urlopen(f"http://127.0.0.1:{base + 40}/config.json", timeout=5) as page:
            assert json.load(page)["url"] == f"ws://127.0.0.1:{base + 2}/requests"
        process.send_signal(signal.SIGINT)
        process.wait(timeout=30)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    assert process.returncode == 0, process.stderr.read()
    assert not folder.exists()
    for port in range(base, base + 41):
        with socket.socket() as probe:
            assert probe.connect_ex(("127.0.0.1", port)) != 0, port


def test_the_redis_primary_killed_under_load_through_haproxy_loses_nothing(tmp_path: Path) -> None:
    """Redis with Sentinel (`Cluster(sentinel=True)`: a primary, two replicas, three sentinels;
    each instance with --session-store-replicas 1). Six clients draw through HAProxy, each
    sending a refused request again with its id until it is answered; the primary is killed
    (-9) a second in. Sentinel promotes a replica, and afterwards every client's drawing is
    exactly its acknowledged strokes, in order: none lost, none twice, every request answered
    within 10 s."""
    context = lingerless_context()
    clients: List[RawClient] = []
    workers: List[threading.Thread] = []
    stop = threading.Event()
    try:
        with Cluster(canvasd_path(), tmp_path / "documents", tmp_path / "cluster", instances=3, sentinel=True,
                     log_level="warning") as cluster:
            sessions = []
            for index in range(CLIENTS):
                client = RawClient(context, Cluster.from_source(cluster.endpoint, f"127.0.0.{60 + index}"))
                clients.append(client)
                _, opened = client.call("session.open", {"transitions": "instant"})
                client.call("canvas.open", {}, opened["session"])
                sessions.append(opened["session"])
            acknowledged: List[List[int]] = [[] for _ in range(CLIENTS)]
            slowest = [0.0] * CLIENTS
            refused = [0] * CLIENTS
            problems: List[str] = []

            def draw(index: int) -> None:
                client, session = clients[index], sessions[index]
                number = 0
                while not stop.is_set():
                    number += 1
                    client.next_id += 1
                    params = {"tool": "pen", "color": "black", "width": 2,
                              "points": [{"x": 10 + number, "y": 20}, {"x": 10 + number, "y": 60}]}
                    started = time.monotonic()
                    while True:
                        try:
                            reply = json.loads(client.send(client.next_id, "drawing.addStroke", params, session, tries=12))
                        except AssertionError as error:   # no reply in 12 s
                            problems.append(f"client {index} stroke {number}: {error}")
                            return
                        if "result" in reply:
                            break
                        if reply["error"].get("data", {}).get("reason") not in ("sessionStore", "sessionMoved"):
                            problems.append(f"client {index} stroke {number}: {reply}")
                            return
                        refused[index] += 1
                        if time.monotonic() - started > 15:
                            problems.append(f"client {index} stroke {number}: refused for 15 s")
                            return
                        time.sleep(0.1)
                    slowest[index] = max(slowest[index], time.monotonic() - started)
                    acknowledged[index].append(number)
                    time.sleep(0.02)

            workers = [threading.Thread(target=draw, args=(index,)) for index in range(CLIENTS)]
            for worker in workers:
                worker.start()
            time.sleep(1.0)
            killed = cluster.sentinel.kill_primary()
            time.sleep(8.0)
            stop.set()
            for worker in workers:
                worker.join(timeout=60)
            promoted = cluster.sentinel.primary_named()
            print(f"\nRedis primary (port {killed}) killed under 6 clients through HAProxy: primary now {promoted}; "
                  f"{sum(map(len, acknowledged))} strokes acknowledged, {sum(refused)} refusals, slowest {max(slowest):.2f} s")
            assert not problems, problems
            assert promoted in cluster.sentinel.replica_ports
            assert max(slowest) <= 10.0
            for index, (client, session) in enumerate(zip(clients, sessions)):
                _, drawing = client.call("drawing.get", {}, session)
                drawn = [int(stroke["points"][0]["x"]) - 10 for stroke in drawing["strokes"]]
                assert drawn == acknowledged[index], f"client {index}: drawn {drawn}, acknowledged {acknowledged[index]}"
    finally:
        # Never a context left to the garbage collector with sockets open (its term would wait
        # for ever, in whatever test runs then): the workers end first (each send gives up
        # within 12 s), then every socket closes.
        stop.set()
        for worker in workers:
            worker.join(timeout=60)
        for client in clients:
            client.socket.close(0)
        context.term()
