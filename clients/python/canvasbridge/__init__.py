"""A Python client for canvasd, the canvas bridge service (protocol canvas/1)."""

from .client import (
    DEFAULT_ENDPOINT,
    DEFAULT_EVENTS,
    CanvasClient,
    CanvasError,
    CanvasTimeout,
    Event,
    EventSubscriber,
    Session,
    frame_parts,
    split_stroke,
)
from .keys import CurveKeys, generate as generate_keys, load_pair, load_public

__all__ = [
    "DEFAULT_ENDPOINT", "DEFAULT_EVENTS", "CanvasClient", "CanvasError", "CanvasTimeout", "Event",
    "EventSubscriber", "Session", "CurveKeys", "generate_keys", "load_pair", "load_public",
    "split_stroke", "frame_parts",
]
