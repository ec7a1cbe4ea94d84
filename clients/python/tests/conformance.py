"""Every frame the suites exchange with canvasd, checked against protocol/schemas both ways.

Installed for the whole pytest run by conftest.py, around the client library itself, so no
test can forget it:

- server to client: every reply that ``CanvasClient.request`` or ``exchange`` returns must be
  a valid reply, and its result the schema of the method asked; every event that
  ``EventSubscriber.next`` returns must be a valid event with the data of its kind;
- client to server: a request the server read (its reply has an id, and is no PARSE_ERROR)
  must pass the envelope's request schema, and one refused INVALID_REQUEST must fail it,
  unless what it lacks is a session its method needs, which the envelope cannot know;
  params the server took must pass the method's params schema, and params
  the server refused with INVALID_PARAMS must fail it, unless the refusal depends on what the
  server holds (``STATEFUL``), which no schema can know.

A failure raises jsonschema's ValidationError (or an AssertionError) inside the call, so the
test that made it fails there, with the frame in the message.
"""

from __future__ import annotations

import json
from contextlib import contextmanager
from typing import Any, Dict, Iterator, Optional, Sequence

from jsonschema import ValidationError

import schemas
from canvasbridge import CanvasClient, EventSubscriber

# INVALID_PARAMS that the schema cannot see coming: they depend on the server's state or
# its document folder, not on the request alone.
STATEFUL = {
    ("pencil.configure", "initialized"),  # false is refused only once the plugin is initialized
    ("document.info", "name"), ("document.flatten", "name"), ("document.revisions", "name"),
    ("document.restore", "name"), ("canvas.open", "document"),  # names that lead out of the folder
    ("document.get", "name"), ("document.upload.begin", "name"),
    ("document.upload.commit", "upload"),  # the uploaded bytes are not a document the store serves
    ("document.upload.part", "offset"),  # a part without binary frames
    ("drawing.addStroke", "continued"),  # a part whose style differs from the parts before it
    ("drawing.addStroke", "joined"),  # a stroke that does not continue the one drawn last
    ("drawing.editText", "x"), ("drawing.editText", "y"),  # a nudge that takes the text out of range
    ("document.get", "length"),  # over this server's limits.maxGetBytes, which the schema cannot know
}

counts = {"replies": 0, "events": 0, "requests accepted": 0, "requests refused": 0,
          "params accepted": 0, "params refused": 0}
# The methods that need `session`: INVALID_REQUEST without one, though the envelope is valid.
SESSION_METHODS = ("session.close", "canvas.", "pencil.", "drawing.")
_paused = False


@contextmanager
def paused() -> Iterator[None]:
    """For a test whose peer is a stand-in, not canvasd: its frames are not the protocol's."""
    global _paused
    _paused = True
    try:
        yield
    finally:
        _paused = False


def check_exchange(request: Any, reply: Dict[str, Any]) -> None:
    """Checks one reply, and the request's params against what the reply says of them."""
    if _paused:
        return
    method = request.get("method") if isinstance(request, dict) else None
    method = method if isinstance(method, str) else None
    try:
        schemas.check_reply(method, reply)
    except ValidationError as error:
        raise AssertionError(f"reply to {json.dumps(request)[:300]} fails the schema: {error.message}\n"
                             f"  reply: {json.dumps(reply)[:600]}") from error
    counts["replies"] += 1
    check_request(request, reply)
    params = request.get("params", {}) if isinstance(request, dict) else None
    if params is None:
        params = {}
    if method is None or not isinstance(params, dict) or not schemas.has("methods.schema.json", f"{method}.params"):
        return
    if "result" in reply:
        try:
            schemas.check_params(method, params)
        except ValidationError as error:
            raise AssertionError(f"the server took params its schema refuses: {method} {json.dumps(params)[:300]}: "
                                 f"{error.message}") from error
        counts["params accepted"] += 1
    elif reply.get("error", {}).get("code") == "INVALID_PARAMS":
        field = (reply["error"].get("data") or {}).get("field", "")
        if (method, field.split(".")[0].split("[")[0]) in STATEFUL:
            return
        if schemas.validator("methods.schema.json", f"{method}.params").is_valid(params):
            raise AssertionError(f"the server refused params its schema takes: {method} {json.dumps(params)[:300]}\n"
                                 f"  reply: {json.dumps(reply)[:300]}")
        counts["params refused"] += 1


def check_request(request: Any, reply: Dict[str, Any]) -> None:
    """The request against the envelope's request schema, as far as the reply says the server
    read it: PARSE_ERROR is for bytes that are not JSON, which no schema describes."""
    code = reply.get("error", {}).get("code")
    if code == "PARSE_ERROR" or request is None:
        return
    valid = schemas.validator("envelope.schema.json", "request").is_valid(request)
    if code == "INVALID_REQUEST":
        method = request.get("method") if isinstance(request, dict) else None
        needs_session = isinstance(method, str) and method.startswith(SESSION_METHODS) \
            and request.get("session") is None
        if valid and not needs_session:
            raise AssertionError(f"the server refused a request its schema takes: {json.dumps(request)[:300]}\n"
                                 f"  reply: {json.dumps(reply)[:300]}")
        counts["requests refused"] += 1
    elif reply.get("id") is not None:
        if not valid:
            error = next(schemas.validator("envelope.schema.json", "request").iter_errors(request))
            raise AssertionError(f"the server read a request its schema refuses: {json.dumps(request)[:300]}: "
                                 f"{error.message}\n  reply: {json.dumps(reply)[:300]}")
        counts["requests accepted"] += 1


def check_event(body: Dict[str, Any], topic: Optional[str] = None) -> None:
    """Checks one event: its schema, and what no schema can say (§2.5): the topic is
    `<session>.<event>`, and a stateChanged's `state` is its `to`."""
    if _paused:
        return
    try:
        schemas.check_event(body)
    except ValidationError as error:
        raise AssertionError(f"event fails the schema: {error.message}\n  event: {json.dumps(body)[:600]}") from error
    if topic is not None:
        assert topic == f"{body['session']}.{body['event']}", f"event on topic {topic!r}: {json.dumps(body)[:300]}"
    if body["event"] == "canvas.stateChanged":
        assert body["data"]["state"] == body["data"]["to"], f"stateChanged with state other than to: {json.dumps(body)}"
    counts["events"] += 1


def _not_json(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def _first_frame(frames: Sequence[bytes]) -> Optional[Any]:
    try:
        # NaN and Infinity are not JSON, though Python's json reads them.
        return json.loads(frames[0].decode("utf-8"), parse_constant=_not_json) if frames else None
    except (UnicodeDecodeError, ValueError):
        return None


def install() -> None:
    """Wraps the client library's three ways in, once."""
    if getattr(CanvasClient, "_conformance", False):
        return
    request, exchange, next_event = CanvasClient.request, CanvasClient.exchange, EventSubscriber.next

    def checked_request(self, message, **kwargs):
        reply = request(self, message, **kwargs)
        check_exchange(message, reply)
        return reply

    def checked_exchange(self, frames, **kwargs):
        reply = exchange(self, frames, **kwargs)
        check_exchange(_first_frame(frames), reply)
        return reply

    def checked_next(self, timeout: float = 1.0):
        event = next_event(self, timeout)
        if event is not None:
            check_event({"session": event.session, "event": event.event, "seq": event.seq, "data": event.data}, event.topic)
        return event

    CanvasClient.request, CanvasClient.exchange, EventSubscriber.next = checked_request, checked_exchange, checked_next
    CanvasClient._conformance = True
