"""An obviously-correct model of one canvas session, built from protocol/ alone.

Phase changes come from the normative table in protocol/state-table.md, parsed here; the
drawing is a plain list with snapshot undo and redo. The fuzzer compares canvasd with this
after every step, so nothing here may be copied from the Swift code.
"""

from __future__ import annotations

import copy
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

PROTOCOL = Path(__file__).resolve().parents[3] / "protocol"
HISTORY_LIMIT = 256


@dataclass(frozen=True)
class Row:
    transitions: str
    policy: str
    preference: str
    pencil: str
    state: str
    event: str
    reply: str
    result: str
    next: str

    def matches(self, key: Tuple[str, ...]) -> bool:
        cells = (self.transitions, self.policy, self.preference, self.pencil, self.state, self.event)
        return all(cell == "*" or cell == value for cell, value in zip(cells, key))


def load_table(path: Path = PROTOCOL / "state-table.md") -> List[Row]:
    text = path.read_text(encoding="utf-8")
    body = text.split("<!-- table:begin -->", 1)[1].split("<!-- table:end -->", 1)[0]
    rows = []
    for line in body.strip().splitlines()[2:]:  # past the header and its rule
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        rows.append(Row(*cells))
    return rows


TABLE = load_table()


def lookup(transitions: str, policy: str, preference: str, pencil: str, state: str, event: str) -> Row:
    """The one row for this case; the table promises there is exactly one."""
    key = (transitions, policy, preference, pencil, state, event)
    found = [row for row in TABLE if row.matches(key)]
    # Rows for a pencil that is not ready apply to doubleTap only; other events use `ready`.
    if event != "doubleTap" and not found:
        found = [row for row in TABLE if row.matches(key[:3] + ("ready",) + key[4:])]
    assert len(found) == 1, f"{key}: {len(found)} rows match"
    return found[0]


@dataclass
class Model:
    transitions: str = "instant"
    supported: bool = True
    preference: str = "switchEraser"
    policy: str = "alwaysToggle"
    initialized: bool = True
    state: str = "closed"
    strokes: List[Dict[str, Any]] = field(default_factory=list)
    texts: List[Dict[str, Any]] = field(default_factory=list)
    undo_stack: List[Tuple[list, list]] = field(default_factory=list)
    redo_stack: List[Tuple[list, list]] = field(default_factory=list)
    # What the event stream must show, in order.
    state_changes: List[str] = field(default_factory=list)
    results: List[Tuple[str, bool, str]] = field(default_factory=list)
    double_taps: int = 0

    @property
    def pencil(self) -> str:
        if not self.supported:
            return "unsupported"
        return "ready" if self.initialized else "uninitialized"

    @property
    def has_content(self) -> bool:
        return bool(self.strokes or self.texts)

    def row(self, event: str) -> Row:
        return lookup(self.transitions, self.policy, self.preference, self.pencil, self.state, event)

    # -- canvas events ----------------------------------------------------------------------

    def step(self, event: str, cause: str) -> Row:
        """Applies a canvas event (or doubleTap) as the table says; returns the row."""
        row = self.row(event)
        if row.reply.startswith("INVALID_STATE"):
            return row
        if row.result != "-":
            self.results.append((row.result, self.has_content, cause))
        if row.next != "=" and row.next != self.state:
            self.state_changes.append(row.next)
            self.state = row.next
        if row.result in ("submitted", "cancelled"):
            self.strokes, self.texts = [], []
            self.undo_stack, self.redo_stack = [], []
        return row

    # -- drawing ------------------------------------------------------------------------------

    def snapshot(self) -> Tuple[list, list]:
        return copy.deepcopy(self.strokes), copy.deepcopy(self.texts)

    def record(self, strokes: list, texts: list) -> None:
        self.undo_stack.append(self.snapshot())
        del self.undo_stack[:-HISTORY_LIMIT]
        self.redo_stack.clear()
        self.strokes, self.texts = strokes, texts

    def edit(self, method: str, params: Dict[str, Any]) -> Optional[bool]:
        """Applies a drawing edit; returns whether it changed the drawing, or None when the
        text index does not exist (NOT_FOUND)."""
        if method == "drawing.addStroke":
            self.record(self.strokes + [params], self.texts)
            return True
        if method == "drawing.addText":
            self.record(self.strokes, self.texts + [params])
            return True
        if method == "drawing.moveText":
            index = params["index"]
            if index >= len(self.texts):
                return None
            moved = dict(self.texts[index], x=params["x"], y=params["y"])
            if moved == self.texts[index]:
                return False
            self.record(self.strokes, self.texts[:index] + [moved] + self.texts[index + 1:])
            return True
        if method == "drawing.erase":
            # The fuzzer keeps each stroke within 8 points of its anchor, anchors 100 apart,
            # and erases at an anchor with a radius that covers a whole cell: every stroke of
            # that anchor goes, in either mode, and no other stroke is touched.
            kept = [s for s in self.strokes if s["anchor"] != (params["x"], params["y"])]
            if len(kept) == len(self.strokes):
                return False
            self.record(kept, self.texts)
            return True
        if method == "drawing.clear":
            if not self.has_content:
                return False
            self.record([], [])
            return True
        if method == "drawing.undo":
            if not self.undo_stack:
                return False
            self.redo_stack.append(self.snapshot())
            self.strokes, self.texts = self.undo_stack.pop()
            return True
        if method == "drawing.redo":
            if not self.redo_stack:
                return False
            self.undo_stack.append(self.snapshot())
            self.strokes, self.texts = self.redo_stack.pop()
            return True
        raise AssertionError(f"no model for {method}")

    def expected_drawing(self) -> Dict[str, Any]:
        strip = lambda s: {k: v for k, v in s.items() if k != "anchor"}  # noqa: E731
        return {"strokes": [strip(s) for s in self.strokes], "texts": list(self.texts)}


INVALID_STATE = re.compile(r"INVALID_STATE:(\w+)")
