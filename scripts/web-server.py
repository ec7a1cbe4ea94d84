#!/usr/bin/env python3
"""Serves the web client and its demo on loopback: clients/web at /, Debian's pdf.js (libjs-pdf)
at /pdfjs/, and /config.json naming canvasd's ws:// endpoints, so the demo page knows where to
connect. The browser tests start it alone.

`make run` gives it canvasd's command line after `--`: it then checks that every port is free,
binds its own, starts canvasd, and lives exactly as long as canvasd does, so neither is left
running behind the other's dead address. Every port in use is named at once, each with the make
variable that moves it, and nothing starts."""

from __future__ import annotations

import argparse
import ctypes
import errno
import json
import signal
import socket
import subprocess
import sys
import threading
from functools import partial
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import List, NamedTuple, Optional, Tuple
from urllib.parse import urlsplit

ROOT = Path(__file__).resolve().parents[1]
WEB = ROOT / "clients" / "web"
PDFJS = Path("/usr/share/javascript/pdf/build")


class Handler(SimpleHTTPRequestHandler):
    config: bytes = b"{}"

    def translate_path(self, path: str) -> str:
        clean = path.split("?", 1)[0].split("#", 1)[0]
        if clean.startswith("/pdfjs/"):
            # Only the files of the build folder, never a path out of it.
            name = Path(clean[len("/pdfjs/"):]).name
            return str(PDFJS / name)
        return super().translate_path(path)

    def do_GET(self) -> None:
        if self.path.split("?", 1)[0] == "/config.json":
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Cache-Control", "no-store")
            self.send_header("Content-Length", str(len(self.config)))
            self.end_headers()
            self.wfile.write(self.config)
            return
        super().do_GET()

    def end_headers(self) -> None:
        self.send_header("Cache-Control", "no-store")
        super().end_headers()

    def log_message(self, format: str, *args) -> None:  # noqa: A002 - the base class's name
        pass   # quiet: canvasd's log is the one to read


# canvasd's options that listen, and the make variable that sets each (canvasctl reads
# CANVAS_ENDPOINT and CANVAS_EVENTS from the environment too).
VARIABLES = {"--endpoint": "CANVAS_ENDPOINT", "--events": "CANVAS_EVENTS", "--web-endpoint": "WEB_ENDPOINT",
             "--web-events": "WEB_EVENTS"}


class Port(NamedTuple):
    what: str
    host: str
    port: int
    variable: str
    moved: str   # the variable's value; in a message, with the port moved


# The command and variable that move the demo page's port: `make run`'s, unless the caller
# (make cluster) says its own.
MOVED_BY = "make run"


def in_use(port: Port, cause: str) -> str:
    return (f"{port.what}: port {port.port} is in use ({cause}). Stop what holds it (`ss -ltnp 'sport = :{port.port}'` "
            f"shows it), or move it: {MOVED_BY} {port.variable}={port.moved}")


def all_in_use(clashes: List[Tuple[Port, str]]) -> str:
    """One message for every port in use ((port, cause)): each named, then one command that
    moves them all."""
    if len(clashes) == 1:
        return in_use(*clashes[0])
    lines = [f"{len(clashes)} ports are in use; nothing was started:"]
    lines += [f"  {port.what}: port {port.port} is in use ({cause})" for port, cause in clashes]
    holders = " or ".join(f"sport = :{port.port}" for port, _ in clashes)
    moves = " ".join(f"{port.variable}={port.moved}" for port, _ in clashes)
    lines.append(f"Stop what holds them (`ss -ltnp '{holders}'` shows it), or move them: {MOVED_BY} {moves}")
    return "\n".join(lines)


def bind_error(host: str, port: int) -> Optional[str]:
    """Why `port` cannot be bound now (bound as libzmq and the demo's server bind it, with
    SO_REUSEADDR, then let go), or None when it can."""
    probe = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET)
    probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        probe.bind((host, port))
    except OSError as error:
        return f"{error.strerror}, errno {error.errno}"
    finally:
        probe.close()
    return None


def free_instead(port: int, host: str, wanted: set) -> int:
    """A port to suggest in place of a busy one: 100 on, 200 on..., the first free one that is
    not itself wanted."""
    candidate = port + 100
    while candidate < 65536 and (candidate in wanted or bind_error(host, candidate)):
        candidate += 100
    return candidate if candidate < 65536 else port + 100


def moved_to(value: str, port: int, other: int) -> str:
    """`value` (an endpoint, or a bare port as DEMO_PORT's) with `other` for `port`."""
    return str(other) if value == str(port) else value.replace(f":{port}", f":{other}", 1)


