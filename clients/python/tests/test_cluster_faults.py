"""Issue 25's faults over real processes: two canvasd instances sharing one Redis and one
document folder, each addressed directly (a DEALER per instance, no HAProxy), and one client
whose session moves between them, as a reconnect through the balancer makes it do.

Every test keeps a model of what the client was acknowledged and checks the guarantees:
0 acknowledged requests run twice, 0 saves from a stale copy, 0 revisions without an
acknowledgment, and a retry with the same id answers the first reply (spec 2.4), whichever
instance answers it. A revision's content is read back from its bytes (document.get, checked
against the sha256 the submit answered): every save keeps the drawing it flattened beside its
ink (a `/CanvasBridgeDrawing` stream), so the drawings in a revision are compared with the
acknowledged ones; the first test also renders the page and looks for the colours where they
were drawn.

Faults are made with signals (SIGSTOP, SIGCONT, SIGKILL) and, to hold an instance inside a
save, by holding the document's lock (`flock` on its history's `lock` file, which every writer
takes) and waiting until /proc/locks shows the instance waiting for it. Nothing waits on a
guessed delay but the pause itself. What a continued instance had queued is known to have had its turn once it answers a
later request of the same session sent to it (a session's requests are served in order).

1. A save from a stale copy: the issue's steps, for x.pdf reopened and for y.pdf; then a
   seeded random walk of a session between the instances (FAULTS_SEED, FAULTS_STEPS; with
   FAULTS_SWITCH=0 it stays on one instance, which checks the model itself), also with faults
   between steps (FAULTS_KINDS: pause, redis, kill).
2. A paused holder: SIGSTOP 4 s, its request resent to the other instance and answered, 80
   more there, SIGCONT; and the client's next request going back to the woken instance.
3. Inside a save: the holder killed, or paused and the client resends (or cancels instead);
   one submit saving on both instances at once.
"""

from __future__ import annotations

import base64
import contextlib
import copy
import fcntl
import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from random import Random
from typing import Any, Dict, Iterator, List, Optional, Tuple

import pikepdf
import pytest
import zmq
from canvasbridge import ink_source

from conftest import ROOT, canvasd_path
from images import render_page_rgb
from model import Model
from test_cluster import RawClient

sys.path.insert(0, str(ROOT / "scripts"))
from cluster import Cluster, Instance  # noqa: E402

pytestmark = pytest.mark.skipif(not shutil.which("redis-server"), reason="needs redis-server (make system-deps installs it)")

A, B = 0, 1
RED = {"color": "red", "points": [{"x": 100, "y": 150}, {"x": 250, "y": 160}], "tool": "pen", "width": 8}
BLUE = {"color": "blue", "points": [{"x": 100, "y": 250}, {"x": 250, "y": 260}], "tool": "pen", "width": 8}
# What an instance may answer instead of a result when the session moved under it or the store
# did not answer: nothing was acknowledged, and the client sends the same request again.
RETRY_REASONS = ("sessionMoved", "sessionStore")


# -- the cluster, without HAProxy ---------------------------------------------------------------

@contextlib.contextmanager
def two_instances(tmp_path: Path, documents: Tuple[str, ...] = ("x.pdf", "y.pdf")) -> Iterator[Cluster]:
    """Redis and two canvasd on one document folder, started by scripts/cluster.py's Cluster
    but without its balancer: the tests choose the instance of every request themselves."""
    folder = tmp_path / "documents"
    folder.mkdir(parents=True, exist_ok=True)
    for name in documents:
        shutil.copy(ROOT / "samples" / "notes.pdf", folder / name)
    # Every revision kept, so that every acknowledged one can be checked at the end; no drain
    # at the end of a test, which has no balancer to drain from.
    cluster = Cluster(canvasd_path(), folder, tmp_path / "cluster", instances=2, log_level="info",
                      extra=["--keep-revisions", "1000", "--drain-seconds", "0"])
    try:
        cluster.folder.mkdir(parents=True, exist_ok=True)
        cluster.start_redis()
        for instance in cluster.instances:
            cluster.start_instance(instance)
        yield cluster
    finally:
        cluster.stop()


def stopped(instance: Instance) -> bool:
    """Whether every thread of the process is stopped (`T` in each /proc/<pid>/task/*/stat).
    The process's own stat shows its main thread only, which stops first: a save worker still
    blocked in flock could take the lock let go just after and stop holding it."""
    states = []
    for task in Path(f"/proc/{instance.process.pid}/task").iterdir():
        try:
            states.append((task / "stat").read_text().rsplit(")", 1)[1].split()[0])
        except FileNotFoundError:
            continue   # a thread that ended meanwhile
    return bool(states) and all(state in ("T", "t") for state in states)


@contextlib.contextmanager
def paused(instance: Instance) -> Iterator[float]:
    """SIGSTOP now, SIGCONT on leaving (whatever happens); yields when it stopped."""
    os.kill(instance.process.pid, signal.SIGSTOP)
    wait_until(lambda: stopped(instance), f"{instance.name} stopped")
    since = time.monotonic()
    try:
        yield since
    finally:
        if instance.alive:
            os.kill(instance.process.pid, signal.SIGCONT)


