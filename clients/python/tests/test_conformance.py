"""The schema conformance checks of conformance.py catch what they are there to catch."""

from __future__ import annotations

import pytest

import conformance
from canvasbridge import CanvasClient, EventSubscriber

STROKE = {"tool": "pen", "color": "red", "width": 2, "points": [{"x": 1, "y": 1}]}


def test_installed_around_the_client_library():
    assert CanvasClient.request.__name__ == "checked_request"
    assert CanvasClient.exchange.__name__ == "checked_exchange"
    assert EventSubscriber.next.__name__ == "checked_next"


def test_a_live_exchange_is_counted(client):
    before = conformance.counts["replies"], conformance.counts["params accepted"]
    client.hello()
    assert (conformance.counts["replies"], conformance.counts["params accepted"]) == (before[0] + 1, before[1] + 1)


def test_a_reply_off_its_schema_fails():
    with pytest.raises(AssertionError, match="fails the schema"):
        conformance.check_exchange({"id": 1, "method": "canvas.state"}, {"id": 1, "result": {"state": "ajar"}})
    with pytest.raises(AssertionError, match="fails the schema"):
        conformance.check_exchange({"id": 1, "method": "drawing.addStroke", "params": {"width": True}},
                                   {"id": 1, "error": {"code": "INVALID_PARAMS", "message": "width: wrong type"}})


def test_params_taken_but_refused_by_the_schema_fail():
    with pytest.raises(AssertionError, match="took params its schema refuses"):
        conformance.check_exchange({"id": 1, "method": "drawing.addStroke", "params": dict(STROKE, width=0)},
                                   {"id": 1, "result": {"changed": True, "canUndo": True, "canRedo": False,
                                                        "strokes": 1, "texts": 0}})


def test_params_refused_but_taken_by_the_schema_fail():
    with pytest.raises(AssertionError, match="refused params its schema takes"):
        conformance.check_exchange({"id": 1, "method": "drawing.addStroke", "params": STROKE},
                                   {"id": 1, "error": {"code": "INVALID_PARAMS", "message": "?",
                                                       "data": {"field": "width"}}})


def test_an_event_off_its_schema_fails():
    with pytest.raises(AssertionError, match="event fails the schema"):
        conformance.check_event({"session": "s", "event": "canvas.result", "seq": 1,
                                 "data": {"action": "submitted", "hasContent": True, "cause": "client",
                                          "document": {"name": "a.pdf", "revision": 2, "pageCount": 1}}})
