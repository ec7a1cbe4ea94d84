"""wss:// served by canvasd itself (--web-tls-cert, --web-tls-key), for a deployment without a
proxy: a Python WebSocket client that verifies the certificate made for the test, a certificate
replaced and read again on SIGHUP (new connections get the new one, open ones carry on), plain
ws:// refused on a wss:// port, and Chromium's own WebSocket through the JavaScript client."""

from __future__ import annotations

import hashlib
import signal
import socket
import ssl
import subprocess
import time
from pathlib import Path

import pytest

from conftest import Server
from test_hostile_web import ALICE
from web import chromium, free_port, run_js, start_demo_server
from zws import ZWSPeer


def make_certificate(folder: Path, name: str) -> tuple:
    """A self-signed certificate for 127.0.0.1 and its key, made with the openssl command."""
    certificate, key = folder / f"{name}.pem", folder / f"{name}.key"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
                    "-keyout", str(key), "-out", str(certificate), "-days", "2", "-subj", f"/CN={name}",
                    "-addext", "subjectAltName=IP:127.0.0.1"], check=True, capture_output=True)
    return certificate, key


class TLSPeer(ZWSPeer):
    """A ZWS 2.0 peer over TLS that trusts `certificate` alone."""

    def __init__(self, port: int, certificate: Path) -> None:
        super().__init__(port)
        context = ssl.create_default_context(cafile=str(certificate))
        self.sock = context.wrap_socket(self.sock, server_hostname="127.0.0.1")

    def fingerprint(self) -> str:
        return hashlib.sha256(self.sock.getpeercert(binary_form=True)).hexdigest()


@pytest.fixture
def tls_server(tmp_path: Path):
    certificate, key = make_certificate(tmp_path, "first")
    tokens = tmp_path / "tokens"
    tokens.write_text(f"{ALICE}\n")
    port, events = free_port(), free_port()
    server = Server(tmp_path, ["--web-endpoint", f"wss://127.0.0.1:{port}", "--web-events", f"wss://127.0.0.1:{events}",
                               "--web-tls-cert", str(certificate), "--web-tls-key", str(key), "--web-tokens", str(tokens)])
    server.ports = (port, events)
    server.certificate, server.key = certificate, key
    yield server
    server.stop()


def test_a_python_client_is_served_over_wss_and_a_new_certificate_is_read_on_sighup(tls_server, tmp_path: Path):
    port, events_port = tls_server.ports
    peer = TLSPeer(port, tls_server.certificate).handshake()
    first = peer.fingerprint()
    opened = peer.request({"id": 1, "method": "session.open", "params": {"transitions": "instant"}, "token": ALICE})
    session = opened["result"]["session"]
    subscriber = TLSPeer(events_port, tls_server.certificate).handshake()
    subscriber.send_frames([b"\x01" + f"{ALICE}\n{session}.".encode()])
    time.sleep(0.2)
    assert "result" in peer.request({"id": 2, "method": "canvas.open", "session": session, "token": ALICE})
    topic, body = subscriber.receive_frames()
    assert topic == f"{session}.canvas.stateChanged".encode()

    # A new certificate in place of the old, and SIGHUP: new connections get it.
    second_certificate, second_key = make_certificate(tmp_path, "second")
    tls_server.certificate.write_bytes(second_certificate.read_bytes())
    tls_server.key.write_bytes(second_key.read_bytes())
    tls_server.process.send_signal(signal.SIGHUP)
    deadline = time.monotonic() + 5
    while True:
        renewed = TLSPeer(port, tls_server.certificate).handshake() if _trusts(port, tls_server.certificate) else None
        if renewed is not None:
            break
        assert time.monotonic() < deadline, "the new certificate was not served after SIGHUP"
        time.sleep(0.1)
    assert renewed.fingerprint() != first
    assert "result" in renewed.request({"id": 3, "method": "hello", "token": ALICE})
    # The connection made before goes on, under the certificate it began with.
    assert "result" in peer.request({"id": 4, "method": "canvas.state", "session": session, "token": ALICE})

    # A certificate file that does not parse is refused, and the one in use stays.
    tls_server.certificate.write_text("not a certificate\n")
    tls_server.process.send_signal(signal.SIGHUP)
    time.sleep(0.5)
    assert tls_server.process.poll() is None
    tls_server.certificate.write_bytes(second_certificate.read_bytes())
    assert "result" in TLSPeer(port, tls_server.certificate).handshake().request({"id": 5, "method": "hello", "token": ALICE})


def _trusts(port: int, certificate: Path) -> bool:
    try:
        TLSPeer(port, certificate).close()
        return True
    except ssl.SSLError:
        return False


def test_plain_ws_on_a_wss_port_gets_no_upgrade(tls_server):
    port, _ = tls_server.ports
    plain = ZWSPeer(port)
    plain.sock.sendall(plain.upgrade_request())
    plain.sock.settimeout(5)
    try:
        answer = plain.sock.recv(4096)
    except (ConnectionError, OSError):
        answer = b""
    assert not answer.startswith(b"HTTP/1.1 101")


def test_chromium_connects_over_wss(tls_server, tmp_path: Path):
    port, events_port = tls_server.ports
    http_port = free_port()
    demo = start_demo_server(http_port, f"wss://127.0.0.1:{port}", f"wss://127.0.0.1:{events_port}", ALICE)
    browser = chromium(extra=("--ignore-certificate-errors",))
    try:
        browser.get(f"http://127.0.0.1:{http_port}/harness.html")
        outcome = run_js(browser, """
          const Canvas = await bridge.connect({url: args.url, events: args.events, token: args.token, timeoutMs: 20000});
          await Canvas.open();
          const seen = [];
          await Canvas.addListener('stateChanged', (event) => seen.push(event.to));
          await Canvas.minimize();
          for (let i = 0; i < 100 && !seen.includes('minimized'); i++) await new Promise((r) => setTimeout(r, 50));
          const state = await Canvas.state();
          await Canvas.close();
          return {state: state.state, seen};
        """, url=f"wss://127.0.0.1:{port}", events=f"wss://127.0.0.1:{events_port}", token=ALICE)
        assert outcome["state"] == "minimized" and "minimized" in outcome["seen"], outcome
    finally:
        browser.quit()
        demo.terminate()
        demo.wait(timeout=5)
