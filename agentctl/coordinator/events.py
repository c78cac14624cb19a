"""The live event stream (``--output jsonl``): the run's durable record, shown as it commits.

The CLI opens an ``EventSink`` for the command (``open_event_stream``); every drive of that
command binds an ``EventTap`` to its run and hands it to its ``Store``. After each ledger call
returns, the tap reads the run's audit events past its cursor (what just committed, nothing
else) and, back on the trio thread, emits one ``RunEvent`` per row. Streamed model fragments
reach the sink from ``FragmentKeeper`` after their own commit and are emitted as
``StreamEvent`` lines, between the audit events committed before and after them.

Invariants:
- only committed rows are shown, never the driver's intentions: a line is emitted after the
  transaction holding its row returned, so every line is in ``inspect``'s audit too;
- ``RunEvent.sequence`` is the run's audit sequence: gapless, increasing, and continued by
  the next invocation (a ``resume`` prints from where the record stands, not from 1);
- a drive's stream begins with the first event this invocation committed: the audit events
  carrying its trace id, or everything after the record as it stood when the tap bound;
- the tap reads in the ledger's thread within the same limiter slot as the write, so it never
  uses the connection concurrently; with no sink open nothing is read at all.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterator, Sequence
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import TypeVar

from agentctl.core.jsonvalue import JsonObject, JsonValue
from agentctl.ledger.audit import AuditEvent
from agentctl.ledger.interface import RunLedger
from agentctl.ledger.streams import StreamEventRecord

T = TypeVar("T")

# (envelope kind, data): how the CLI writes one line.
LineWriter = Callable[[str, JsonObject], None]


@dataclass(frozen=True)
class RunEvent:
    """One durable event of a run, as the stream shows it (docs/events.md)."""

    type: str  # the audit event type: task.running, effect.started, approval.requested, ...
    run_id: str
    trace_id: str
    sequence: int
    time: str
    task_id: str | None
    effect_id: str | None
    payload: JsonValue

    @classmethod
    def from_audit(cls, event: AuditEvent, trace_id: str) -> RunEvent:
        payload = event.payload
        effect = payload.get("effectId") if isinstance(payload, dict) else None
        return cls(
            type=event.event_type,
            run_id=event.run_id,
            # Some rows (budget, run settlement) carry no trace of their own: they belong to
            # the invocation that wrote them.
            trace_id=event.trace_id or trace_id,
            sequence=event.sequence,
            time=event.created_at,
            task_id=event.task_id,
            effect_id=effect if isinstance(effect, str) else None,
            payload=payload,
        )

    def to_json(self) -> JsonObject:
        return {
            "type": self.type,
            "runId": self.run_id,
            "traceId": self.trace_id,
            "sequence": self.sequence,
            "time": self.time,
            "taskId": self.task_id,
            "effectId": self.effect_id,
            "payload": self.payload,
        }


@dataclass
class EventTap:
    """One run's reader of committed audit events; see the module invariants."""

    run_id: str
    trace_id: str
    write: LineWriter
    _cursor: int | None = None
    _pending: list[AuditEvent] = field(default_factory=list)
    # ``collect`` runs in the ledger's thread, ``flush`` on the trio thread: one list, one lock.
    _guard: threading.Lock = field(default_factory=threading.Lock)

    def wrap(self, fn: Callable[[], T], ledger: RunLedger) -> Callable[[], T]:
        """``fn`` followed, in the same thread, by a read of what it committed."""

        def call() -> T:
            result = fn()  # a failed call committed nothing: the next one reads on
            self.collect(ledger)
            return result

        return call

    def collect(self, ledger: RunLedger) -> None:
        if self._cursor is None:
            self._cursor = self._start(ledger.audit_after(self.run_id, 0))
        new = ledger.audit_after(self.run_id, self._cursor)
        if new:
            with self._guard:
                self._pending.extend(new)
            self._cursor = new[-1].sequence

    def _start(self, record: Sequence[AuditEvent]) -> int:
        for event in record:
            if event.trace_id == self.trace_id:
                return event.sequence - 1
        return record[-1].sequence if record else 0

    def flush(self) -> None:
        with self._guard:
            pending, self._pending = self._pending, []
        for event in pending:
            self.write("RunEvent", RunEvent.from_audit(event, self.trace_id).to_json())


@dataclass
class EventSink:
    """The command-wide destination of event lines; binds a tap per driven run."""

    write: LineWriter
    trace_id: str | None = None

    def tap(self, run_id: str, trace_id: str) -> EventTap:
        self.trace_id = trace_id
        return EventTap(run_id, trace_id, self.write)

    def stream(self, record: StreamEventRecord) -> None:
        """A persisted stream fragment, as a ``StreamEvent`` line (its own per-attempt
        sequence; the invocation's trace id added)."""
        self.write("StreamEvent", {**record.to_json(), "traceId": self.trace_id})


_SINK: ContextVar[EventSink | None] = ContextVar("agentctl_event_sink", default=None)


def current_sink() -> EventSink | None:
    return _SINK.get()


@contextlib.contextmanager
def open_event_stream(write: LineWriter) -> Iterator[EventSink]:
    """Stream the durable events of every run this block drives through ``write``."""
    sink = EventSink(write)
    token = _SINK.set(sink)
    try:
        yield sink
    finally:
        _SINK.reset(token)