def wait_until(condition, what: str, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"waited {timeout} s for: {what}"
        time.sleep(0.01)


def waiting_for_a_lock(instance: Instance) -> bool:
    """Whether /proc/locks shows the process blocked on a flock (a `->` line with its pid)."""
    pid = str(instance.process.pid)
    for line in Path("/proc/locks").read_text().splitlines():
        fields = line.split()   # N: -> FLOCK ADVISORY WRITE <pid> <device:inode> <start> <end>
        if "->" in fields and fields[fields.index("->") + 1:fields.index("->") + 2] == ["FLOCK"] \
                and fields[fields.index("->") + 4:fields.index("->") + 5] == [pid]:
            return True
    return False


# -- a client whose session roams ---------------------------------------------------------------

class Channel(RawClient):
    """A DEALER to one instance. Replies that come for other ids (a paused instance answering
    late) are kept in `late` rather than dropped."""

    def __init__(self, context: zmq.Context, endpoint: str):
        super().__init__(context, endpoint)
        self.late: Dict[Any, bytes] = {}

    def exchange(self, request_id: Any, frame: bytes, timeout: float, tries: int) -> Optional[bytes]:
        for _ in range(tries):
            if request_id in self.late:
                return self.late.pop(request_id)
            self.socket.send(frame)
            if (reply := self.receive(request_id, timeout)) is not None:
                return reply
        return None

    def receive(self, request_id: Any, timeout: float) -> Optional[bytes]:
        if request_id in self.late:
            return self.late.pop(request_id)
        deadline = time.monotonic() + timeout
        while (left := deadline - time.monotonic()) > 0:
            if self.socket.poll(max(1, int(left * 1000))):
                reply = self.socket.recv()
                got = json.loads(reply)["id"]
                if got == request_id:
                    return reply
                self.late[got] = reply
        return None


class Roamer:
    """One client with one session, talking to either instance. Every request gets an id of
    its own; `ask` sends it as spec 2.4 and 6.1 say a client must: again with the same id on no
    reply, and on `UNAVAILABLE` sessionMoved or sessionStore. `answered` keeps the first reply
    to every request that was answered, for checking retries."""

    def __init__(self, cluster: Cluster):
        self.cluster = cluster
        self.context = zmq.Context()
        self.channels = [Channel(self.context, f"tcp://127.0.0.1:{i.requests}") for i in cluster.instances]
        self.session: Optional[str] = None
        self.next_id = 100
        self.requests: Dict[int, Tuple[str, dict]] = {}
        self.answered: Dict[int, bytes] = {}
        self.switches = 0
        self.last: Optional[int] = None
        # An instance the test has stopped: a request meant for it is sent there (it waits in the
        # stopped process, which will read it when continued) and, with no reply, to the other.
        self.stopped: Optional[int] = None
        self.queued: List[int] = []

    def close(self) -> None:
        for channel in self.channels:
            channel.socket.close(0)
        self.context.destroy(linger=0)

    def __enter__(self) -> "Roamer":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def frame(self, request_id: int, method: str, params: Optional[dict], session: bool) -> bytes:
        message = {"id": request_id, "method": method, "params": params or {}}
        if session:
            message["session"] = self.session
        return json.dumps(message).encode()

    def new_request(self, method: str, params: Optional[dict] = None) -> int:
        self.next_id += 1
        self.requests[self.next_id] = (method, params or {})
        return self.next_id

    def ask(self, where: int, method: str, params: Optional[dict] = None, **kwargs: Any) -> dict:
        return json.loads(self.ask_raw(where, method, params, **kwargs))

    def ask_raw(self, where: int, method: str, params: Optional[dict] = None, *, request_id: Optional[int] = None,
                session: bool = True, timeout: float = 20.0) -> bytes:
        """The reply's bytes once it is not a retry-later; the same id all along."""
        if request_id is None:
            request_id = self.new_request(method, params)
        method, params = self.requests.get(request_id, (method, params))
        if where != self.last and session:
            self.switches += self.last is not None
            self.last = where
        frame = self.frame(request_id, method, params, session)
        if where == self.stopped:
            self.channels[where].socket.send(frame)
            assert self.channels[where].receive(request_id, 0.2) is None, f"{method} answered by a stopped instance"
            self.queued.append(request_id)
            where = 1 - where
            self.switches += 1
            self.last = where
        deadline = time.monotonic() + timeout
        while True:
            raw = self.channels[where].exchange(request_id, frame, timeout=2.0, tries=1)
            if raw is not None:
                error = json.loads(raw).get("error", {})
                if not (error.get("code") == "UNAVAILABLE" and error.get("data", {}).get("reason") in RETRY_REASONS):
                    if session:
                        self.answered.setdefault(request_id, raw)
                    return raw
            assert time.monotonic() < deadline, \
                f"{method} id {request_id}: not answered within {timeout} s: {raw!r}\n{self.cluster_logs()}"
            time.sleep(0.05)

    def cluster_logs(self, lines: int = 8) -> str:
        """The last lines of each instance's log: what a failure needs to be understood in CI."""
        tails = []
        for instance in self.cluster.instances:
            path = self.cluster.folder / f"{instance.name}.log"
            text = path.read_text(errors="replace").splitlines() if path.exists() else []
            tails.append(f"--- {instance.name} (requests port {instance.requests}):\n" + "\n".join(text[-lines:]))
        return "\n".join(tails)

    def reconnect(self, where: int) -> None:
        """A new DEALER to an instance started again (on the ports it has now)."""
        self.channels[where].socket.close(0)
        self.channels[where] = Channel(self.context, f"tcp://127.0.0.1:{self.cluster.instances[where].requests}")

    def ok(self, where: int, method: str, params: Optional[dict] = None, **kwargs: Any) -> dict:
        reply = self.ask(where, method, params, **kwargs)
        assert "result" in reply, f"{method} {params} on instance {where}: {reply}"
        return reply["result"]

    def send_unanswered(self, where: int, method: str, params: Optional[dict], wait: float = 0.5) -> int:
        """Sends a new request to an instance that cannot answer (stopped, or held in a save) and
        checks that no reply came within `wait`: the client's view of a timeout."""
        request_id = self.new_request(method, params)
        channel = self.channels[where]
        channel.socket.send(self.frame(request_id, method, params, True))
        assert channel.receive(request_id, wait) is None, f"{method} was answered by a paused instance"
        self.last = where
        return request_id

    def open_session(self, where: int) -> None:
        self.session = self.ok(where, "session.open", {"transitions": "instant"}, session=False)["session"]
        self.last = where

    def retry_everywhere(self, request_id: int, alive: Tuple[int, ...] = (A, B)) -> List[str]:
        """A repeat of an answered request, on each instance: the first reply, byte for byte."""
        problems = []
        first = self.answered[request_id]
        method, _ = self.requests[request_id]
        for where in alive:
            raw = self.ask_raw(where, method, request_id=request_id)
            if raw != first:
                problems.append(f"retry of id {request_id} ({method}) on instance {where} answered {raw.decode()[:300]}, "
                                f"first {first.decode()[:300]}")
        return problems


# -- what a document holds ----------------------------------------------------------------------

def revision_bytes(roamer: Roamer, where: int, name: str, revision: int) -> Tuple[bytes, str]:
    got = roamer.ok(where, "document.get", {"name": name, "revision": revision}, session=False)
    data = base64.b64decode(got["data"])
    assert got["size"] == len(data), f"{name} revision {revision} is larger than one piece"
    return data, got["sha256"]


def stored_drawings(pdf: bytes) -> List[dict]:
    """The drawings flattened into a PDF, each as the save stored it beside its ink."""
    with tempfile.TemporaryDirectory() as folder:
        source, expanded = Path(folder) / "in.pdf", Path(folder) / "out.pdf"
        source.write_bytes(pdf)
        subprocess.run(["qpdf", "--qdf", "--object-streams=disable", str(source), str(expanded)], check=True,
                       capture_output=True)
        # In the order QDF numbers them (the file's order), each stream's data by its /Length:
        # a text search for `endstream` took a drawing's own last byte when it was a newline
        # (as a stored drawing's checksum may end), and QDF then adds none of its own.
        with pikepdf.open(expanded) as pdf:
            found = [item.read_bytes() for item in pdf.objects
                     if isinstance(item, pikepdf.Stream) and item.get("/Type") == "/CanvasBridgeDrawing"]
    return [ink_source.decode(body) for body in found]


def describe(drawings: List[List[dict]]) -> str:
    return "[" + "; ".join(",".join(s["color"] for s in strokes) or "-" for strokes in drawings) + "]"


class Documents:
    """What the client was acknowledged of each document: revision -> (sha256, the strokes that
    submit flattened). A revision the server lists and this does not is one nobody was
    acknowledged; one whose drawings differ from the acknowledged saves is a save from a stale
    copy."""

    def __init__(self, names: List[str]):
        self.names = names
        self.saves: Dict[str, Dict[int, Tuple[str, List[dict]]]] = {name: {} for name in names}
        self.checked: Dict[Tuple[str, int], str] = {}

    def current(self, name: str) -> int:
        return max(self.saves[name], default=1)

    def saved(self, name: str, revision: int, sha256: str, strokes: List[dict]) -> None:
        self.saves[name][revision] = (sha256, copy.deepcopy(strokes))

    def check(self, roamer: Roamer, where: int) -> List[str]:
        problems = []
        for name in self.names:
            listed = roamer.ok(where, "document.revisions", {"name": name}, session=False)["revisions"]
            kept = {r["revision"]: r["sha256"] for r in listed}
            for revision, sha in sorted(kept.items()):
                if revision == 1:
                    continue
                if revision not in self.saves[name]:
                    data, _ = revision_bytes(roamer, where, name, revision)
                    problems.append(f"{name} revision {revision} was never acknowledged; it holds "
                                    f"{describe([d['strokes'] for d in stored_drawings(data)])}")
                elif sha != self.saves[name][revision][0]:
                    problems.append(f"{name} revision {revision}: sha256 {sha[:12]} listed, {self.saves[name][revision][0][:12]} acknowledged")
            for revision, (sha, strokes) in sorted(self.saves[name].items()):
                if revision not in kept:
                    problems.append(f"{name} revision {revision} was acknowledged and is not listed")
                    continue
                if self.checked.get((name, revision)) == sha:
                    continue
                data, got = revision_bytes(roamer, where, name, revision)
                if hashlib.sha256(data).hexdigest() != sha or got != sha:
                    problems.append(f"{name} revision {revision}: its bytes hash to {hashlib.sha256(data).hexdigest()[:12]}, "
                                    f"acknowledged {sha[:12]}")
                held = [d["strokes"] for d in stored_drawings(data)]
                expected = [s for r, (_, s) in sorted(self.saves[name].items()) if r <= revision]
                if sorted(map(canonical, held)) != sorted(map(canonical, expected)):
                    problems.append(f"{name} revision {revision} holds the drawings {describe(held)}; "
                                    f"acknowledged {describe(expected)}")
                self.checked[(name, revision)] = sha
        return problems


def canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True)


