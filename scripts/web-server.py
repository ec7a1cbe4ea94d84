#!/usr/bin/env python3
"""Serves the web client and its demo on loopback: clients/web at /, Debian's pdf.js (libjs-pdf)
at /pdfjs/, and /config.json naming canvasd's ws:// endpoints, so the demo page knows where to
connect. `make run` starts it beside canvasd; the browser tests start it too."""

from __future__ import annotations

import argparse
import json
import sys
from functools import partial
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

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


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--port", type=int, default=8580)
    parser.add_argument("--web-endpoint", default="ws://127.0.0.1:5580")
    parser.add_argument("--web-events", default="ws://127.0.0.1:5581")
    parser.add_argument("--token", default=None, help="an access token for the demo page, when canvasd has --web-tokens")
    args = parser.parse_args()
    if not (PDFJS / "pdf.js").exists():
        print(f"no pdf.js at {PDFJS}: install libjs-pdf (make system-deps does)", file=sys.stderr)
        return 1
    config = {"url": args.web_endpoint, "events": args.web_events}
    if args.token:
        config["token"] = args.token
    Handler.config = json.dumps(config).encode()
    Handler.extensions_map = {**Handler.extensions_map, ".js": "text/javascript", ".mjs": "text/javascript"}
    server = ThreadingHTTPServer(("127.0.0.1", args.port), partial(Handler, directory=str(WEB)))
    print(f"demo page: http://127.0.0.1:{server.server_address[1]}/demo/", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
