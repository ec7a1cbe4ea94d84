"""The README's first steps, run as printed, and the README and docs/ a newcomer reads.

`make sample-document` (what `make run` does before it starts canvasd) fills a fresh folder;
then the shell block of the README's "First steps" runs word for word against a canvasd of our
own on that folder, with `canvasctl` reached through CANVAS_ENDPOINT and CANVAS_EVENTS, and the
Python example of "Documents and flattening" (docs/documents.md) runs against it too. A wrapper
in front of canvasctl records what each command printed, so every output can be checked, and
`canvasctl events` reads the whole walk through a pipe. The README stays short, every relative
link in it and in docs/ leads somewhere, and `make run` names every busy port at once.
"""

from __future__ import annotations

import json
import os
import queue
import re
import socket
import stat
import subprocess
import threading
import time
from pathlib import Path
from typing import Dict, List

from canvasbridge import CanvasClient
from conftest import ROOT, Server, canvasd_path

README = ROOT / "README.md"
DOCS = ROOT / "docs"
SAMPLE = ROOT / "samples" / "notes.pdf"

# Runs the real canvasctl, keeps its arguments, output and status, and passes both on.
WRAPPER = """#!/usr/bin/env bash
n=$(( $(cat "$CANVASCTL_LOG/count" 2>/dev/null || echo 0) + 1 ))
echo "$n" > "$CANVASCTL_LOG/count"
"$CANVASCTL_REAL" "$@" > "$CANVASCTL_LOG/$n.out"
status=$?
echo "$status" > "$CANVASCTL_LOG/$n.status"
printf '%s\\n' "$@" > "$CANVASCTL_LOG/$n.args"
cat "$CANVASCTL_LOG/$n.out"
exit "$status"
"""


def headings(text: str) -> List[tuple]:
    """(level, title, offset) of each Markdown heading of `text`, outside fenced blocks."""
    found, fenced, offset = [], False, 0
    for line in text.splitlines(keepends=True):
        if line.startswith("```"):
            fenced = not fenced
        elif not fenced and re.match(r"#{1,6} ", line):
            level = len(line) - len(line.lstrip("#"))
            found.append((level, line[level:].strip(), offset))
        offset += len(line)
    return found


def section(title: str, page: Path = README) -> str:
    """The section of `page` under the heading `title` (of any level), up to the next heading
    of the same level or a higher one."""
    text = page.read_text(encoding="utf-8")
    marks = headings(text)
    (level, start), = [(level, offset) for level, name, offset in marks if name == title]
    end = next((offset for other, _, offset in marks if offset > start and other <= level), len(text))
    return text[start:end]


def blocks(text: str, language: str) -> List[str]:
    return re.findall(rf"^```{language}\n(.*?)^```", text, flags=re.S | re.M)


def sample_document(documents: Path) -> None:
    subprocess.run(["make", "-s", "-C", str(ROOT), "sample-document", f"DOCUMENTS={documents}"], check=True)


def test_make_run_starts_with_the_sample_document_and_never_replaces_it(tmp_path):
    documents = tmp_path / "documents"
    sample_document(documents)
    assert (documents / "notes.pdf").read_bytes() == SAMPLE.read_bytes()
    (documents / "notes.pdf").write_bytes(b"the user's own notes")
    sample_document(documents)
    assert (documents / "notes.pdf").read_bytes() == b"the user's own notes"


class Lines:
    """A process's standard output, read line by line as it comes."""

    def __init__(self, process: subprocess.Popen):
        self.queue: "queue.Queue[str]" = queue.Queue()
        threading.Thread(target=self._read, args=(process.stdout,), daemon=True).start()

    def _read(self, stream) -> None:
        for line in stream:
            self.queue.put(line)

    def until(self, predicate, timeout: float) -> List[dict]:
        """Events read until one satisfies ``predicate``; fails after ``timeout`` seconds."""
        seen = []
        deadline = time.monotonic() + timeout
        while True:
            remaining = deadline - time.monotonic()
            assert remaining > 0, f"no such event came through the pipe; {len(seen)} others did, last {seen[-2:]}"
            try:
                line = self.queue.get(timeout=remaining)
            except queue.Empty:
                continue
            assert line.endswith("\n")
            seen.append(json.loads(line))
            if predicate(seen[-1]):
                return seen


