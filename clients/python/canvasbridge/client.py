"""A blocking client for canvasd over ZeroMQ (protocol canvas/1).

One ``CanvasClient`` owns one DEALER socket; a ``Session`` wraps a session id with one method
per protocol method. A call that times out is sent again with the *same id*: the server
remembers its last replies per session, so a retry of a request that did run gets the first
reply back and runs nothing twice.
"""

from __future__ import annotations

import base64
import hashlib
import json
import random
import time
from dataclasses import dataclass
from typing import Any, Dict, Iterable, List, Optional, Sequence, Tuple, Union

import zmq

from .keys import CurveKeys

DEFAULT_ENDPOINT = "tcp://127.0.0.1:5555"
DEFAULT_EVENTS = "tcp://127.0.0.1:5556"

RequestID = Union[str, int]
JSON = Dict[str, Any]


class CanvasError(Exception):
    """An error reply: the protocol's ``code``, a ``message`` for people, ``data`` for programs."""

    def __init__(self, code: str, message: str, data: Optional[JSON] = None, method: str = ""):
        super().__init__(f"{method + ': ' if method else ''}{code}: {message}")
        self.code = code
        self.message = message
        self.data = data or {}
        self.method = method


class CanvasTimeout(TimeoutError):
    """No reply came in time, after every retry."""


