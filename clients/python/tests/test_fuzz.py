"""A Hypothesis state machine that fuzzes toggle and drawing sequences against a live canvasd.

After every step the reply is checked against the model (tests/model.py, built from
protocol/state-table.md) and against the JSON Schemas; at the end of every run the session's
events are checked too: contiguous seq, the phase changes and CanvasResults the model predicts.
The brief's Properties 1 to 3 are the model's predictions for double-taps. Failures shrink to
the shortest sequence and print it as Python that replays it.

FUZZ_EXAMPLES and FUZZ_STEPS scale the run (defaults: 250 runs of up to 50 steps).
"""

from __future__ import annotations

import os
from collections import Counter
from typing import Any, Dict, Optional

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule, run_state_machine_as_test

import schemas
from canvasbridge import CanvasClient, CanvasError, EventSubscriber
from model import INVALID_STATE, Model

TAP_ACTIONS = ["switchEraser", "switchPrevious", "showColorPalette", "showInkAttributes", "ignore"]
POLICIES = ["alwaysToggle", "respectPreference"]
COLORS = st.sampled_from(["black", "blue", "red", "purple", "#12AbEf"])
ANCHORS = st.tuples(st.integers(0, 4), st.integers(0, 4)).map(lambda c: (100.0 * c[0] + 50, 100.0 * c[1] + 50))

# Which (state, command) pairs the runs exercised, reported at the end.
COVERAGE: Counter = Counter()
STEPS = Counter()