def test_first_steps_run_as_printed(tmp_path):
    (block,) = blocks(section("First steps"), "sh")
    # What the issue asked the walk to show: a document target and a text drawn from the shell.
    assert "canvasctl open --session $S --document notes.pdf --page" in block
    assert re.search(r"canvasctl draw --session \$S --text ", block)

    work = tmp_path / "work"
    documents = work / "documents"
    sample_document(documents)
    server = Server(tmp_path / "server", ["--log-level", "warning"], documents=documents)
    canvasctl = canvasd_path().parent / "canvasctl"
    wrapper = tmp_path / "bin" / "canvasctl"
    wrapper.parent.mkdir()
    wrapper.write_text(WRAPPER)
    wrapper.chmod(wrapper.stat().st_mode | stat.S_IEXEC)
    log = tmp_path / "log"
    log.mkdir()
    # The block makes its scratch folder with mktemp -d: under TMPDIR, here one of our own.
    scratch_root = tmp_path / "tmp"
    scratch_root.mkdir()
    environment = dict(os.environ, PATH=f"{wrapper.parent}:{os.environ['PATH']}", CANVAS_ENDPOINT=server.endpoint,
                       CANVAS_EVENTS=server.events, CANVASCTL_REAL=str(canvasctl), CANVASCTL_LOG=str(log),
                       TMPDIR=str(scratch_root))
    events = subprocess.Popen([str(canvasctl), "events"], stdout=subprocess.PIPE, text=True, env=environment)
    try:
        lines = Lines(events)
        # Events reach the pipe while canvasctl events still runs (each line is flushed), once
        # its subscription is through: probe with a session of our own until one shows.
        with CanvasClient(server.endpoint) as client:
            probe = client.open_session(transitions="instant")
            found = []

            def probed(event: dict) -> bool:
                if event["session"] == probe.id:
                    found.append(event)
                return bool(found)

            for _ in range(50):
                probe.open()
                probe.cancel()
                try:
                    lines.until(probed, timeout=0.2)
                    break
                except AssertionError:
                    continue
            assert found, "canvasctl events printed nothing into its pipe"
            # Now that it is subscribed, one small event must come through on its own: a
            # block-buffered pipe would hold it until some 4 KiB more had come.
            probe.open()
            last = probe.state()["seq"]
            lines.until(lambda e: e["session"] == probe.id and e["seq"] == last, timeout=5)

            walk = subprocess.run(["bash", "-euo", "pipefail", "-c", block], cwd=work, env=environment,
                                  capture_output=True, text=True, timeout=300)
            assert walk.returncode == 0, walk.stderr

            runs = []
            for n in range(1, int((log / "count").read_text()) + 1):
                runs.append({"args": (log / f"{n}.args").read_text().splitlines(),
                             "status": int((log / f"{n}.status").read_text()),
                             "out": (log / f"{n}.out").read_text()})
            commands = [run["args"][0] for run in runs]
            assert commands == ["hello", "documents", "open-session", "open", "draw", "draw", "edit-text", "undo", "redo",
                                "double-tap", "double-tap", "get-drawing", "submit", "revisions", "get", "flatten",
                                "fuzz"]
            # Nothing was written where the walk started (the repository folder, for a reader).
            assert sorted(path.name for path in work.iterdir()) == ["documents"]
            (scratch,) = scratch_root.iterdir()
            assert sorted(path.name for path in scratch.iterdir()) == ["drawing.json", "marked.pdf", "notes.pdf"]
            by_command: Dict[str, List[dict]] = {}
            for run in runs:
                assert run["status"] == 0, run
                assert run["out"].endswith("\n") and run["out"].count("\n") == 1, run
                if run["args"][0] != "fuzz":  # the fuzzer's report is a sentence
                    by_command.setdefault(run["args"][0], []).append(json.loads(run["out"]))

            assert [d["name"] for d in by_command["documents"][0]["documents"]] == ["notes.pdf"]
            session = by_command["open-session"][0]["session"]
            assert by_command["open"] == [{"state": "open"}]
            assert [r["outcome"] for r in by_command["double-tap"]] == ["minimized", "opened"]
            submitted = by_command["submit"][0]["document"]
            assert {k: submitted[k] for k in ("name", "revision", "pageCount")} == {"name": "notes.pdf", "revision": 2, "pageCount": 3}
            assert len(submitted["sha256"]) == 64
            assert [r["revision"] for r in by_command["revisions"][0]["revisions"]] == [1, 2]
            drawing = json.loads((scratch / "drawing.json").read_text())
            assert (len(drawing["strokes"]), [t["text"] for t in drawing["texts"]]) == (1, ["Hello from canvasctl"])
            # The edit, undone and redone, is in the drawing: nudged up 20 points and larger.
            assert [(t["y"], t["fontSize"]) for t in drawing["texts"]] == [(130, 24)]
            assert [r["changed"] for r in by_command["edit-text"] + by_command["undo"] + by_command["redo"]] == [True] * 3
            fetched = by_command["get"][0]
            assert (fetched["revision"], fetched["sha256"]) == (2, submitted["sha256"])
            assert "no divergence" in runs[-1]["out"]

            # The server's document has the drawing; the offline flatten made a new, sound file.
            assert client.call("document.info", {"name": "notes.pdf"})["revision"] == 2
            marked = scratch / "marked.pdf"
            assert subprocess.run(["qpdf", "--check", str(marked)], capture_output=True).returncode == 0
            assert subprocess.run(["qpdf", "--show-npages", str(marked)], capture_output=True,
                                  text=True).stdout.strip() == "3"
            assert (scratch / "notes.pdf").read_bytes() == (documents / "notes.pdf").read_bytes()
            assert marked.read_bytes() != (documents / "notes.pdf").read_bytes()

            # The walk's events came through the pipe as they happened, the submit's save last.
            walked = lines.until(lambda e: e["session"] == session and e["event"] == "document.saved", timeout=10)
            assert events.poll() is None, "canvasctl events stopped"
            mine = [(e["event"], e["data"].get("to") or e["data"].get("action")) for e in walked
                    if e["session"] == session]
            assert mine == [("canvas.stateChanged", "open"), ("canvas.stateChanged", "minimized"),
                            ("canvas.result", "minimized"), ("pencil.doubleTap", None),
                            ("canvas.stateChanged", "open"), ("pencil.doubleTap", None),
                            ("canvas.stateChanged", "closed"), ("canvas.result", "submitted"),
                            ("document.saved", None)], mine
    finally:
        events.terminate()
        events.wait()
        server.stop()


