"""canvasctl as a user meets it: errors that name the file, the page range and the endpoint,
one default per option in --help, and a subcommand for every drawing edit (issue 28)."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path
from typing import List

import pytest

from conftest import ROOT, canvasd_path

NOTES = ROOT / "samples" / "notes.pdf"   # three pages
EMPTY = '{"strokes": [], "texts": []}'


def canvasctl(*arguments: str, cwd: Path, env: dict = None) -> subprocess.CompletedProcess:
    return subprocess.run([str(canvasd_path().parent / "canvasctl"), *arguments], cwd=cwd, capture_output=True,
                          text=True, timeout=60, env=env)


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    (tmp_path / "x.pdf").write_bytes(NOTES.read_bytes())
    (tmp_path / "d.json").write_text(EMPTY)
    return tmp_path


def flatten(folder: Path, *changes: str) -> subprocess.CompletedProcess:
    arguments = {"--document": "x.pdf", "--page": "0", "--drawing": "d.json", "--out": "o.pdf"}
    for change in changes:
        key, value = change.split("=", 1)
        arguments[key] = value
    return canvasctl("flatten", *[word for pair in arguments.items() for word in pair], cwd=folder)


def test_flatten_names_a_missing_file_and_the_system_reason(folder):
    for change, named in (("--document=missing.pdf", "--document missing.pdf"), ("--drawing=none.json", "--drawing none.json")):
        run = flatten(folder, change)
        assert run.returncode == 1 and named in run.stderr and "No such file or directory (errno 2)" in run.stderr, run.stderr
        assert "NSCocoaErrorDomain" not in run.stderr and "Usage" not in run.stderr
    run = flatten(folder, "--out=nowhere/o.pdf")
    assert run.returncode == 1 and "--out nowhere/o.pdf: cannot write into nowhere" in run.stderr, run.stderr
    (folder / "bad.json").write_text('{"strokes": [{"tool": "pen"}]}')
    run = flatten(folder, "--drawing=bad.json")
    assert run.returncode == 1 and "bad.json: not a drawing as drawing.get returns it: strokes[0]: color missing" in run.stderr
    assert not (folder / "o.pdf").exists()
    # The same for the commands that read or write a file beside a server (none is asked here).
    run = canvasctl("upload", "none.pdf", "--timeout", "100", cwd=folder)
    assert run.returncode == 1 and "file none.pdf: cannot read it: No such file or directory (errno 2)" in run.stderr
    run = canvasctl("get", "x.pdf", "--out", "nowhere/x.pdf", "--timeout", "100", cwd=folder)
    assert run.returncode == 1 and "--out nowhere/x.pdf: cannot write into nowhere" in run.stderr, run.stderr


def test_flatten_names_the_input_when_the_page_is_out_of_range(folder):
    run = flatten(folder, "--page=9")
    assert run.returncode == 2, run.stderr
    assert run.stderr.strip() == "canvasctl flatten: x.pdf has 3 pages (numbered from 0); there is no page 9"
    assert not (folder / "o.pdf").exists()


@pytest.mark.parametrize("command", [["flatten", "--document", "x.pdf", "--drawing", "d.json", "--out", "o.pdf"],
                                     ["open", "--session", "s", "--document", "x.pdf"]])
def test_a_negative_page_is_refused_as_a_page(folder, command):
    run = canvasctl(*command, "--page", "-1", cwd=folder)
    assert run.returncode == 64 and "--page counts from 0; -1 is no page" in run.stderr, run.stderr
    assert "Missing value" not in run.stderr


def test_no_reply_names_the_endpoint_tried(folder):
    endpoint = f"ipc://{folder}/nobody-here"
    run = canvasctl("hello", "--endpoint", endpoint, "--timeout", "200", cwd=folder)
    assert run.returncode == 1
    assert f"hello: no reply from {endpoint} within 200 ms. Is canvasd running there?" in run.stderr, run.stderr
    run = canvasctl("documents", "--timeout", "200", cwd=folder, env={"CANVAS_ENDPOINT": endpoint})
    assert f"no reply from {endpoint}" in run.stderr, run.stderr


def options_of(help_text: str) -> List[str]:
    """Each option's whole entry in --help (its lines up to the next option)."""
    entries, current = [], None
    for line in help_text.splitlines():
        if re.match(r"^  -", line):
            current = [line]
            entries.append(current)
        elif current is not None and line.startswith("      "):
            current.append(line)
        else:
            current = None
    return [" ".join(part.strip() for part in entry) for entry in entries]


def test_help_gives_each_option_one_default(folder):
    top = canvasctl("--help", cwd=folder).stdout
    commands = re.findall(r"^  ([a-z-]+) ", top.split("SUBCOMMANDS:")[1], flags=re.M)
    for name in ("undo", "redo", "erase", "clear", "move-text", "edit-text"):
        assert name in commands
    for command in commands:
        for entry in options_of(canvasctl(command, "--help", cwd=folder).stdout):
            assert entry.count("default") <= 1, f"{command}: {entry}"


def test_every_drawing_edit_has_a_subcommand(server, tmp_path):
    env = {"CANVAS_ENDPOINT": server.endpoint, "CANVAS_EVENTS": server.events}

    def run(*arguments: str) -> dict:
        done = canvasctl(*arguments, cwd=tmp_path, env=env)
        assert done.returncode == 0, (arguments, done.stderr)
        return json.loads(done.stdout)

    session = run("open-session")["session"]
    run("open", "--session", session)
    run("draw", "--session", session, "--points", "10,10 20,20")
    run("draw", "--session", session, "--text", "a", "--x", "-5", "--y", "30")
    assert run("move-text", "--session", session, "--index", "0", "--x", "-7", "--y", "-8")["changed"]
    assert run("edit-text", "--session", session, "--index", "0", "--dx", "-1", "--color", "#FF0000")["changed"]
    assert run("erase", "--session", session, "--x", "15", "--y", "15", "--radius", "3")["strokes"] == 0
    assert run("undo", "--session", session)["strokes"] == 1
    assert run("redo", "--session", session)["strokes"] == 0
    assert run("clear", "--session", session)["texts"] == 0
    run("undo", "--session", session)
    drawing = run("get-drawing", "--session", session)
    assert [(t["x"], t["y"], t["color"]) for t in drawing["texts"]] == [(-8, -8, "#FF0000")] and drawing["strokes"] == []
    refused = canvasctl("edit-text", "--session", session, "--index", "0", cwd=tmp_path, env=env)
    assert refused.returncode == 64 and "give at least one of" in refused.stderr