class CanvasMachine(RuleBasedStateMachine):
    def __init__(self, client: CanvasClient, events: EventSubscriber):
        super().__init__()
        self.client = client
        self.events = events
        self.model = Model()
        self.session: Optional[str] = None

    # -- plumbing ---------------------------------------------------------------------------

    def call(self, method: str, params: Optional[Dict[str, Any]] = None, *, step: bool = True) -> Dict[str, Any]:
        """The whole reply, schema-checked; a step (not a check) counted for coverage."""
        STEPS["requests"] += 1
        if step:
            COVERAGE[(self.model.state, method)] += 1
            STEPS["steps"] += 1
        message = {"id": self.client.new_id(), "method": method, "params": params or {}}
        if self.session:
            message["session"] = self.session
        reply = self.client.request(message)
        schemas.check_reply(method, reply)
        return reply

    def expect_invalid_state(self, reply: Dict[str, Any], row_reply: str) -> None:
        assert "error" in reply, f"expected {row_reply}, got {reply}"
        assert reply["error"]["code"] == "INVALID_STATE", reply
        assert reply["error"]["data"]["reason"] == INVALID_STATE.match(row_reply).group(1), reply

    # -- set-up and tear-down -------------------------------------------------------------------

    @initialize(transitions=st.sampled_from(["instant", "manual", "manual"]), supported=st.sampled_from([True, True, False]),
                preference=st.sampled_from(TAP_ACTIONS), policy=st.sampled_from(POLICIES),
                initialized=st.sampled_from([True, True, True, False]))
    def open_session(self, transitions, supported, preference, policy, initialized):
        self.model = Model(transitions=transitions, supported=supported, preference=preference,
                           policy=policy, initialized=initialized)
        reply = self.call("session.open", {
            "transitions": transitions, "initialized": initialized,
            "pencil": {"supported": supported, "preferredTapAction": preference, "policy": policy},
        })
        self.session = reply["result"]["session"]
        assert reply["result"]["state"] == "closed"

    def teardown(self):
        if not self.session:
            return
        final_seq = self.call("canvas.state", step=False)["result"]["seq"]
        received = []
        while (received[-1]["seq"] if received else 0) < final_seq:
            event = self.events.next(timeout=2.0)
            assert event is not None, f"events stopped at {received[-1]['seq'] if received else 0} of {final_seq}"
            if event.session != self.session:
                continue
            body = {"session": event.session, "event": event.event, "seq": event.seq, "data": event.data}
            schemas.check_event(body)
            assert event.topic == f"{event.session}.{event.event}"
            received.append(body)
        assert [e["seq"] for e in received] == list(range(1, final_seq + 1)), "seq must count up by one"
        changes = [e["data"]["to"] for e in received if e["event"] == "canvas.stateChanged"]
        assert changes == self.model.state_changes
        results = [(e["data"]["action"], e["data"]["hasContent"], e["data"]["cause"])
                   for e in received if e["event"] == "canvas.result"]
        assert results == self.model.results
        assert sum(e["event"] == "pencil.doubleTap" for e in received) == self.model.double_taps
        self.call("session.close", step=False)

    # -- canvas -------------------------------------------------------------------------------

    def canvas_command(self, event: str) -> None:
        before_content = self.model.has_content
        row = self.model.row(event)
        reply = self.call(f"canvas.{event}")
        if row.reply.startswith("INVALID_STATE"):
            self.expect_invalid_state(reply, row.reply)
            return
        self.model.step(event, "client")
        result = reply["result"]
        assert result["state"] == self.model.state, (row, result)
        if row.result != "-":
            assert result["action"] == row.result and result["hasContent"] == before_content, (row, result)
        else:
            assert "action" not in result

    @rule()
    def open(self):
        self.canvas_command("open")

    @rule()
    def minimize(self):
        self.canvas_command("minimize")

    @rule()
    def submit(self):
        self.canvas_command("submit")

    @rule()
    def cancel(self):
        self.canvas_command("cancel")

    @rule()
    def finish_transition(self):
        self.canvas_command("finishTransition")

    # The single-command rules above are each one choice among many; this one makes opening
    # and toggling common enough that runs reach every phase, animations included.
    @rule(event=st.sampled_from(["open", "open", "finishTransition", "doubleTap", "doubleTap",
                                 "minimize", "submit", "cancel"]))
    def canvas_step(self, event):
        if event == "doubleTap":
            self.double_tap()
        else:
            self.canvas_command(event)

    # Animations are short-lived phases; while one is under way, give every command a second
    # chance to be tried there.
    @precondition(lambda self: self.model.state in ("opening", "minimizing"))
    @rule(event=st.sampled_from(["open", "minimize", "submit", "cancel", "doubleTap", "edit"]))
    def during_animation(self, event):
        if event == "doubleTap":
            self.double_tap()
        elif event == "edit":
            self.edit("drawing.addStroke", {"tool": "pen", "color": "red", "width": 1, "points": [{"x": 50, "y": 50}]},
                      (50.0, 50.0))
        else:
            self.canvas_command(event)

    @rule()
    def initialize_canvas(self):
        reply = self.call("canvas.initialize")
        self.model.initialized = True
        assert reply["result"]["state"] == self.model.state

    @rule(supported=st.booleans(), preference=st.sampled_from(TAP_ACTIONS), policy=st.sampled_from(POLICIES))
    def configure_pencil(self, supported, preference, policy):
        reply = self.call("pencil.configure", {"supported": supported, "preferredTapAction": preference, "policy": policy})
        self.model.supported, self.model.preference, self.model.policy = supported, preference, policy
        pencil = reply["result"]["pencil"]
        assert (pencil["supported"], pencil["preferredTapAction"], pencil["policy"]) == (supported, preference, policy)

    @rule()
    def double_tap(self):
        had_content = self.model.has_content
        row = self.model.row("doubleTap")
        reply = self.call("pencil.doubleTap")
        self.model.step("doubleTap", "pencil")
        self.model.double_taps += 1
        result = reply["result"]
        # Property 1 is this: the table's outcome (opened from closed or minimized, minimized
        # from open) and the phase after it.
        outcome, _, reason = row.reply.partition(":")
        assert result["outcome"] == outcome, (row, result)
        assert result.get("reason") == (reason or None), (row, result)
        assert result["state"] == self.model.state, (row, result)
        if outcome == "minimized":
            # Property 3: hasContent is true exactly when the drawing has content.
            assert result["canvasResult"] == {"action": "minimized", "hasContent": had_content}
        else:
            assert "canvasResult" not in result

    # -- drawing ------------------------------------------------------------------------------

    def edit(self, method: str, params: Optional[Dict[str, Any]] = None, anchor=None) -> None:
        row = self.model.row("edit")
        reply = self.call(method, params)
        if row.reply.startswith("INVALID_STATE"):
            self.expect_invalid_state(reply, row.reply)
            return
        stored = dict(params or {}, anchor=anchor) if method == "drawing.addStroke" else params
        changed = self.model.edit(method, stored or {})
        if changed is None:
            assert reply.get("error", {}).get("code") == "NOT_FOUND", reply
            return
        result = reply["result"]
        assert result["changed"] == changed, (method, params, result)
        assert (result["strokes"], result["texts"]) == (len(self.model.strokes), len(self.model.texts))
        assert (result["canUndo"], result["canRedo"]) == (bool(self.model.undo_stack), bool(self.model.redo_stack))

    @rule(anchor=ANCHORS, tool=st.sampled_from(["pen", "highlighter"]), color=COLORS,
          width=st.floats(0.5, 4.0), data=st.data())
    def add_stroke(self, anchor, tool, color, width, data):
        # Points stay within a 10 x 10 square at the anchor, so an erase there takes them all.
        offsets = data.draw(st.lists(st.tuples(st.integers(-5, 5), st.integers(-5, 5),
                                               st.one_of(st.none(), st.integers(0, 4).map(lambda p: p / 4))),
                                     min_size=1, max_size=6))
        points = []
        for dx, dy, pressure in offsets:
            point = {"x": anchor[0] + dx, "y": anchor[1] + dy}
            if pressure is not None:
                point["pressure"] = pressure
            points.append(point)
        self.edit("drawing.addStroke", {"tool": tool, "color": color, "width": width, "points": points}, anchor)

    @rule(text=st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), min_size=1, max_size=12),
          x=st.integers(0, 600), y=st.integers(0, 800), size=st.integers(8, 48), color=COLORS)
    def add_text(self, text, x, y, size, color):
        self.edit("drawing.addText", {"text": text, "x": x, "y": y, "fontSize": size, "color": color})

    @rule(index=st.integers(0, 3), x=st.integers(0, 600), y=st.integers(0, 800))
    def move_text(self, index, x, y):
        self.edit("drawing.moveText", {"index": index, "x": x, "y": y})

    @rule(anchor=ANCHORS, mode=st.sampled_from(["stroke", "partial"]))
    def erase(self, anchor, mode):
        self.edit("drawing.erase", {"x": anchor[0], "y": anchor[1], "radius": 12, "mode": mode})

    @rule()
    def undo(self):
        self.edit("drawing.undo")

    @rule()
    def redo(self):
        self.edit("drawing.redo")

    @rule()
    def clear(self):
        self.edit("drawing.clear")

    @rule()
    def bad_stroke(self):
        # NaN cannot be written in JSON; an out-of-range width is the closest: refused, no change.
        reply = self.call("drawing.addStroke", {"tool": "pen", "color": "black", "width": 1e9,
                                                "points": [{"x": 1, "y": 1}]})
        assert reply["error"]["code"] in ("INVALID_PARAMS", "INVALID_STATE"), reply

    # -- what must hold after every step --------------------------------------------------------

    @invariant()
    def state_agrees(self):
        if not self.session:
            return
        result = self.call("canvas.state", step=False)["result"]
        assert result["state"] == self.model.state
        assert result["hasContent"] == self.model.has_content

    @precondition(lambda self: self.session is not None and self.model.state == "open")
    @invariant()
    def drawing_agrees(self):
        # Property 2 and everything else about the drawing: exactly what was drawn, after any
        # minimize and reopen.
        result = self.call("drawing.get", step=False)["result"]
        assert {"strokes": result["strokes"], "texts": result["texts"]} == self.model.expected_drawing()


