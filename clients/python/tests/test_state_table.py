"""Walks every row case of protocol/state-table.md over the wire: each transitions mode x
policy x preference x pencil x state x event, in a fresh session driven to that state."""

from __future__ import annotations

import itertools

import pytest

from model import TABLE, lookup

PREFERENCES = ["switchEraser", "switchPrevious", "showColorPalette", "showInkAttributes", "ignore"]
EVENTS = ["open", "minimize", "submit", "cancel", "finishTransition", "doubleTap", "edit"]
STATES = {"instant": ["closed", "open", "minimized"],
          "manual": ["closed", "opening", "open", "minimizing", "minimized"]}
METHODS = {"doubleTap": "pencil.doubleTap", "edit": "drawing.addText"}

# The on-screen button's path to each state; it works whatever the pencil.
PATHS = {
    "closed": [],
    "opening": ["open"],
    "open": ["open", "finishTransition", "draw"],
    "minimizing": ["open", "finishTransition", "draw", "minimize"],
    "minimized": ["open", "finishTransition", "draw", "minimize", "finishTransition"],
}


def cases():
    for transitions, states in STATES.items():
        for policy, preference, pencil, state, event in itertools.product(
                ["alwaysToggle", "respectPreference"], PREFERENCES, ["ready", "unsupported", "uninitialized"],
                states, EVENTS):
            yield transitions, policy, preference, pencil, state, event


def test_every_row_is_reachable_and_walked():
    walked = {lookup(*case) for case in cases()}
    assert walked == set(TABLE), f"rows no case reaches: {set(TABLE) - walked}"


def test_state_table_over_the_wire(client):
    count = 0
    for transitions, policy, preference, pencil, state, event in cases():
        row = lookup(transitions, policy, preference, pencil, state, event)
        where = f"{transitions}/{policy}/{preference}/{pencil}: {state} + {event}"
        opened = client.call("session.open", {
            "transitions": transitions, "initialized": pencil != "uninitialized",
            "pencil": {"supported": pencil != "unsupported", "preferredTapAction": preference, "policy": policy},
        })
        session = opened["session"]
        for step in PATHS[state]:
            if step == "finishTransition" and transitions == "instant":
                continue
            if step == "draw":
                client.call("drawing.addStroke", {"tool": "pen", "color": "blue", "width": 2,
                                                  "points": [{"x": 5, "y": 5}]}, session=session)
            else:
                client.call(f"canvas.{step}", session=session)
        assert client.call("canvas.state", session=session)["state"] == state, where

        method = METHODS.get(event, f"canvas.{event}")
        params = {"text": "t", "x": 1, "y": 1, "fontSize": 12, "color": "black"} if event == "edit" else {}
        reply = client.request({"id": client.new_id(), "method": method, "params": params, "session": session})
        after = client.call("canvas.state", session=session)["state"]
        expected_next = state if row.next == "=" else row.next
        if row.reply.startswith("INVALID_STATE"):
            assert reply["error"]["code"] == "INVALID_STATE", (where, reply)
            assert reply["error"]["data"]["reason"] == row.reply.split(":")[1], (where, reply)
        else:
            result = reply["result"]
            if event == "doubleTap":
                outcome, _, reason = row.reply.partition(":")
                assert (result["outcome"], result.get("reason")) == (outcome, reason or None), (where, result)
                action = (result.get("canvasResult") or {}).get("action", "-")
            else:
                action = result.get("action", "-")
            assert action == row.result, (where, result)
            if action != "-":
                assert (result.get("canvasResult") or result)["hasContent"] is (state != "closed"), (where, result)
        assert after == expected_next, (where, reply)
        client.call("session.close", session=session)
        count += 1
    print(f"\nstate table: {count} cases walked over the wire")
