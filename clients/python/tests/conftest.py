"""Fixtures that start a real canvasd on ipc:// endpoints in a fresh folder."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Iterator, List, Optional

import pytest

sys.path.insert(0, str(Path(__file__).parent))

import conformance  # noqa: E402
from canvasbridge import CanvasClient, CanvasTimeout, CurveKeys  # noqa: E402

# Every reply, event and params the suites see is checked against protocol/schemas.
conformance.install()


def pytest_terminal_summary(terminalreporter) -> None:
    checked = ", ".join(f"{count} {what}" for what, count in conformance.counts.items())
    terminalreporter.write_line(f"schema conformance: checked {checked}")

ROOT = Path(__file__).resolve().parents[3]
# pdf.js's test PDFs, kept in the repository (see its README.md).
CORPUS = ROOT / "Tests" / "Fixtures" / "pdfjs"


def canvasd_path() -> Path:
    """$CANVASD, or the debug build beside the package."""
    if "CANVASD" in os.environ:
        return Path(os.environ["CANVASD"])
    return ROOT / ".build" / "debug" / "canvasd"


class Server:
    """One canvasd process; ``stop()`` sends SIGTERM and returns the exit status."""

    def __init__(self, folder: Path, arguments: List[str] = (), *, curve: Optional[CurveKeys] = None,
                 documents: Optional[Path] = None):
        """``curve``: keys of an allowed client, for a server started with CurveZMQ options;
        ``documents``: the document folder, if not ``folder/documents``."""
        self.folder = folder
        self.curve = curve
        self.endpoint = f"ipc://{folder}/requests"
        self.events = f"ipc://{folder}/events"
        self.documents = documents or folder / "documents"
        folder.mkdir(parents=True, exist_ok=True)
        self.documents.mkdir(parents=True, exist_ok=True)
        self.log = folder / "canvasd.log"
        executable = canvasd_path()
        if not executable.exists():
            pytest.fail(f"no canvasd at {executable}: run `swift build` first (make test does)")
        with open(self.log, "wb") as log:
            self.process = subprocess.Popen(
                [str(executable), "--endpoint", self.endpoint, "--events", self.events,
                 "--documents", str(self.documents), *arguments],
                stdout=log, stderr=subprocess.STDOUT)
        self._wait_until_serving()

    def _wait_until_serving(self) -> None:
        with CanvasClient(self.endpoint, timeout=0.2, retries=0, curve=self.curve) as client:
            for _ in range(50):
                try:
                    client.hello()
                    return
                except CanvasTimeout:
                    if self.process.poll() is not None:
                        break
        raise RuntimeError(f"canvasd did not start:\n{self.log.read_text()}")

    def client(self, **kwargs) -> CanvasClient:
        return CanvasClient(self.endpoint, **kwargs)

    def stop(self) -> int:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        return self.process.returncode


@pytest.fixture
def server(tmp_path: Path) -> Iterator[Server]:
    running = Server(tmp_path)
    yield running
    running.stop()


@pytest.fixture
def store(tmp_path: Path):
    """A redis-server of the test's own on a free loopback port, nothing saved to disk: its URL
    for `--session-store`, and a redis-py client to look at what canvasd keeps there."""
    import redis
    from web import free_port, wait_for_port

    port = free_port()
    process = subprocess.Popen(["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", "",
                                "--appendonly", "no", "--dir", str(tmp_path)],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wait_for_port(port, process, "redis-server")
    client = redis.Redis(port=port)
    yield f"redis://127.0.0.1:{port}", client
    process.terminate()
    process.wait(timeout=5)


@pytest.fixture
def client(server: Server) -> Iterator[CanvasClient]:
    with server.client() as c:
        yield c


# The browser tests' two fixtures (test_web_*.py): imported from web.py when used, since web.py
# imports this module.
@pytest.fixture
def web(tmp_path: Path):
    """canvasd with ws:// endpoints and the demo's web server, samples/notes.pdf in its folder."""
    from web import WebServer
    server = WebServer(tmp_path)
    shutil.copy(ROOT / "samples" / "notes.pdf", server.canvasd.documents / "notes.pdf")
    yield server
    server.stop()


@pytest.fixture
def browser():
    """A headless Chromium driven by selenium, quit afterwards."""
    from web import chromium
    driver = chromium()
    yield driver
    driver.quit()