class CanvasClient:
    """Calls canvasd methods one at a time. Not thread-safe: a socket belongs to one thread."""

    def __init__(
        self,
        endpoint: str = DEFAULT_ENDPOINT,
        *,
        timeout: float = 5.0,
        retries: int = 2,
        curve: Optional[CurveKeys] = None,
        context: Optional[zmq.Context] = None,
    ):
        """``curve``: the keys for a server that requires CurveZMQ (see ``CurveKeys.from_files``)."""
        self.endpoint = endpoint
        self.timeout = timeout
        self.retries = retries
        self._own_context = context is None
        self._context = context or zmq.Context()
        self._socket = self._context.socket(zmq.DEALER)
        self._socket.setsockopt(zmq.LINGER, 0)
        if curve is not None:
            curve.apply(self._socket)
        self._socket.connect(endpoint)
        # Ids start at a random point so two clients of one session do not look like retries
        # of each other's requests.
        self._next_id = random.randint(1, 1 << 40)
        self._limits: Optional[JSON] = None

    # -- plumbing ---------------------------------------------------------------------------

    def close(self) -> None:
        self._socket.close(0)
        if self._own_context:
            self._context.term()

    def __enter__(self) -> "CanvasClient":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def new_id(self) -> int:
        self._next_id += 1
        return self._next_id

    def exchange(self, frames: Sequence[bytes], *, timeout: Optional[float] = None) -> JSON:
        """Sends raw frames once and returns the next reply's JSON frame, parsed.

        For tests of malformed input: no retry, no id matching.
        """
        self._socket.send_multipart(list(frames))
        reply = self._receive(timeout if timeout is not None else self.timeout)
        if reply is None:
            raise CanvasTimeout(f"no reply from {self.endpoint} within {self.timeout}s")
        return reply

    def request(self, message: JSON, *, extra_frames: Iterable[bytes] = ()) -> JSON:
        """Sends a request object (its ``id`` set) and returns the whole reply object.

        Retries on timeout with the same id; replies to other ids (late answers to calls that
        had already timed out) are skipped.
        """
        frame = json.dumps(message, separators=(",", ":"), ensure_ascii=False).encode("utf-8")
        frames = [frame, *extra_frames]
        for _ in range(self.retries + 1):
            self._socket.send_multipart(frames)
            deadline = time.monotonic() + self.timeout
            while True:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    break
                reply = self._receive(remaining)
                if reply is None:
                    break
                if reply.get("id") == message["id"]:
                    return reply
        raise CanvasTimeout(
            f"{message.get('method')}: no reply from {self.endpoint} after {self.retries + 1} tries of {self.timeout}s"
        )

    def call(self, method: str, params: Optional[JSON] = None, *, session: Optional[str] = None,
             id: Optional[RequestID] = None, frames: Iterable[bytes] = ()) -> JSON:
        """Calls a method and returns its ``result``; an error reply raises ``CanvasError``.
        ``frames`` are binary frames sent after the JSON one (an upload's bytes)."""
        message: JSON = {"id": self.new_id() if id is None else id, "method": method, "params": params or {}}
        if session is not None:
            message["session"] = session
        reply = self.request(message, extra_frames=frames)
        if "result" in reply:
            return reply["result"]
        error = reply.get("error") or {}
        raise CanvasError(error.get("code", "?"), error.get("message", ""), error.get("data"), method)

    def _receive(self, timeout: float) -> Optional[JSON]:
        if not self._socket.poll(int(timeout * 1000)):
            return None
        frames = self._socket.recv_multipart()
        # A reply to a REQ-style request (one with an empty delimiter) keeps the delimiter.
        body = frames[1] if len(frames) > 1 and frames[0] == b"" else frames[0]
        return json.loads(body.decode("utf-8"))

    # -- methods without a session ------------------------------------------------------------

    def hello(self) -> JSON:
        result = self.call("hello")
        self._limits = result.get("limits") or {}
        return result

    def limits(self) -> JSON:
        """The server's ``hello`` limits, asked for once."""
        if self._limits is None:
            self.hello()
        return self._limits

    def get_document(self, name: str, *, revision: Optional[int] = None, piece: int = 4 << 20) -> Tuple[bytes, JSON]:
        """The bytes of the current revision of ``name``, or of ``revision`` (1 is the original),
        fetched in pieces and checked against the sha256 the server names. Returns the bytes and
        ``{name, revision, size, sha256}``."""
        data = bytearray()
        first: Optional[JSON] = None
        while first is None or len(data) < first["size"]:
            params: JSON = {"name": name, "offset": len(data), "length": piece}
            pinned = revision if revision is not None else (first["revision"] if first else None)
            if pinned is not None:
                params["revision"] = pinned
            result = self.call("document.get", params)
            first = first or result
            chunk = base64.b64decode(result["data"])
            if not chunk and len(data) < result["size"]:
                raise CanvasError("INTEGRITY", "an empty piece before the end", {"offset": len(data)}, "document.get")
            data += chunk
        digest = hashlib.sha256(data).hexdigest()
        if digest != first["sha256"]:
            raise CanvasError("INTEGRITY", f"the bytes hash to {digest}, not {first['sha256']}", None, "document.get")
        return bytes(data), {key: first[key] for key in ("name", "revision", "size", "sha256")}

    def upload_document(self, name: str, data: bytes, *, expected_revision: Optional[int] = None,
                        frame: int = 120 << 10) -> JSON:
        """Uploads ``data`` as a new document ``name`` or, with ``expected_revision``, as its next
        revision; the server checks it before storing it. Returns the document's summary."""
        params: JSON = {"name": name, "size": len(data), "sha256": hashlib.sha256(data).hexdigest()}
        if expected_revision is not None:
            params["expectedRevision"] = expected_revision
        begun = self.call("document.upload.begin", params)
        upload, offset = begun["upload"], begun["received"]
        try:
            while offset < len(data):
                part = data[offset:offset + begun["partBytes"]]
                frames = [part[at:at + frame] for at in range(0, len(part), frame)]
                offset = self.call("document.upload.part", {"upload": upload, "offset": offset}, frames=frames)["received"]
            return self.call("document.upload.commit", {"upload": upload})
        except Exception:
            try:
                self.call("document.upload.abort", {"upload": upload})
            except CanvasError:
                pass   # already gone (committed, refused or expired)
            raise

    def open_session(
        self,
        *,
        transitions: Union[str, int] = "instant",
        pencil_supported: bool = True,
        preferred_tap_action: str = "switchEraser",
        policy: str = "alwaysToggle",
        initialized: bool = True,
        result_images: bool = False,
        size: Optional[Sequence[int]] = None,
    ) -> "Session":
        """Opens a session. ``transitions`` is "instant", "manual" or a number of milliseconds."""
        params: JSON = {
            "pencil": {"supported": pencil_supported, "preferredTapAction": preferred_tap_action, "policy": policy},
            "transitions": {"ms": transitions} if isinstance(transitions, int) else transitions,
            "initialized": initialized,
            "resultImages": result_images,
        }
        if size is not None:
            params["size"] = {"width": size[0], "height": size[1]}
        result = self.call("session.open", params)
        return Session(self, result["session"], result)


