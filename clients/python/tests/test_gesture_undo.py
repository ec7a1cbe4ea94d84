"""One gesture, one undo step (spec §1.2, §5 `joined`): a stroke the client splits at
`maxPointsPerStroke` is undone and redone whole, against a live canvasd."""

from __future__ import annotations

import math

import pytest

from canvasbridge import CanvasError, split_stroke

GESTURE = 20_000   # twice the default maxPointsPerStroke: three strokes on the wire


def gesture(count: int = GESTURE):
    return [{"x": 10 + i / 40, "y": 100 + 50 * math.sin(i / 100), "pressure": round(0.25 + (i % 50) / 100, 2)}
            for i in range(count)]


def stroke(points, **extra):
    return {"tool": "pen", "color": "blue", "width": 2, "points": [{"x": x, "y": y} for x, y in points], **extra}


@pytest.fixture
def session(client):
    opened = client.open_session()
    opened.open()
    return opened


def test_the_python_client_splits_a_long_gesture_and_one_undo_takes_it_all_back(client, session):
    session.add_stroke([(1, 1), (5, 5)])
    before = session.get_drawing()
    points = gesture()
    added = session.add_stroke(points, color="blue", width=2)
    limit = client.limits()["maxPointsPerStroke"]
    pieces = split_stroke(points, limit)
    assert added["pieces"] == len(pieces) == 3 and added["strokes"] == 4 and added["changed"] is True
    drawn = session.get_drawing()["strokes"][1:]
    assert [s["points"] for s in drawn] == pieces, "the pieces, each after the first starting where the one before ended"
    assert all(len(piece) <= limit for piece in pieces) and drawn[0]["points"][-1] == drawn[1]["points"][0]

    undone = session.undo()
    assert undone["changed"] is True and undone["strokes"] == 1 and undone["canRedo"] is True
    assert session.get_drawing() == {**before, "canRedo": True}
    redone = session.redo()
    assert redone["strokes"] == 4 and [s["points"] for s in session.get_drawing()["strokes"][1:]] == pieces
    # The stroke before the gesture is a step of its own.
    assert session.undo()["strokes"] == 1 and session.undo()["strokes"] == 0


def test_a_gesture_refused_in_a_later_piece_is_taken_back_with_one_undo(session):
    session.add_stroke([(1, 1), (5, 5)])
    session.add_stroke([(6, 6), (9, 9)], color="red")
    points = gesture()
    points[-1] = {"x": "not a number", "y": 1}   # in the third piece
    with pytest.raises(CanvasError) as refused:
        session.add_stroke(points, color="blue", width=2)
    assert refused.value.code == "INVALID_PARAMS"
    assert refused.value.data["piece"] == 2 and refused.value.data["pieces"] == 3 and refused.value.data["undone"] == 1
    drawing = session.get_drawing()
    assert [s["color"] for s in drawing["strokes"]] == ["black", "red"], "the strokes before the gesture stay"
    assert drawing["canRedo"] is True


def test_a_joined_stroke_is_one_step_with_the_stroke_it_continues(session):
    session.call("drawing.addStroke", stroke([(0, 0), (5, 5)], color="red"))
    session.call("drawing.addStroke", stroke([(10, 10), (20, 20)]))
    joined = session.call("drawing.addStroke", stroke([(20, 20), (30, 10)], color="#0000FF", width=2.0, joined=True))
    assert joined["changed"] is True and joined["strokes"] == 3 and joined["canRedo"] is False
    again = session.call("drawing.addStroke", stroke([(30, 10), (40, 40)], joined=True))
    assert again["strokes"] == 4
    assert session.undo()["strokes"] == 1
    assert [s["color"] for s in session.get_drawing()["strokes"]] == ["red"]
    assert session.redo()["strokes"] == 4
    assert session.undo()["strokes"] == 1 and session.undo()["strokes"] == 0


@pytest.mark.parametrize("setup, joining, reason", [
    (["clear"], stroke([(20, 20), (30, 30)], joined=True), "notAfterStroke"),
    (["stroke"], stroke([(21, 20), (30, 30)], joined=True), "gap"),
    (["stroke"], stroke([(20, 20), (30, 30)], joined=True, color="red"), "style"),
    (["stroke"], stroke([(20, 20), (30, 30)], joined=True, width=3), "style"),
    (["stroke"], {**stroke([(20, 20), (30, 30)], joined=True), "tool": "highlighter"}, "style"),
    (["stroke", "undo"], stroke([(20, 20), (30, 30)], joined=True), "undone"),
    (["stroke", "text"], stroke([(20, 20), (30, 30)], joined=True), "notAfterStroke"),
    (["stroke", "erase"], stroke([(20, 20), (30, 30)], joined=True), "notAfterStroke"),
    (["stroke"], stroke([(21, 20), (30, 30)], joined=True, continued=True), "gap"),
])
def test_a_stroke_that_does_not_continue_the_last_is_refused_and_changes_nothing(session, setup, joining, reason):
    session.call("drawing.addStroke", stroke([(100, 100), (120, 120)], color="red"))
    for step in setup:
        if step == "stroke":
            session.call("drawing.addStroke", stroke([(10, 10), (20, 20)]))
        elif step == "undo":
            session.undo()
            session.redo()
            session.undo()
        elif step == "clear":
            session.clear()
        elif step == "text":
            session.add_text("note", 50, 50)
        elif step == "erase":
            session.erase(110, 110, 2)   # the red stroke
    before = session.get_drawing()
    with pytest.raises(CanvasError) as refused:
        session.call("drawing.addStroke", joining)
    assert refused.value.code == "INVALID_PARAMS"
    assert refused.value.data["field"] == "joined" and refused.value.data["reason"] == reason
    assert "joined" in refused.value.message
    assert session.get_drawing() == before
    # Nothing of it waits: the next stroke is a stroke of its own.
    assert session.call("drawing.addStroke", stroke([(60, 60)]))["strokes"] == len(before["strokes"]) + 1


def test_parts_say_joined_alike_and_a_joined_stroke_in_parts_joins_whole(session):
    session.call("drawing.addStroke", stroke([(0, 0), (10, 10)]))
    waiting = session.call("drawing.addStroke", stroke([(10, 10), (15, 15)], joined=True, continued=True))
    assert waiting["pendingPoints"] == 2 and waiting["strokes"] == 1
    assert session.call("drawing.addStroke", stroke([(20, 20)], joined=True))["strokes"] == 2
    assert session.undo()["strokes"] == 0
    session.redo()
    session.call("drawing.addStroke", stroke([(20, 20), (25, 25)], joined=True, continued=True))
    with pytest.raises(CanvasError) as refused:
        session.call("drawing.addStroke", stroke([(30, 30)]))
    assert refused.value.code == "INVALID_PARAMS" and refused.value.data["field"] == "joined"
    assert len(session.get_drawing()["strokes"]) == 2


def test_joined_must_be_a_boolean(session):
    session.call("drawing.addStroke", stroke([(0, 0), (10, 10)]))
    with pytest.raises(CanvasError) as refused:
        session.call("drawing.addStroke", stroke([(10, 10), (20, 20)], joined="yes"))
    assert refused.value.code == "INVALID_PARAMS" and refused.value.data["field"] == "joined"
    assert len(session.get_drawing()["strokes"]) == 1