def test_python_example_runs(server, capsys):
    (example,) = blocks(section("Documents and flattening", DOCS / "documents.md"), "python")
    assert example.count('"tcp://127.0.0.1:5555"') == 1
    exec(example.replace('"tcp://127.0.0.1:5555"', repr(server.endpoint)), {})
    printed = capsys.readouterr().out
    assert printed.endswith("\n")
    assert "'outcome': 'minimized'" in printed and "'hasContent': True" in printed


def test_the_first_screen_tells_how_to_move_every_port():
    first_screen = README.read_text(encoding="utf-8").split("\n## ")[0]
    makefile = (ROOT / "Makefile").read_text(encoding="utf-8")
    (moved,) = [block for block in blocks(first_screen, "sh") if "make run CANVAS_ENDPOINT=" in block]
    shown = dict(re.findall(r"([A-Z_]+)=(\S+)", moved))
    assert set(shown) == {"CANVAS_ENDPOINT", "CANVAS_EVENTS", "WEB_ENDPOINT", "WEB_EVENTS", "DEMO_PORT"}
    for variable, default in shown.items():
        # Each is a make variable with the default the README shows, and `make run` passes it on.
        assert re.search(rf"^{variable}\s*\?=\s*{re.escape(default)}$", makefile, flags=re.M), variable
        assert f"$({variable})" in makefile.split("\nrun:")[1].split("\n\n")[0], variable