class Session:
    """One canvas session: a method per protocol method, each returning the reply's result."""

    def __init__(self, client: CanvasClient, id: str, opened: Optional[JSON] = None):
        self.client = client
        self.id = id
        self.opened = opened or {}

    def call(self, method: str, params: Optional[JSON] = None, **kwargs: Any) -> JSON:
        return self.client.call(method, params, session=self.id, **kwargs)

    # session and canvas
    def close(self) -> JSON:
        return self.call("session.close")

    def initialize(self) -> JSON:
        return self.call("canvas.initialize")

    def state(self) -> JSON:
        return self.call("canvas.state")

    def open(self, *, document: Optional[str] = None, page: Optional[int] = None,
             size: Optional[Sequence[int]] = None, reopen: Union[bool, str] = False,
             ink_form: Optional[str] = None) -> JSON:
        """Opens the canvas, on ``page`` (from 0) of ``document`` when given.

        ``reopen=True`` (canvas/1.8; needs ``document``) opens a closed canvas with the page's
        canvas ink as its drawing, every stroke and text earlier saves put there, and the result
        has ``reopened``: {``edits``, ``strokes``, ``texts``}. A submit of that drawing then
        replaces the ink it was opened with instead of adding a second copy; ``CONFLICT`` with
        ``reason: "inkChanged"`` if that ink is no longer on the page. On an open or minimized
        canvas it is a plain open when the drawing was reopened from that page, else
        ``CONFLICT`` with ``reason: "notReopened"``. The param is sent only when true, so a
        plain open is the same request as before 1.8. ``reopen="all"`` loads other programs'
        /Ink annotations of the page too (``reopened`` then has ``otherInk``, how many), which
        the submit replaces with the drawing, carrying their author and dates. ``ink_form`` (canvas/1.8; needs
        ``document``): how the submit puts the ink on the page, ``"paper"`` (the default) or
        ``"annotations"``, standard /Ink and /FreeText annotations other PDF tools can edit."""
        params: JSON = {}
        if document is not None:
            params["document"] = document
        if page is not None:
            params["page"] = page
        if reopen:
            params["reopen"] = "all" if reopen == "all" else True
        if ink_form is not None:
            params["inkForm"] = ink_form
        if size is not None:
            params["size"] = {"width": size[0], "height": size[1]}
        return self.call("canvas.open", params)

    def minimize(self, *, image_data: bool = False) -> JSON:
        return self.call("canvas.minimize", {"imageData": image_data})

    def submit(self, *, image_data: bool = False) -> JSON:
        return self.call("canvas.submit", {"imageData": image_data})

    def cancel(self, *, image_data: bool = False) -> JSON:
        return self.call("canvas.cancel", {"imageData": image_data})

    def finish_transition(self) -> JSON:
        return self.call("canvas.finishTransition")

    # pencil
    def double_tap(self) -> JSON:
        return self.call("pencil.doubleTap")

    def configure_pencil(self, *, supported: bool = True, preferred_tap_action: str = "switchEraser",
                         policy: str = "alwaysToggle") -> JSON:
        return self.call("pencil.configure",
                         {"supported": supported, "preferredTapAction": preferred_tap_action, "policy": policy})

    # drawing
    def get_drawing(self) -> JSON:
        return self.call("drawing.get")

    def add_stroke(self, points: Sequence[Union[Sequence[float], JSON]], *, tool: str = "pen",
                   color: str = "black", width: float = 2.0) -> JSON:
        """Points are ``{"x", "y", "pressure"?}`` objects or ``(x, y)`` / ``(x, y, pressure)`` tuples.

        As the web client does (spec §1.2): a stroke of more points than the server's
        ``maxPointsPerStroke`` becomes several strokes (``split_stroke``), the ones after the
        first ``joined`` to its undo step, so one undo takes the whole stroke back; each goes in
        ``continued`` parts under ``maxMessageBytes``. All or nothing: when a piece is refused,
        what the stroke added is undone and, for a stroke that was split, the error's ``data``
        gets ``piece``, ``pieces`` and ``undone``. The result has ``pieces``."""
        limits = self.client.limits()
        pieces = split_stroke([_point(p) for p in points], limits.get("maxPointsPerStroke", 10_000))
        budget = limits.get("maxMessageBytes", 1 << 20) - _ENVELOPE_BYTES
        result: JSON = {}
        before = 0
        for index, piece in enumerate(pieces):
            style: JSON = {"tool": tool, "color": color, "width": width}
            if index > 0:
                style["joined"] = True
            try:
                result = self._send_stroke(style, piece, budget)
            except CanvasError as error:
                # The pieces already added are one undo step; a server that does not know
                # `joined` ignores it and made a step of each, so undo goes on until the
                # strokes are as many as before.
                undone, strokes = 0, result.get("strokes", before) if index > 0 else before
                while undone < index and strokes > before:
                    try:
                        strokes = self.undo()["strokes"]
                    except CanvasError:
                        break
                    undone += 1
                if len(pieces) > 1:
                    error.data = {**error.data, "piece": index, "pieces": len(pieces), "undone": undone}
                raise
            if index == 0:
                before = result["strokes"] - 1
        return {**result, "pieces": len(pieces)}

    def _send_stroke(self, style: JSON, points: List[JSON], budget: int) -> JSON:
        """One stroke within the server's point limit, in parts that each fit one request."""
        parts = frame_parts(points, budget)
        result: JSON = {}
        for index, part in enumerate(parts):
            params = {**style, "points": part}
            if index < len(parts) - 1:
                params["continued"] = True
            try:
                result = self.call("drawing.addStroke", params)
            except CanvasError:
                # A request that changes nothing drops any parts still waiting, so the next
                # stroke starts anew whatever the server keeps after a refusal.
                if index > 0:
                    try:
                        self.call("pencil.configure", {})
                    except CanvasError:
                        pass
                raise
        return result

    def add_text(self, text: str, x: float, y: float, *, font_size: float = 14, color: str = "black") -> JSON:
        return self.call("drawing.addText", {"text": text, "x": x, "y": y, "fontSize": font_size, "color": color})

    def edit_text(self, index: int, **changes: Any) -> JSON:
        """Moves (x, y), nudges (dx, dy), resizes (font_size), recolours (color) or rewrites
        (text) a placed text."""
        params: JSON = {"index": index}
        for key, value in changes.items():
            params["fontSize" if key == "font_size" else key] = value
        return self.call("drawing.editText", params)

    def move_text(self, index: int, x: float, y: float) -> JSON:
        return self.call("drawing.moveText", {"index": index, "x": x, "y": y})

    def erase(self, x: float, y: float, radius: float, *, mode: str = "stroke") -> JSON:
        return self.call("drawing.erase", {"x": x, "y": y, "radius": radius, "mode": mode})

    def undo(self) -> JSON:
        return self.call("drawing.undo")

    def redo(self) -> JSON:
        return self.call("drawing.redo")

    def clear(self) -> JSON:
        return self.call("drawing.clear")