def listening_ports(canvasd: List[str]) -> List[Port]:
    """The tcp:// and ws:// ports canvasd's command line listens on."""
    found = []
    for option, value in zip(canvasd, canvasd[1:]):
        address = urlsplit(value)
        if option in VARIABLES and address.scheme in ("tcp", "ws") and address.port:
            found.append(Port(f"canvasd {option} {value}", address.hostname or "127.0.0.1", address.port,
                              VARIABLES[option], value))
    return found


def every_taken(ports: List[Port]) -> Optional[str]:
    """Every clash found before anything starts, in one message, or None. canvasd still names
    any clash that comes after this check."""
    clashes = [(port, cause) for port in ports for cause in [bind_error(port.host, port.port)] if cause]
    if not clashes:
        return None
    wanted = {port.port for port in ports}
    moved = []
    for port, cause in clashes:
        other = free_instead(port.port, port.host, wanted)
        wanted.add(other)
        moved.append((port._replace(moved=moved_to(port.moved, port.port, other)), cause))
    return all_in_use(moved)


def stop_with_parent() -> None:
    """Run in canvasd's child before exec: if this script dies, even by SIGKILL, so does canvasd."""
    PR_SET_PDEATHSIG = 1
    ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGTERM)


def supervise(server: ThreadingHTTPServer, canvasd: List[str]) -> int:
    """Serves the demo page while canvasd runs; returns canvasd's exit status."""
    child = subprocess.Popen(canvasd, preexec_fn=stop_with_parent)
    threading.Thread(target=server.serve_forever, daemon=True).start()

    def forward(signum, _frame) -> None:
        if child.poll() is None:
            child.send_signal(signum)

    # Ctrl-C reaches canvasd from the terminal too; a TERM for this script is passed on.
    signal.signal(signal.SIGINT, forward)
    signal.signal(signal.SIGTERM, forward)
    status = child.wait()
    server.shutdown()
    server.server_close()
    if status < 0:
        print(f"canvasd was stopped by signal {-status}; the demo page is stopped too", file=sys.stderr, flush=True)
        return 128 - status   # as a shell reports a process a signal ended
    if status != 0:
        print(f"canvasd exited with status {status}; the demo page is stopped too", file=sys.stderr, flush=True)
    return status


def main() -> int:
    arguments = sys.argv[1:]
    canvasd = arguments[arguments.index("--") + 1:] if "--" in arguments else []
    own = arguments[:arguments.index("--")] if "--" in arguments else arguments
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--port", type=int, default=8580)
    parser.add_argument("--web-endpoint", default="ws://127.0.0.1:5580")
    parser.add_argument("--web-events", default="ws://127.0.0.1:5581")
    parser.add_argument("--token", default=None, help="an access token for the demo page, when canvasd has --web-tokens")
    parser.add_argument("--moved-by", default=None,
                        help="what moves the demo page's port, for the message when it is taken (default: make run DEMO_PORT)")
    args = parser.parse_args(own)
    demo_variable = "DEMO_PORT"
    if args.moved_by:
        global MOVED_BY
        MOVED_BY, _, demo_variable = args.moved_by.rpartition(" ")
    if not (PDFJS / "pdf.js").exists():
        print(f"no pdf.js at {PDFJS}: install libjs-pdf (make system-deps does)", file=sys.stderr)
        return 1
    # With canvasd (make run), the demo page's port is checked with canvasd's, so that every
    # port in use is named in one message.
    demo_port = Port("the demo page", "127.0.0.1", args.port, demo_variable, str(args.port))
    clash = every_taken(listening_ports(canvasd) + ([demo_port] if args.port else [])) if canvasd else None
    if clash:
        print(clash, file=sys.stderr)
        return 2
    config = {"url": args.web_endpoint, "events": args.web_events}
    if args.token:
        config["token"] = args.token
    Handler.config = json.dumps(config).encode()
    Handler.extensions_map = {**Handler.extensions_map, ".js": "text/javascript", ".mjs": "text/javascript"}
    try:
        server = ThreadingHTTPServer(("127.0.0.1", args.port), partial(Handler, directory=str(WEB)))
    except OSError as error:
        if error.errno != errno.EADDRINUSE:
            raise
        demo = Port("the demo page", "127.0.0.1", args.port, demo_variable, str(args.port + 100))
        print(in_use(demo, f"{error.strerror}, errno {error.errno}"), file=sys.stderr)
        return 2
    print(f"demo page: http://127.0.0.1:{server.server_address[1]}/demo/", flush=True)
    if canvasd:
        options = dict(zip(canvasd, canvasd[1:]))
        if "--endpoint" in options:
            print(f"canvasd: requests {options['--endpoint']}, events {options.get('--events', '-')} "
                  f"(canvasctl reads CANVAS_ENDPOINT and CANVAS_EVENTS)", flush=True)
        return supervise(server, canvasd)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