def colour_at(pdf: bytes, x: int, y: int) -> str:
    """`red`, `blue` or `none`: the ink on page 0 at (x, y), rendered at 72 dpi."""
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "page.pdf"
        path.write_bytes(pdf)
        _, _, rows = render_page_rgb(path, 0)
    r, g, b = rows[y][x]
    if r > 180 and g < 90 and b < 90:
        return "red"
    if b > 180 and r < 90 and g < 90:
        return "blue"
    return "none"


def centre(stroke: dict) -> Tuple[int, int]:
    (p, q) = stroke["points"]
    return int((p["x"] + q["x"]) / 2), int((p["y"] + q["y"]) / 2)


# -- 1. a save from a stale copy ----------------------------------------------------------------

@pytest.mark.parametrize("reopened", ["x.pdf", "y.pdf"])
def test_a_submit_back_on_the_first_instance_saves_what_was_acknowledged(tmp_path: Path, reopened: str) -> None:
    """On A: open x.pdf, draw red. On B: submit (x.pdf revision 2), open `reopened`, draw blue.
    Back on A: submit. It must save the blue stroke only (x.pdf revision 3 on top of revision 2,
    or y.pdf revision 2), and no revision may appear that the client was not acknowledged."""
    with two_instances(tmp_path) as cluster, Roamer(cluster) as client:
        documents = Documents(["x.pdf", "y.pdf"])
        client.open_session(A)
        client.ok(A, "canvas.open", {"document": "x.pdf", "page": 0})
        assert client.ok(A, "drawing.addStroke", RED)["strokes"] == 1
        first = client.ok(B, "canvas.submit")["document"]
        assert (first["name"], first["revision"]) == ("x.pdf", 2), first
        documents.saved("x.pdf", 2, first["sha256"], [RED])
        client.ok(B, "canvas.open", {"document": reopened, "page": 0})
        assert client.ok(B, "drawing.addStroke", BLUE)["strokes"] == 1

        submit = client.new_request("canvas.submit", {})
        result = client.ok(A, "canvas.submit", request_id=submit)
        expected = (reopened, documents.current(reopened) + 1)
        problems = []
        saved = result.get("document", {})
        if (saved.get("name"), saved.get("revision")) != expected:
            problems.append(f"the submit on A was acknowledged as {saved}, expected {expected[0]} revision {expected[1]}")
        else:
            documents.saved(reopened, expected[1], saved["sha256"], [BLUE])
        problems += client.retry_everywhere(submit)
        problems += documents.check(client, B)

        # The same, seen as a reader sees it: the page rendered, colour where each was drawn.
        data, _ = revision_bytes(client, B, reopened, documents.current(reopened))
        seen = {name: colour_at(data, *centre(stroke)) for name, stroke in (("red", RED), ("blue", BLUE))}
        wanted = {"red": "red" if reopened == "x.pdf" else "none", "blue": "blue"}
        if seen != wanted:
            problems.append(f"{reopened} as rendered: {seen}, expected {wanted}")
        if reopened == "y.pdf":
            current = client.ok(B, "document.info", {"name": "x.pdf"}, session=False)
            if current["revision"] != 2:
                problems.append(f"x.pdf is at revision {current['revision']}; the client saved revision 2 only")
        assert client.ok(B, "canvas.state")["state"] == "closed"
        assert not problems, "\n".join(problems)


