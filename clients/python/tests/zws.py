"""A bare ZWS 2.0 peer (ZeroMQ over WebSocket, RFC 45) on a plain socket, for tests that must
send what no well-behaved client sends: frames in any order, half an upgrade, nothing at all.

One ZMTP frame is one binary WebSocket message whose first byte is the flags (0x01: more
frames follow, 0x02: a command); the client masks what it sends. With ZWS2.0 each side's
first message is its routing id."""

from __future__ import annotations

import base64
import json
import os
import socket
import struct
import time
from typing import List, Optional


class ZWSPeer:
    def __init__(self, port: int, host: str = "127.0.0.1", timeout: float = 5.0, source: Optional[str] = None) -> None:
        # `source`: the local address to connect from (127.0.0.N on loopback is another peer address).
        self.sock = socket.create_connection((host, port), timeout=timeout,
                                             source_address=(source, 0) if source else None)
        self.buffer = b""

    # The upgrade

    def upgrade_request(self) -> bytes:
        key = base64.b64encode(os.urandom(16)).decode()
        return (f"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                f"Sec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n"
                f"Sec-WebSocket-Protocol: ZWS2.0\r\n\r\n").encode()

    def handshake(self) -> "ZWSPeer":
        self.sock.sendall(self.upgrade_request())
        while b"\r\n\r\n" not in self.buffer:
            chunk = self.sock.recv(4096)
            if not chunk:
                raise ConnectionError("closed during the upgrade")
            self.buffer += chunk
        head, self.buffer = self.buffer.split(b"\r\n\r\n", 1)
        if not head.startswith(b"HTTP/1.1 101"):
            raise ConnectionError(f"upgrade refused: {head[:80]!r}")
        self.send_message(b"\x00")   # our routing id: empty
        self.receive_message()        # the server's routing id
        return self

    # Messages

    def send_message(self, payload: bytes) -> None:
        mask = os.urandom(4)
        header = bytes([0x82])
        if len(payload) < 126:
            header += bytes([0x80 | len(payload)])
        elif len(payload) < 65536:
            header += bytes([0x80 | 126]) + struct.pack(">H", len(payload))
        else:
            header += bytes([0x80 | 127]) + struct.pack(">Q", len(payload))
        masked = bytes(b ^ mask[i % 4] for i, b in enumerate(payload))
        self.sock.sendall(header + mask + masked)

    def send_raw(self, opcode: int, payload: bytes, fin: bool = True, length: Optional[int] = None) -> None:
        """One WebSocket frame of any opcode (0x1 text, 0x2 binary, 0x0 continuation, 0x9 ping),
        masked; `length` other than the payload's sends a header promising more than comes."""
        mask = os.urandom(4)
        size = len(payload) if length is None else length
        header = bytes([(0x80 if fin else 0) | opcode])
        if size < 126:
            header += bytes([0x80 | size])
        elif size < 65536:
            header += bytes([0x80 | 126]) + struct.pack(">H", size)
        else:
            header += bytes([0x80 | 127]) + struct.pack(">Q", size)
        self.sock.sendall(header + mask + bytes(b ^ mask[i % 4] for i, b in enumerate(payload)))

    def send_fragmented(self, payload: bytes, parts: int) -> None:
        """One binary message in `parts` WebSocket fragments, as a browser sends a large one."""
        step = -(-len(payload) // parts)
        chunks = [payload[i:i + step] for i in range(0, len(payload), step)]
        for index, chunk in enumerate(chunks):
            self.send_raw(0x2 if index == 0 else 0x0, chunk, fin=index == len(chunks) - 1)

    def close_code(self, seconds: float = 5.0) -> Optional[int]:
        """Reads until the server's close frame and returns its code (None: the connection ended
        without one, or nothing came in time)."""
        self.sock.settimeout(seconds)
        try:
            while True:
                opcode, payload = self._read_frame()
                if opcode == 0x8:
                    return struct.unpack(">H", payload[:2])[0] if len(payload) >= 2 else None
        except (ConnectionError, OSError):
            return None

    def send_frames(self, frames: List[bytes]) -> None:
        for index, frame in enumerate(frames):
            more = 0x01 if index < len(frames) - 1 else 0x00
            self.send_message(bytes([more]) + frame)

    def request(self, message: dict, extra_first: Optional[List[bytes]] = None) -> dict:
        """Sends a request (after `extra_first` frames, if any) and returns the reply."""
        self.send_frames(list(extra_first or []) + [json.dumps(message).encode()])
        return json.loads(self.receive_frames()[-1])

    def _read(self, count: int) -> bytes:
        while len(self.buffer) < count:
            chunk = self.sock.recv(65536)
            if not chunk:
                raise ConnectionError("closed")
            self.buffer += chunk
        data, self.buffer = self.buffer[:count], self.buffer[count:]
        return data

    def _read_frame(self) -> tuple:
        """One WebSocket frame from the server (unmasked): its opcode and payload."""
        first, second = self._read(2)
        length = second & 0x7F
        if length == 126:
            length = struct.unpack(">H", self._read(2))[0]
        elif length == 127:
            length = struct.unpack(">Q", self._read(8))[0]
        return first & 0x0F, self._read(length)

    def receive_message(self) -> bytes:
        opcode, payload = self._read_frame()
        if opcode == 0x8:
            raise ConnectionError("closed by the server")
        return payload

    def receive_frames(self) -> List[bytes]:
        frames = []
        while True:
            message = self.receive_message()
            frames.append(message[1:])
            if not message or not message[0] & 0x01:
                return frames

    def closed_within(self, seconds: float) -> bool:
        """Whether the server ends the connection within `seconds` (reading whatever comes)."""
        self.sock.settimeout(seconds)
        deadline = time.monotonic() + seconds
        try:
            while True:
                self.sock.settimeout(max(0.01, deadline - time.monotonic()))
                if not self.sock.recv(65536):
                    return True
        except socket.timeout:   # an OSError too: caught first
            return False
        except OSError:
            return True

    def close(self) -> None:
        self.sock.close()