# Room in a request for what surrounds a part's points (id, method, session, style).
_ENVELOPE_BYTES = 4096


def split_stroke(points: Sequence[JSON], max_points: int) -> List[List[JSON]]:
    """The strokes a stroke of ``points`` becomes: pieces of at most ``max_points`` points, each
    after the first starting at the point where the one before ended, so the line has no gap
    (the web client's ``splitStroke``)."""
    if len(points) <= max_points or max_points < 2:
        return [list(points)]
    return [list(points[start:start + max_points]) for start in range(0, len(points) - 1, max_points - 1)]


def frame_parts(points: Sequence[JSON], budget: int) -> List[List[JSON]]:
    """The ``continued`` parts of one stroke: runs of points whose JSON fits ``budget`` bytes."""
    parts: List[List[JSON]] = []
    part: List[JSON] = []
    size = 0
    for point in points:
        cost = len(json.dumps(point, separators=(",", ":"))) + 1
        if part and size + cost > budget:
            parts.append(part)
            part, size = [], 0
        part.append(point)
        size += cost
    parts.append(part)
    return parts


def _point(point: Union[Sequence[float], JSON]) -> JSON:
    if isinstance(point, dict):
        return point
    if len(point) == 3:
        return {"x": point[0], "y": point[1], "pressure": point[2]}
    return {"x": point[0], "y": point[1]}


