"""Replays protocol/vectors/*.json against a live canvasd: the files the Swift suite replays."""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any, List, Optional

import pytest

import schemas

VECTORS = Path(__file__).resolve().parents[3] / "protocol" / "vectors"


def cases() -> List[Any]:
    found = []
    for path in sorted(VECTORS.glob("*.json")):
        for case in json.loads(path.read_text(encoding="utf-8"))["cases"]:
            found.append(pytest.param(case, id=f"{path.stem}: {case['name']}"))
    return found


def substitute(value: Any, session: str) -> Any:
    if value == "$session":
        return session
    if isinstance(value, list):
        return [substitute(v, session) for v in value]
    if isinstance(value, dict):
        return {k: substitute(v, session) for k, v in value.items()}
    return value


def mismatch(pattern: Any, actual: Any, present: bool = True, path: str = "$") -> Optional[str]:
    """The rules of protocol/vectors/README.md; None when the reply matches."""
    if pattern == "$any":
        return None if present else f"{path}: missing"
    if pattern == "$absent":
        return None if not present else f"{path}: should be absent"
    if not present:
        return f"{path}: missing"
    if isinstance(pattern, str) and pattern.startswith("$prefix:"):
        ok = isinstance(actual, str) and actual.startswith(pattern[len("$prefix:"):])
        return None if ok else f"{path}: {actual!r} does not start with {pattern[8:]!r}"
    if isinstance(pattern, dict):
        if not isinstance(actual, dict):
            return f"{path}: expected an object, got {actual!r}"
        for key, value in pattern.items():
            problem = mismatch(value, actual.get(key), key in actual, f"{path}.{key}")
            if problem:
                return problem
        return None
    if isinstance(pattern, list):
        if not isinstance(actual, list) or len(actual) != len(pattern):
            return f"{path}: expected {len(pattern)} elements, got {actual!r}"
        for index, (p, a) in enumerate(zip(pattern, actual)):
            problem = mismatch(p, a, True, f"{path}[{index}]")
            if problem:
                return problem
        return None
    numeric = (int, float)
    if isinstance(pattern, numeric) and isinstance(actual, numeric) \
            and not isinstance(pattern, bool) and not isinstance(actual, bool):
        ok = abs(pattern - actual) <= 1e-9 * max(1.0, abs(pattern))
        return None if ok else f"{path}: {actual}, expected {pattern}"
    if type(pattern) is not type(actual) or pattern != actual:
        return f"{path}: {actual!r}, expected {pattern!r}"
    return None


def first_frame(step: dict, session: str) -> bytes:
    if "raw" in step:
        return step["raw"].replace("$session", session).encode("utf-8")
    if "rawBase64" in step:
        return base64.b64decode(step["rawBase64"])
    request = substitute(step["send"], session)
    if "pad" in step and isinstance(request, dict):
        request.setdefault("params", {})["padding"] = "x" * step["pad"]["bytes"]
    return json.dumps(request, ensure_ascii=False).encode("utf-8")


def test_every_error_code_has_a_vector():
    codes = set()
    for case in cases():
        for step in case.values[0]["steps"]:
            error = step["expect"].get("error")
            if isinstance(error, dict):
                codes.add(error.get("code"))
    envelope = json.loads((schemas.SCHEMAS / "envelope.schema.json").read_text(encoding="utf-8"))
    wanted = set(envelope["$defs"]["failure"]["properties"]["error"]["properties"]["code"]["enum"])
    # Only a web peer of a server with --web-tokens can be refused so; the vectors replay over
    # ipc://, and test_web_browser.py's token test makes it happen in a browser.
    wanted.discard("UNAUTHORIZED")
    assert wanted <= codes, f"no vector produces {sorted(wanted - codes)}"


@pytest.mark.parametrize("case", cases())
def test_vector(server, client, case):
    for name, content in case.get("documents", {}).items():
        if content.get("folder"):
            (server.documents / name).mkdir(parents=True)
            continue
        data = base64.b64decode(content["base64"]) if "base64" in content else content["text"].encode("utf-8")
        (server.documents / name).write_bytes(data)
    session = ""
    if "session" in case:
        session = client.call("session.open", case["session"])["session"]
    for index, step in enumerate(case["steps"]):
        frames = [first_frame(step, session)] + [base64.b64decode(f) for f in step.get("frames", [])]
        reply = client.exchange(frames)
        problem = mismatch(substitute(step["expect"], session), reply)
        assert problem is None, f"step {index}: {problem}\n  reply: {json.dumps(reply)}"
        method = step.get("send", {}).get("method") if isinstance(step.get("send"), dict) else None
        schemas.check_reply(method if isinstance(method, str) else None, reply)
