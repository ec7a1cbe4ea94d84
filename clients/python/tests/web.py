"""What the browser tests share: canvasd with ws:// endpoints, the demo's web server, and a
headless Chromium driven by selenium (Debian's chromium-headless-shell and chromedriver, so
Selenium Manager downloads nothing)."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import List, Optional, Sequence

import pytest

from conftest import ROOT, Server

sys.path.insert(0, str(ROOT / "scripts"))
# One free_port for every test, so that no two servers of a run are handed the same port.
from cluster import free_port, wait_for_port  # noqa: E402,F401

CHROMEDRIVER = Path("/usr/bin/chromedriver")
CHROMIUM = Path("/usr/lib/chromium/chromium-headless-shell")


def start_demo_server(port: int, url: str, events: str, token: Optional[str] = None) -> subprocess.Popen:
    """scripts/web-server.py on `port`, serving the demo, the harness and the client for a
    canvasd (or HAProxy) at `url` and `events`; returns once it says it is serving."""
    http = subprocess.Popen(
        [sys.executable, str(ROOT / "scripts" / "web-server.py"), "--port", str(port),
         "--web-endpoint", url, "--web-events", events] + (["--token", token] if token else []),
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    line = http.stdout.readline()
    if "demo page" not in line:
        http.terminate()
        http.wait(timeout=5)
        raise RuntimeError(f"web server did not start: {line}")
    return http


class WebServer:
    """canvasd (ipc:// for the Python client, ws:// for the page) and the static web server."""

    def __init__(self, folder: Path, extra: List[str] = (), token: Optional[str] = None,
                 ports: Optional[tuple] = None):
        self.folder = folder
        self.ws_port, self.events_port, self.http_port = ports or (free_port(), free_port(), free_port())
        self.url = f"ws://127.0.0.1:{self.ws_port}"
        self.events = f"ws://127.0.0.1:{self.events_port}"
        self.extra = list(extra)
        self.token = token
        self.canvasd = self.start_canvasd()
        self.http = start_demo_server(self.http_port, self.url, self.events, token)
        self.base = f"http://127.0.0.1:{self.http_port}"

    def start_canvasd(self) -> Server:
        return Server(self.folder, ["--web-endpoint", f"{self.url}", "--web-events", f"{self.events}", *self.extra])

    def restart_canvasd(self, pause: float = 0.0) -> None:
        self.canvasd.stop()
        time.sleep(pause)
        self.canvasd = self.start_canvasd()

    def stop(self) -> None:
        self.canvasd.stop()
        self.http.terminate()
        self.http.wait(timeout=5)


def chromium(extra: Sequence[str] = ()):
    """A headless Chromium, or a skip naming what is missing."""
    try:
        from selenium import webdriver
        from selenium.webdriver.chrome.service import Service
    except ImportError:
        pytest.skip("selenium is not installed (make python-deps installs it)")
    if not CHROMEDRIVER.exists() or not CHROMIUM.exists():
        pytest.skip("no chromium-headless-shell or chromium-driver (make system-deps installs them)")
    options = webdriver.ChromeOptions()
    options.binary_location = str(CHROMIUM)
    for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--window-size=1400,1400", *extra):
        options.add_argument(flag)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(service=Service(executable_path=str(CHROMEDRIVER)), options=options)
    driver.set_script_timeout(60)
    return driver


def wait_for(driver, expression: str, timeout: float = 10.0):
    """Waits until the page's JavaScript `expression` is truthy, and returns its value."""
    deadline = time.monotonic() + timeout
    while True:
        value = driver.execute_script(f"return ({expression});")
        if value:
            return value
        if time.monotonic() > deadline:
            logs = "\n".join(str(entry) for entry in driver.get_log("browser"))
            raise AssertionError(f"the page never had {expression}; its log:\n{logs}")
        time.sleep(0.05)


def run_js(driver, body: str, **arguments):
    """Runs `body` (the inside of an async function with `bridge`, the imported client module,
    and `args` in scope) in the page and returns what it returns; a thrown error fails the
    test with the error's code, message and data."""
    script = """
const done = arguments[arguments.length - 1];
const args = JSON.parse(arguments[0]);
import('/canvas-bridge.js').then(async (bridge) => {
  try {
    const value = await (async () => { %s })();
    done({ok: true, value: value === undefined ? null : value});
  } catch (error) {
    done({ok: false, error: {name: error.name, code: error.code, message: error.message, data: error.data ?? null}});
  }
});
""" % body
    outcome = driver.execute_async_script(script, json.dumps(arguments))
    if not outcome["ok"]:
        raise AssertionError(f"in the page: {outcome['error']}")
    return outcome["value"]


def established(port: int) -> int:
    """How many TCP connections are established to local `port` (canvasd's side of them),
    as `ss` sees them."""
    out = subprocess.run(["ss", "-tnH", "state", "established", f"( sport = :{port} )"],
                         capture_output=True, text=True, check=True).stdout
    return sum(1 for line in out.splitlines() if line.strip())


def wait_for_count(port: int, want: int, within: float) -> int:
    """Polls `established(port)` until it is `want` or `within` seconds passed; returns the last count."""
    deadline = time.monotonic() + within
    while True:
        count = established(port)
        if count == want or time.monotonic() > deadline:
            return count
        time.sleep(0.05)


class CuttableProxy:
    """A loopback TCP relay to `target_port` whose connections the test can cut at any moment
    (`cut()`), as a network that drops them would: the browser sees its WebSocket end and
    reconnects through the proxy again."""

    def __init__(self, target_port: int):
        import threading
        self.target_port = target_port
        self.listener = socket.socket()
        self.listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.listener.bind(("127.0.0.1", 0))
        self.listener.listen(64)
        self.port = self.listener.getsockname()[1]
        self.url = f"ws://127.0.0.1:{self.port}"
        self.lock = threading.Lock()
        self.pairs: List[tuple] = []
        self.accepted = 0
        self.running = True
        self.thread = threading.Thread(target=self._accept, daemon=True)
        self.thread.start()

    def _accept(self) -> None:
        import threading
        while self.running:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            try:
                server = socket.create_connection(("127.0.0.1", self.target_port))
            except OSError:
                client.close()
                continue
            with self.lock:
                self.pairs.append((client, server))
                self.accepted += 1
            for source, sink in ((client, server), (server, client)):
                threading.Thread(target=self._relay, args=(source, sink), daemon=True).start()

    @staticmethod
    def _relay(source: socket.socket, sink: socket.socket) -> None:
        try:
            while True:
                data = source.recv(65536)
                if not data:
                    break
                sink.sendall(data)
        except OSError:
            pass
        for end in (source, sink):
            try:
                end.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def cut(self) -> int:
        """Drops every connection now; returns how many there were."""
        with self.lock:
            pairs, self.pairs = self.pairs, []
        for pair in pairs:
            for end in pair:
                try:
                    end.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
                end.close()
        return len(pairs)

    def close(self) -> None:
        self.running = False
        self.listener.close()
        self.cut()