@dataclass
class Event:
    topic: str
    session: str
    event: str
    seq: int
    data: JSON


class EventSubscriber:
    """A SUB socket on canvasd's event endpoint, for topics starting with ``prefix``.

    Call ``ready()`` before causing the events you want: a subscription takes a moment to
    reach the publisher, and PUB drops what nobody has subscribed to yet.

    With ``curve`` keys (a server that authenticates), only ``"<session>."`` prefixes of this
    key's own sessions and ``"documents."`` take effect; any other prefix, ``""`` included,
    silently receives nothing. Subscribe after ``open_session`` has returned.
    """

    def __init__(self, endpoint: str = DEFAULT_EVENTS, prefix: str = "", *,
                 curve: Optional[CurveKeys] = None, context: Optional[zmq.Context] = None):
        self._own_context = context is None
        self._context = context or zmq.Context()
        self._socket = self._context.socket(zmq.SUB)
        self._socket.setsockopt(zmq.LINGER, 0)
        if curve is not None:
            curve.apply(self._socket)
        self._monitor = self._socket.get_monitor_socket(zmq.EVENT_HANDSHAKE_SUCCEEDED)
        self._socket.setsockopt(zmq.SUBSCRIBE, prefix.encode("utf-8"))
        self._socket.connect(endpoint)

    def ready(self, timeout: float = 5.0) -> None:
        """Waits until the connection is up, then a little longer for the subscription to land."""
        if self._monitor is not None:
            if not self._monitor.poll(int(timeout * 1000)):
                raise CanvasTimeout("the event endpoint did not accept the connection")
            self._monitor.recv_multipart()
            self._socket.disable_monitor()
            self._monitor.close(0)
            self._monitor = None
        time.sleep(0.05)

    def next(self, timeout: float = 1.0) -> Optional[Event]:
        if not self._socket.poll(int(timeout * 1000)):
            return None
        topic, body = self._socket.recv_multipart()
        message = json.loads(body.decode("utf-8"))
        return Event(topic.decode("utf-8"), message["session"], message["event"], message["seq"], message["data"])

    def drain(self, quiet: float = 0.2) -> List[Event]:
        """Every event until none comes for ``quiet`` seconds."""
        events = []
        while (event := self.next(quiet)) is not None:
            events.append(event)
        return events

    def close(self) -> None:
        if self._monitor is not None:
            self._socket.disable_monitor()
            self._monitor.close(0)
        self._socket.close(0)
        if self._own_context:
            self._context.term()

    def __enter__(self) -> "EventSubscriber":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
