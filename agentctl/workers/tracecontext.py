"""W3C trace context for a worker's outbound requests: the run's trace reaches the provider.

The coordinator stamps each ``Execute`` with its invocation's trace id; while the worker runs
that effect, ``CURRENT_SPAN`` holds it (the ``Execute`` itself: nothing is built for an effect
that sends no request), and the egress transport sends ``current_traceparent()`` —
``00-<trace>-<span>-01`` — as the ``traceparent`` header, so a provider's (or proxy's) logs
correlate with ``inspect``, the event stream and OpenTelemetry spans.

Invariants: the trace id is the agentctl trace id's 32 hex digits, the span id the effect
id's first 16 (an effect is one span); anything not of that form sends no header rather than
a malformed one.
"""

from __future__ import annotations

import re
from contextvars import ContextVar
from typing import Protocol


class Span(Protocol):
    """What names an effect's span (an ``Execute`` is one)."""

    @property
    def trace_id(self) -> str | None: ...

    @property
    def effect_id(self) -> str: ...


CURRENT_SPAN: ContextVar[Span | None] = ContextVar("agentctl_span", default=None)

_HEX = re.compile(r"^[0-9a-f]+$")


def traceparent(trace_id: str | None, effect_id: str) -> str | None:
    """The ``traceparent`` value of ``effect_id`` under ``trace_id``, or None."""
    if trace_id is None:
        return None
    trace = trace_id.removeprefix("trace-").replace("-", "").lower()
    span = effect_id[:16].lower()
    valid = len(trace) == 32 and len(span) == 16 and _HEX.match(trace + span)
    if not valid or not trace.strip("0") or not span.strip("0"):
        return None
    return f"00-{trace}-{span}-01"


def current_traceparent() -> str | None:
    """The ``traceparent`` of the effect running in this task, or None."""
    span = CURRENT_SPAN.get()
    return None if span is None else traceparent(span.trace_id, span.effect_id)