@pytest.fixture(scope="module")
def wire(tmp_path_factory):
    from conftest import Server

    server = Server(tmp_path_factory.mktemp("fuzz"), ["--log-level", "error"])
    client = server.client(timeout=5.0)
    events = EventSubscriber(server.events)
    events.ready()
    yield client, events
    events.close()
    client.close()
    server.stop()


def test_toggle_and_drawing_sequences_agree_with_the_model(wire):
    client, events = wire
    COVERAGE.clear()
    STEPS.clear()
    examples = int(os.environ.get("FUZZ_EXAMPLES", "250"))
    steps = int(os.environ.get("FUZZ_STEPS", "50"))
    run_state_machine_as_test(
        lambda: CanvasMachine(client, events),
        # Derandomized unless FUZZ_RANDOM is set: the same sequences every run, so the coverage
        # check below is a fact about this suite rather than a dice roll in CI.
        settings=settings(max_examples=examples, stateful_step_count=steps, deadline=None,
                          derandomize=not os.environ.get("FUZZ_RANDOM"),
                          suppress_health_check=list(HealthCheck)),
    )
    states = ["closed", "opening", "open", "minimizing", "minimized"]
    commands = sorted({command for _, command in COVERAGE})
    print(f"\nwire fuzz: {STEPS['steps']} random steps, {STEPS['requests']} requests with the checks;"
          " coverage (state x command):")
    for state in states:
        print(f"  {state:>10}: " + ", ".join(f"{c}={COVERAGE[(state, c)]}" for c in commands if COVERAGE[(state, c)]))
    # A guard that the fuzzer explores, not a census: the path depends on when timed transitions
    # finish, so on a busy machine a rare pair (finishTransition while minimized, say) may go
    # untried in one run. test_state_table.py walks every pair deterministically; here every
    # command must meet every steady phase but for at most one pair per phase.
    steady = ["canvas.open", "canvas.minimize", "canvas.submit", "canvas.cancel",
              "canvas.finishTransition", "pencil.doubleTap", "drawing.addStroke"]
    for command in steady:
        assert any(COVERAGE[(state, command)] for state in states), f"never tried {command}"
    for state in ["closed", "open", "minimized"]:
        missed = [command for command in steady if not COVERAGE[(state, command)]]
        assert len(missed) <= 1, f"while {state}, never tried {missed}"
