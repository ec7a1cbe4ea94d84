"""Validation of frames against protocol/schemas, with the jsonschema package."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Dict, Optional

from jsonschema import Draft202012Validator
from referencing import Registry, Resource

SCHEMAS = Path(__file__).resolve().parents[3] / "protocol" / "schemas"


def _load() -> Dict[str, Dict[str, Any]]:
    return {p.name: json.loads(p.read_text(encoding="utf-8")) for p in SCHEMAS.glob("*.schema.json")}


_DOCUMENTS = _load()
_REGISTRY = Registry().with_resources(
    [(doc["$id"], Resource.from_contents(doc)) for doc in _DOCUMENTS.values()]
    + [(name, Resource.from_contents(doc)) for name, doc in _DOCUMENTS.items()]
)
_CACHE: Dict[str, Draft202012Validator] = {}


def validator(document: str, definition: str) -> Draft202012Validator:
    ref = f"{_DOCUMENTS[document]['$id']}#/$defs/{definition}"
    if ref not in _CACHE:
        _CACHE[ref] = Draft202012Validator({"$ref": ref}, registry=_REGISTRY)
    return _CACHE[ref]


def has(document: str, definition: str) -> bool:
    return definition in _DOCUMENTS[document]["$defs"]


def check_reply(method: Optional[str], reply: Dict[str, Any]) -> None:
    """Raises jsonschema.ValidationError unless the reply is a well-formed reply, and its
    result is what ``method`` returns."""
    validator("envelope.schema.json", "reply").validate(reply)
    if method and "result" in reply and has("methods.schema.json", f"{method}.result"):
        validator("methods.schema.json", f"{method}.result").validate(reply["result"])
    if method and has("methods.schema.json", f"{method}.reply"):
        # The whole frame, as a client validating "the reply to method X" does (spec.md 2.6).
        validator("methods.schema.json", f"{method}.reply").validate(reply)


def check_params(method: str, params: Dict[str, Any]) -> None:
    validator("methods.schema.json", f"{method}.params").validate(params)


def check_event(body: Dict[str, Any]) -> None:
    validator("envelope.schema.json", "event").validate(body)
    name = body["event"]
    assert has("events.schema.json", name), f"event {name} has no schema"
    validator("events.schema.json", name).validate(body["data"])
