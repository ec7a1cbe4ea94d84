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
)

__all__ = [
    "DEFAULT_ENDPOINT", "DEFAULT_EVENTS", "CanvasClient", "CanvasError", "CanvasTimeout", "Event",
    "EventSubscriber", "Session",
]