# -- 1b. the same, as a random walk between the instances ---------------------------------------

# How often the walk's next request goes to the other instance (0 checks the model itself on one).
SWITCH = float(os.environ.get("FAULTS_SWITCH", "0.6"))
# The walk's requests, weighted by the phase the client was acknowledged: mostly what that phase
# takes (a closed canvas is opened, an open one drawn on and submitted), now and then what it refuses.
WEIGHTS = {"closed": [8, 1, 1, 1, 1, 1, 1], "open": [1, 6, 1, 3, 1, 1, 1], "minimized": [4, 1, 1, 2, 1, 1, 1]}
# Per walk: steps, instance switches, and (request, phase) pairs tried.
WALK: Counter = Counter()


def unique_stroke(number: int) -> dict:
    """A stroke told apart from every other by its colour (kept as spelled, in drawing.get and
    in the drawing a save stores)."""
    x, y = 50 + (number % 10) * 50, 80 + (number // 10 % 12) * 55
    return {"color": f"#{number * 40503 % 0xFFFFFF:06X}", "points": [{"x": x, "y": y}, {"x": x + 40, "y": y + 12}],
            "tool": "pen", "width": 3}


class RoamingSession:
    """One session, two documents, every request sent to an instance the walk picks. The model
    (model.py's canvas, plus the target and the acknowledged revisions) predicts every reply;
    after every step no revision may exist that was not acknowledged, and each acknowledged one
    must hold exactly the drawings of the submits acknowledged into it."""

    def __init__(self, cluster: Cluster, prefix: str, where: int, first_stroke: int = 0):
        self.cluster = cluster
        self.first_stroke = first_stroke
        self.names = [f"{prefix}-x.pdf", f"{prefix}-y.pdf"]
        for name in self.names:
            shutil.copy(ROOT / "samples" / "notes.pdf", cluster.documents / name)
        self.client = Roamer(cluster)
        self.client.open_session(where)
        self.model = Model()
        self.target: Optional[str] = None
        self.documents = Documents(self.names)
        self.strokes = 0
        self.prefix = prefix

    def close(self) -> None:
        self.client.close()

    def final_check(self) -> None:
        if self.model.state == "open":
            drawing = self.client.ok(self.client.last, "drawing.get")
            assert [canonical(s) for s in drawing["strokes"]] == [canonical(s) for s in self.model.strokes], \
                f"the drawing holds {describe([drawing['strokes']])}, acknowledged {describe([self.model.strokes])}"
        problems = self.documents.check(self.client, self.client.last)
        assert not problems, "\n".join(problems)

    def expect_invalid_state(self, reply: dict, method: str) -> None:
        row = self.model.row(method)
        assert reply.get("error", {}).get("code") == "INVALID_STATE", f"{method} while {self.model.state}: {reply}"
        assert row.reply == f"INVALID_STATE:{reply['error']['data']['reason']}", (row, reply)

    def count(self, method: str) -> None:
        WALK["steps"] += 1
        WALK[(method, self.model.state)] += 1

    def open(self, where: int, which: Optional[int]) -> None:
        self.count("canvas.open")
        if self.model.state == "minimized":
            which = None if self.target is None else self.names.index(self.target)
        name = None if which is None else self.names[which]
        reply = self.client.ask(where, "canvas.open", {} if name is None else {"document": name, "page": 0})
        if self.model.state == "open" and name is not None and name != self.target:
            assert reply.get("error", {}).get("code") == "CONFLICT", f"open {name} while open on {self.target}: {reply}"
            return
        assert reply.get("result", {}).get("state") == "open", f"open {name} while {self.model.state}: {reply}"
        if self.model.state == "closed":
            self.target = name
        self.model.step("open", "client")

    def stroke(self, where: int) -> None:
        self.count("drawing.addStroke")
        self.strokes += 1
        stroke = unique_stroke(self.strokes + self.first_stroke)
        reply = self.client.ask(where, "drawing.addStroke", stroke)
        if self.model.state != "open":
            return self.expect_invalid_state(reply, "edit")
        self.model.edit("drawing.addStroke", stroke)
        assert reply.get("result", {}).get("strokes") == len(self.model.strokes), \
            f"after a stroke the drawing has {reply.get('result', reply)}, acknowledged {len(self.model.strokes)} strokes"

    def undo(self, where: int) -> None:
        self.count("drawing.undo")
        reply = self.client.ask(where, "drawing.undo")
        if self.model.state != "open":
            return self.expect_invalid_state(reply, "edit")
        changed = self.model.edit("drawing.undo", {})
        result = reply.get("result", {})
        assert (result.get("changed"), result.get("strokes")) == (changed, len(self.model.strokes)), \
            f"undo answered {reply}, acknowledged {len(self.model.strokes)} strokes (changed {changed})"

    def end(self, where: int, action: str) -> None:
        self.count(f"canvas.{action}")
        reply = self.client.ask(where, f"canvas.{action}")
        row = self.model.row(action)
        if row.reply.startswith("INVALID_STATE"):
            return self.expect_invalid_state(reply, action)
        assert "result" in reply, f"{action} while {self.model.state}: {reply}"
        result = reply["result"]
        strokes, content = list(self.model.strokes), self.model.has_content
        self.model.step(action, "client")
        assert (result["action"], result["hasContent"], result["state"]) == (row.result, content, self.model.state), \
            f"{action}: {result}, expected {row.result} hasContent {content}"
        if action == "submit" and self.target is not None:
            expected = self.documents.current(self.target) + (1 if content else 0)
            saved = result.get("document", {})
            assert (saved.get("name"), saved.get("revision")) == (self.target, expected), \
                f"the submit was acknowledged as {saved}, expected {self.target} revision {expected}"
            if content:
                self.documents.saved(self.target, expected, saved["sha256"], strokes)
        else:
            assert "document" not in result, f"{action} without a document target answered {result}"
        if action != "minimize":
            self.target = None

    def retry(self, where: int) -> None:
        """The last request answered with a result, again with its id: the first reply, byte
        for byte."""
        answered = [i for i, raw in self.client.answered.items() if "result" in json.loads(raw)]
        if answered:
            WALK["retries"] += 1
            problems = self.client.retry_everywhere(max(answered), alive=(where,))
            assert not problems, "\n".join(problems)

    def fault(self, kind: str, random: Random, log: List[str]) -> List[str]:
        """A fault between two steps, at the instance that served the last request:
        `redis` (Redis restarted: SIGTERM, started again on its append-only log), `redis-kill`
        (the same after SIGKILL), `kill`
        (SIGKILL, started again at once under its own name, so that it waits out its lease) or
        `pause` (SIGSTOP for a few steps, each request meant for it sent there and then to
        the other instance; SIGCONT, then what it answers to those it had)."""
        where = self.client.last
        WALK[f"fault {kind}"] += 1
        if kind in ("redis", "redis-kill"):
            log.append("Redis killed (-9) and started again" if kind == "redis-kill" else "Redis restarted")
            self.cluster.restart_redis(kill=kind == "redis-kill")
        elif kind == "kill":
            log.append(f"{'AB'[where]} killed (-9) and started again")
            instance = self.cluster.instances[where]
            self.cluster.kill(instance)
            self.cluster.start_instance(instance)
            self.client.reconnect(where)
        elif kind == "pause":
            steps = random.randint(2, 6)
            log.append(f"{'AB'[where]} stopped for {steps} steps")
            with paused(self.cluster.instances[where]):
                self.client.stopped = where
                try:
                    for _ in range(steps):
                        self.step(random, log)
                finally:
                    self.client.stopped = None
            log.append(f"{'AB'[where]} continued: canvas.state there")
            queued, self.client.queued = self.client.queued, []
            # Behind what it had queued, in the session's order: the state as acknowledged.
            state = self.client.ok(where, "canvas.state")
            problems = late_reply_problems(self.client, queued, where=where, sentinel=False)
            if (state["state"], state["hasContent"]) != (self.model.state, self.model.has_content):
                problems.append(f"canvas.state on {'AB'[where]}, continued: {state['state']} hasContent {state['hasContent']}, "
                                f"acknowledged {self.model.state} hasContent {self.model.has_content}")
            return problems
        return []

    def step(self, random: Random, log: List[str]) -> None:
        """One random request, written to `log` before it is sent."""
        # Mostly the other instance than the last request's: the walk is about switching.
        where = (1 - self.client.last) if random.random() < SWITCH else self.client.last
        kinds = ["open", "stroke", "undo", "submit", "cancel", "minimize", "retry"]
        kind = random.choices(kinds, weights=WEIGHTS[self.model.state])[0]
        if kind == "open":
            which = random.choice([0, 0, 1, None])
            log.append(f"{'AB'[where]}: open {None if which is None else self.names[which]}")
            self.open(where, which)
            return
        log.append(f"{'AB'[where]}: {kind}")
        if kind in ("stroke", "undo", "retry"):
            getattr(self, kind)(where)
        else:
            self.end(where, kind)


FAULT_KINDS = os.environ.get("FAULTS_KINDS", "pause,redis,kill,redis-kill").split(",")


@pytest.mark.parametrize("faults", [False, True], ids=["switches", "switches+pauses+kills+redis-restarts"])
def test_a_session_moved_at_random_between_two_instances_keeps_to_what_was_acknowledged(tmp_path: Path, faults: bool) -> None:
    """Random walks (seeded: FAULTS_SEED, 1 by default, so CI runs the same walks every time)
    of FAULTS_STEPS requests (150) for each of 2 sessions, more than 100 switches between
    instances in all; the model is checked after every step. With `faults`, every 25 steps in
    turn: the instance last used stopped for a few steps, Redis restarted, the instance last
    used killed and started again, Redis killed and started again. A failure names the seed
    and the steps that led to it."""
    WALK.clear()
    seed = int(os.environ.get("FAULTS_SEED", "1"))
    steps = int(os.environ.get("FAULTS_STEPS", "150"))
    random = Random(seed)
    with two_instances(tmp_path, documents=()) as cluster:
        for walk in range(2):
            session = RoamingSession(cluster, f"walk{walk}", random.choice([A, B]), first_stroke=10_000 * walk)
            log: List[str] = []
            try:
                for number in range(steps):
                    problems = []
                    if faults and number % 25 == 24:
                        problems += session.fault(FAULT_KINDS[number // 25 % len(FAULT_KINDS)], random, log)
                    session.step(random, log)
                    problems += session.documents.check(session.client, session.client.last)
                    assert not problems, "\n".join(problems)
                session.final_check()
            except AssertionError as failure:
                raise AssertionError(f"walk {walk} of seed {seed} (FAULTS_SEED={seed}), after {len(log)} steps "
                                     f"(last ones: {'; '.join(log[-12:])}):\n{failure}") from None
            finally:
                WALK["switches"] += session.client.switches
                session.close()
    print(f"\nrandom walk (seed {seed}): {WALK['steps']} steps, {WALK['switches']} switches between instances, "
          f"{WALK['retries']} retries, faults {dict((k, v) for k, v in WALK.items() if str(k).startswith('fault'))}, "
          f"{WALK['dropped']} requests a continued instance dropped; " + ", ".join(f"{m}/{s}={n}" for (m, s), n in sorted((k, v) for k, v in WALK.items() if isinstance(k, tuple))))
    assert WALK["switches"] >= 100, f"only {WALK['switches']} switches: the walk shows little"


# -- 2. a paused instance runs an acknowledged request again ------------------------------------

PAUSE = 4.0   # seconds the holder stays stopped: a GC pause, a VM migration, a stopped container


def drawing_everywhere(client: Roamer, expected: List[dict], order: Tuple[int, ...] = (B, A, B)) -> List[str]:
    """The drawing as each instance answers it (the session moving with each ask), against the
    strokes acknowledged."""
    problems = []
    for where in order:
        strokes = client.ok(where, "drawing.get")["strokes"]
        if [canonical(s) for s in strokes] != [canonical(s) for s in expected]:
            held, acknowledged = Counter(map(canonical, strokes)), Counter(map(canonical, expected))
            twice = [json.loads(s)["color"] for s, n in held.items() if n > 1]
            missing = [json.loads(s)["color"] for s in acknowledged - held]
            problems.append(f"drawing.get on {'AB'[where]}: the drawing has {len(strokes)} strokes, {len(expected)} acknowledged"
                            + (f"; more than once: {twice}" if twice else "") + (f"; missing: {missing}" if missing else "")
                            + (f"; order {describe([strokes])}, acknowledged {describe([expected])}" if not (twice or missing) else ""))
    return problems


def pause_and_move(cluster: Cluster, client: Roamer, strokes: List[dict], back: Optional[dict] = None) -> Tuple[int, Optional[int]]:
    """A holds the session, open, with one stroke. A is stopped; a stroke sent to it gets no
    reply and is sent again, same id, to B, which answers it; 80 more requests on B (every
    tenth a stroke, the others pencil.configure, each changing the session and taking a place
    in its reply cache); A stays stopped PAUSE seconds in all. With `back`, that stroke is
    sent to A last, as a new request, and waits there behind the old one. Returns the ids of
    the stroke sent twice and of `back`. `strokes` gets what was acknowledged."""
    client.open_session(A)
    client.ok(A, "canvas.open")
    strokes.append(unique_stroke(1))
    client.ok(A, "drawing.addStroke", strokes[-1])
    with paused(cluster.instances[A]) as since:
        strokes.append(unique_stroke(2))
        resent = client.send_unanswered(A, "drawing.addStroke", strokes[-1])
        assert client.ok(B, "drawing.addStroke", request_id=resent)["strokes"] == 2
        for number in range(80):
            if number % 10 == 9:
                strokes.append(unique_stroke(3 + number))
                assert client.ok(B, "drawing.addStroke", strokes[-1])["strokes"] == len(strokes)
            else:
                client.ok(B, "pencil.configure", {"policy": ["alwaysToggle", "respectPreference"][number % 2]})
        time.sleep(max(0.0, since + PAUSE - time.monotonic()))
        if back is not None:
            strokes.append(back)
            later = client.new_request("drawing.addStroke", back)
            client.channels[A].socket.send(client.frame(later, "drawing.addStroke", back, True))
    return resent, later if back is not None else None


def closed_on_both(client: Roamer, after: str) -> List[str]:
    """The canvas closed, as asked on either instance, after an acknowledged `after`."""
    problems = []
    for where in (A, B):
        state = client.ok(where, "canvas.state")["state"]
        if state != "closed":
            problems.append(f"canvas.state on {'AB'[where]}: {state}, after an acknowledged {after}")
    return problems


def late_reply_problems(client: Roamer, queued: List[int], where: int = A, sentinel: bool = True) -> List[str]:
    """The woken instance's answers to the requests it had when it was stopped: each the reply
    the client was given for it, or an error (a retry-later, or the request refused), never
    another result. A dropped one is no fault (the client was answered elsewhere); to know
    when they have all had their turn, a `canvas.state` is sent to it behind them (a session's
    requests are served in order) unless `sentinel` is false and the caller sent one."""
    if sentinel:
        client.ok(where, "canvas.state")
    problems = []
    for request_id in queued:
        late = client.channels[where].late.pop(request_id, None)
        if late is None:
            WALK["dropped"] += 1
            continue
        first = client.answered.get(request_id)
        if late != first and "result" in json.loads(late):
            method, _ = client.requests[request_id]
            problems.append(f"{'AB'[where]}, continued, answered the {method} it had queued (id {request_id}) with "
                            f"{late.decode()[:300]}; the client was answered {first.decode()[:300] if first else None}")
    return problems


def test_a_paused_holder_does_not_run_an_acknowledged_request_again(tmp_path: Path) -> None:
    """SIGSTOP the holder; its request is answered by the other instance; SIGCONT. The drawing
    holds each acknowledged stroke once, on either instance, and both go on serving."""
    with two_instances(tmp_path, documents=()) as cluster, Roamer(cluster) as client:
        strokes: List[dict] = []
        resent, _ = pause_and_move(cluster, client, strokes)
        problems = late_reply_problems(client, [resent])
        problems += drawing_everywhere(client, strokes)
        # Both instances go on: a stroke on each, then the drawing on each again.
        for where in (A, B):
            strokes.append(unique_stroke(100 + where))
            reply = client.ask(where, "drawing.addStroke", strokes[-1])
            if reply.get("result", {}).get("strokes") != len(strokes):
                problems.append(f"a new stroke on {'AB'[where]} answered {reply}, expected {len(strokes)} strokes")
        problems += drawing_everywhere(client, strokes, (A, B))
        assert not problems, "\n".join(problems)


def test_a_paused_holder_serves_the_client_that_comes_back_to_it(tmp_path: Path) -> None:
    """As above, but the client's next request goes back to the woken instance, right behind
    the copy it still had: it must be run on the session as acknowledged (not on A's old copy,
    not lost) and answered once."""
    with two_instances(tmp_path, documents=()) as cluster, Roamer(cluster) as client:
        strokes: List[dict] = []
        resent, back = pause_and_move(cluster, client, strokes, back=unique_stroke(200))
        raw = client.channels[A].receive(back, 15.0)
        error = json.loads(raw).get("error", {}) if raw is not None else {}
        if raw is None or (error.get("code") == "UNAVAILABLE" and error.get("data", {}).get("reason") in RETRY_REASONS):
            reply = client.ask(A, "drawing.addStroke", request_id=back)   # as a client would: again, same id
        else:
            client.answered[back] = raw
            reply = json.loads(raw)
        problems = late_reply_problems(client, [resent], sentinel=False)
        if reply.get("result", {}).get("strokes") != len(strokes):
            problems.append(f"the client's new stroke on A answered {reply}, expected {len(strokes)} strokes")
        problems += drawing_everywhere(client, strokes, (A, B, A))
        assert not problems, "\n".join(problems)


# -- 3. faults inside a save, and under the store -----------------------------------------------

def submit_held_in_a_save(cluster: Cluster, client: Roamer, documents: Documents) -> Tuple[int, Any]:
    """A holds the session, open on x.pdf with the red stroke; the test holds x.pdf's lock and
    sends A the submit, and returns once A waits for the lock, inside its save (the request's
    id, and the open lock file: closing it lets the save go on)."""
    client.open_session(A)
    client.ok(A, "canvas.open", {"document": "x.pdf", "page": 0})
    client.ok(A, "drawing.addStroke", RED)
    # The document's one-writer lock is its history's lock file (made here if no save made it).
    history = cluster.documents / ".canvas-revisions" / "x.pdf"
    history.mkdir(parents=True, exist_ok=True)
    held = open(history / "lock", "ab")
    fcntl.flock(held.fileno(), fcntl.LOCK_EX)
    submit = client.send_unanswered(A, "canvas.submit", {}, wait=0.1)
    try:
        wait_until(lambda: waiting_for_a_lock(cluster.instances[A]),
                   "A waiting for x.pdf's lock, in its save (if saves no longer wait on flock, this test needs "
                   "another way to hold an instance inside a save)")
    except BaseException:
        held.close()
        raise
    return submit, held


def red_submit_saved(saved: dict, documents: Documents) -> List[str]:
    """The submit held in a save, acknowledged as `saved`: it must be x.pdf revision 2, and is
    recorded as holding the red stroke."""
    problems = []
    if (saved["name"], saved["revision"]) != ("x.pdf", 2):
        problems.append(f"the submit was acknowledged as {saved}, expected x.pdf revision 2")
    documents.saved(saved["name"], saved["revision"], saved["sha256"], [RED])
    return problems


def test_a_holder_killed_inside_a_save_leaves_one_revision_answered_once(tmp_path: Path) -> None:
    """kill -9 of the holder while its save waits for the document: the submit sent again to
    the other instance is answered with one revision holding the red stroke once, and its
    repeat on either instance (the killed one restarted) answers the same."""
    with two_instances(tmp_path) as cluster, Roamer(cluster) as client:
        documents = Documents(["x.pdf", "y.pdf"])
        submit, held = submit_held_in_a_save(cluster, client, documents)
        with held:   # the lock, let go where the test closes it, at the latest on leaving
            cluster.kill(cluster.instances[A])
            held.close()
            problems = red_submit_saved(client.ok(B, "canvas.submit", request_id=submit)["document"], documents)
            # The killed instance back at once under its own name, once its lease ran out.
            cluster.start_instance(cluster.instances[A])
            client.reconnect(A)
            problems += client.retry_everywhere(submit)
            problems += documents.check(client, B)
            problems += closed_on_both(client, after="submit")
            assert not problems, "\n".join(problems)


def test_a_holder_paused_inside_a_save_does_not_save_its_old_copy_later(tmp_path: Path) -> None:
    """The holder stopped while its save waits for the document (a pause between deciding to
    save and writing). The submit is sent again to B and answered (x.pdf revision 2, red);
    on B the client opens x.pdf again, draws blue and submits (revision 3). Once A is continued
    its save must not write: no revision 4, nobody asked for one."""
    with two_instances(tmp_path) as cluster, Roamer(cluster) as client:
        documents = Documents(["x.pdf", "y.pdf"])
        submit, held = submit_held_in_a_save(cluster, client, documents)
        with held:   # the lock, let go where the test closes it, at the latest on leaving
            with paused(cluster.instances[A]):
                held.close()
                saved = client.ok(B, "canvas.submit", request_id=submit)["document"]
                assert (saved["name"], saved["revision"]) == ("x.pdf", 2), saved
                documents.saved("x.pdf", 2, saved["sha256"], [RED])
                client.ok(B, "canvas.open", {"document": "x.pdf", "page": 0})
                client.ok(B, "drawing.addStroke", BLUE)
                again = client.ok(B, "canvas.submit")["document"]
                assert (again["name"], again["revision"]) == ("x.pdf", 3), again
                documents.saved("x.pdf", 3, again["sha256"], [BLUE])
            problems = late_reply_problems(client, [submit])
            problems += client.retry_everywhere(submit)
            problems += documents.check(client, B)
            problems += closed_on_both(client, after="submit")
            assert not problems, "\n".join(problems)


def test_a_holder_paused_inside_a_save_does_not_save_after_the_client_cancelled(tmp_path: Path) -> None:
    """As above, but the client, with no reply to its submit, gives up on it: on B it cancels
    (acknowledged: `cancelled`, the red stroke discarded). A's save, continued, would make a
    revision from a copy older than that cancel: x.pdf must stay at revision 1 (a save there
    after the cancel cannot be ordered before it, since the cancel found the canvas open)."""
    with two_instances(tmp_path) as cluster, Roamer(cluster) as client:
        documents = Documents(["x.pdf", "y.pdf"])
        submit, held = submit_held_in_a_save(cluster, client, documents)
        with held:   # the lock, let go where the test closes it, at the latest on leaving
            with paused(cluster.instances[A]):
                held.close()
                cancelled = client.ok(B, "canvas.cancel")
                assert (cancelled["action"], cancelled["hasContent"]) == ("cancelled", True), cancelled
            problems = late_reply_problems(client, [submit])
            problems += documents.check(client, B)
            # The submit sent again now finds a closed canvas: it cannot be acknowledged as a save.
            again = client.ask(B, "canvas.submit", request_id=submit)
            if "result" in again:
                problems.append(f"the submit sent again after the cancel was acknowledged: {again}")
            problems += closed_on_both(client, after="cancel")
            assert not problems, "\n".join(problems)


def test_one_submit_saving_on_both_instances_at_once_makes_one_revision(tmp_path: Path) -> None:
    """A's save waits for the document; the client, with no reply, sends the submit again to
    B, whose save waits too; the lock let go, both may go on. One revision, holding the red
    stroke once; an instance that answers with a result answers the same one."""
    with two_instances(tmp_path) as cluster, Roamer(cluster) as client:
        documents = Documents(["x.pdf", "y.pdf"])
        submit, held = submit_held_in_a_save(cluster, client, documents)
        with held:   # the lock, let go where the test closes it, at the latest on leaving
            other = client.channels[B]
            other.socket.send(client.frame(submit, "canvas.submit", {}, True))
            # (Were B to answer first, its reply is read here and asked for again below: a retry.)
            wait_until(lambda: waiting_for_a_lock(cluster.instances[B]) or other.receive(submit, 0.01) is not None,
                       "B waiting for x.pdf's lock too, or answering")
            held.close()
            saved = client.ok(B, "canvas.submit", request_id=submit)["document"]
        problems = red_submit_saved(saved, documents)
        problems += late_reply_problems(client, [submit])
        problems += client.retry_everywhere(submit)
        problems += documents.check(client, B)
        assert not problems, "\n".join(problems)


# -- 3. a read answered from a stale copy ------------------------------------------------------

def test_a_large_drawing_read_on_a_stale_copy_is_confirmed_first(tmp_path: Path) -> None:
    """A drawing.get of a drawing large enough to be encoded off the loop is a read like any
    other: on a copy another instance has moved on from, it must not answer the old drawing.
    (It did: 3 strokes where 4 were acknowledged, until a smaller read found the copy stale.)"""
    with two_instances(tmp_path, documents=()) as cluster, Roamer(cluster) as client:
        client.open_session(A)
        client.ok(A, "canvas.open")
        strokes = []
        for number in range(3):
            points = [{"x": 20 + (i % 500), "y": 30 + number * 100 + i // 500 * 10} for i in range(1000)]
            strokes.append({"color": f"#00{number:02d}00", "points": points, "tool": "pen", "width": 2})
            client.ok(A, "drawing.addStroke", strokes[-1])
        assert len(client.ok(A, "drawing.get")["strokes"]) == 3
        assert len(client.ok(B, "drawing.get")["strokes"]) == 3   # B takes the session over
        strokes.append(unique_stroke(7))
        assert client.ok(B, "drawing.addStroke", strokes[-1])["strokes"] == 4
        got = client.ok(A, "drawing.get")["strokes"]
        assert [canonical(s) for s in got] == [canonical(s) for s in strokes], \
            f"drawing.get on A, whose copy is stale: {len(got)} strokes, {len(strokes)} acknowledged"
