"""CurveZMQ keys for canvasd: the files ``canvasctl keygen`` writes, read and written here too.

A key file has ``public-key = "…"`` and ``secret-key = "…"`` lines (the layout of CZMQ's
certificates, so keys from other ZeroMQ tools work as they are); a line of just 40 Z85
characters is a public key.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import List, Optional, Tuple, Union

import zmq
import zmq.utils.z85

PathLike = Union[str, "os.PathLike[str]"]
_ASSIGNMENT = re.compile(r'^\s*(public-key|secret-key)\s*=\s*"?([^"]*)"?\s*$')


@dataclass(frozen=True)
class CurveKeys:
    """What a client needs for a server with CurveZMQ: the server's public key and its own pair,
    all as 40-character Z85 text."""

    server_public: bytes
    public: bytes
    secret: bytes

    @classmethod
    def from_files(cls, server_public: PathLike, client_pair: PathLike) -> "CurveKeys":
        """The server's ``.pub`` file and the client's ``.key`` file."""
        public, secret = load_pair(client_pair)
        return cls(load_public(server_public), public, secret)

    def apply(self, socket: zmq.Socket) -> None:
        """Makes ``socket`` a CurveZMQ client of the server; call before ``connect``."""
        socket.curve_serverkey = self.server_public
        socket.curve_publickey = self.public
        socket.curve_secretkey = self.secret


def _read(path: PathLike) -> Tuple[List[bytes], List[bytes]]:
    publics: List[bytes] = []
    secrets: List[bytes] = []
    for number, line in enumerate(Path(path).read_text(encoding="utf-8").splitlines(), 1):
        stripped = line.strip()
        # '#' and '=' are Z85 characters: a 40-character line that decodes is a key, whatever
        # it looks like.
        if _is_key(stripped):
            publics.append(stripped.encode("ascii"))
            continue
        if not stripped or stripped.startswith("#"):
            continue
        match = _ASSIGNMENT.match(stripped)
        if match:
            key = match.group(2).encode("ascii")
            if len(key) != 40:
                raise ValueError(f"{path}:{number}: {match.group(1)} is not 40 Z85 characters")
            (publics if match.group(1) == "public-key" else secrets).append(key)
    return publics, secrets


def _is_key(text: str) -> bool:
    if len(text) != 40:
        return False
    try:
        return len(zmq.utils.z85.decode(text.encode("ascii"))) == 32
    except Exception:  # not Z85: bad characters, or groups too large for 32 bits
        return False


def load_public(path: PathLike) -> bytes:
    """The first public key of a key file."""
    publics, secrets = _read(path)
    if publics:
        return publics[0]
    if secrets:
        return zmq.curve_public(secrets[0])
    raise ValueError(f"{path}: no public-key line")


def load_pair(path: PathLike) -> Tuple[bytes, bytes]:
    """(public, secret) of a secret key file; the public half is derived from the secret one."""
    _, secrets = _read(path)
    if not secrets:
        raise ValueError(f"{path}: no secret-key line (is it a .pub file?)")
    return zmq.curve_public(secrets[0]), secrets[0]


def generate(name: PathLike) -> bytes:
    """Writes NAME.key (mode 600) and NAME.pub as ``canvasctl keygen`` does; returns the public key."""
    public, secret = zmq.curve_keypair()
    base = str(name)
    descriptor = os.open(base + ".key", os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(descriptor, "w", encoding="utf-8") as out:
        out.write("# canvas bridge CurveZMQ key pair. Keep this file secret.\ncurve\n"
                  f'    public-key = "{public.decode()}"\n    secret-key = "{secret.decode()}"\n')
    Path(base + ".pub").write_text(f'# canvas bridge CurveZMQ public key.\ncurve\n    public-key = "{public.decode()}"\n',
                                   encoding="utf-8")
    return public