def test_the_python_client_installs_quietly(tmp_path):
    """`make python-deps` on a fresh venv, as the first `make run` or `make cluster` does it,
    prints nothing: setuptools' warnings about editable installs are no news to act on."""
    done = subprocess.run(["make", "-s", "-C", str(ROOT), "python-deps", f"VENV={tmp_path / 'venv'}"],
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    assert (done.stdout, done.stderr) == ("", "")
    assert (tmp_path / "venv" / ".installed").exists()


def test_the_readme_is_read_in_five_minutes():
    """What it is first (before any port variable), the two commands, First steps and a map; the
    rest is in docs/."""
    text = README.read_text(encoding="utf-8")
    assert len(text.splitlines()) <= 200
    assert text.index("native half of a canvas plugin") < text.index("CANVAS_ENDPOINT")
    assert [name for level, name, _ in headings(text) if level == 2] == ["First steps", "Map"]


def slug(title: str) -> str:
    """The anchor a heading gets on GitHub."""
    return re.sub(r"[^\w\- ]", "", title.replace("`", "").lower()).replace(" ", "-")


def test_every_relative_link_in_the_readme_and_docs_leads_somewhere():
    pages = [README, *sorted(DOCS.glob("*.md"))]
    broken = []
    for page in pages:
        text = re.sub(r"^```.*?^```", "", page.read_text(encoding="utf-8"), flags=re.S | re.M)
        text = re.sub(r"`[^`\n]*`", "", text)
        for target in re.findall(r"\]\(([^)\s]+)\)", text):
            if re.match(r"[a-z]+:", target):
                continue
            path, _, anchor = target.partition("#")
            linked = (page.parent / path).resolve() if path else page
            if not linked.exists():
                broken.append(f"{page.relative_to(ROOT)}: {target} (no such file)")
            elif anchor and linked.suffix == ".md":
                anchors = {slug(name) for _, name, _ in headings(linked.read_text(encoding="utf-8"))}
                if anchor not in anchors:
                    broken.append(f"{page.relative_to(ROOT)}: {target} (no such heading)")
    assert not broken, "\n".join(broken)


def test_make_run_names_every_busy_port_at_once(tmp_path):
    """Two of canvasd's ports taken: one message names both, with the variables that move them
    and free ports to move them to, and nothing starts."""
    holders = []
    for _ in range(2):
        holder = socket.socket()
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        holders.append(holder)
    busy = [holder.getsockname()[1] for holder in holders]
    free = []
    for _ in range(3):
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            free.append(probe.getsockname()[1])
    variables = {"CANVAS_ENDPOINT": f"tcp://127.0.0.1:{busy[0]}", "CANVAS_EVENTS": f"tcp://127.0.0.1:{free[0]}",
                 "WEB_ENDPOINT": f"ws://127.0.0.1:{busy[1]}", "WEB_EVENTS": f"ws://127.0.0.1:{free[1]}",
                 "DEMO_PORT": str(free[2])}
    try:
        # `-o build`: the canvasd under test is the suite's own ($CANVASD), not one make builds.
        done = subprocess.run(["make", "-s", "-C", str(ROOT), "-o", "build", "run", f"CANVASD={canvasd_path()}",
                               f"DOCUMENTS={tmp_path / 'documents'}", *(f"{k}={v}" for k, v in variables.items())],
                              capture_output=True, text=True, timeout=60)
    finally:
        for holder in holders:
            holder.close()
    assert done.returncode != 0, done.stdout
    assert "2 ports are in use; nothing was started" in done.stderr, done.stderr
    for port, variable in zip(busy, ["CANVAS_ENDPOINT", "WEB_ENDPOINT"]):
        assert f"port {port} is in use" in done.stderr, done.stderr
    (moved,) = re.findall(r"or move them: (make run .*)$", done.stderr, flags=re.M)
    suggested = dict(re.findall(r"([A-Z_]+)=(\S+)", moved))
    assert set(suggested) == {"CANVAS_ENDPOINT", "WEB_ENDPOINT"}, moved
    for variable, value in suggested.items():
        port = int(value.rsplit(":", 1)[1])
        assert value.startswith(variables[variable].rsplit(":", 1)[0]) and port not in busy + free, moved
    assert "demo page:" not in done.stdout
    for port in free:
        with socket.socket() as probe:
            assert probe.connect_ex(("127.0.0.1", port)) != 0, port
