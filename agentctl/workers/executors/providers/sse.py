"""Server-sent events (the ``text/event-stream`` format) read off an HTTP answer's lines.

Used by adapters that speak a provider's streaming wire format over ``httpx2`` directly.

Invariants: an event is yielded only when the blank line that ends it arrives, and the next
line is read only when the caller asks for the next event — so a caller that awaits its
stream sink per event reads no more transport data meanwhile; ``data`` lines are joined with
newlines; comments and unknown fields are ignored; an event without data is not dispatched,
nor is a last one cut off before its blank line (the format drops it).
"""

from __future__ import annotations

from collections.abc import AsyncIterable, AsyncIterator
from dataclasses import dataclass


@dataclass(frozen=True)
class SseEvent:
    """One server-sent event: its name and its data."""

    event: str  # the ``event:`` field, "message" when absent
    data: str


async def read_events(lines: AsyncIterable[str]) -> AsyncIterator[SseEvent]:
    """The events of a stream given as lines (line terminators already removed or not)."""
    name = ""
    data: list[str] = []
    async for raw in lines:
        line = raw.rstrip("\r\n")
        if not line:
            if data:
                yield SseEvent(name or "message", "\n".join(data))
            name, data = "", []
            continue
        if line.startswith(":"):
            continue  # a comment (keep-alive)
        field, _, value = line.partition(":")
        value = value.removeprefix(" ")
        if field == "event":
            name = value
        elif field == "data":
            data.append(value)
