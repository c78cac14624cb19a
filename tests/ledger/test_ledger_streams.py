"""Stream events: appended under the attempt's next sequence, bounded per payload and attempt."""

from __future__ import annotations

import hashlib

from ledger_helpers import T0, make_run

from agentctl.ledger.connection import Database
from agentctl.ledger.streams import (
    MAX_EVENTS_PER_ATTEMPT,
    MAX_PAYLOAD_BYTES,
    NewStreamEvent,
    append_stream_event_txn,
    list_stream_events,
)


def _event(text: str, *, task: str = "a", attempt: int = 1) -> NewStreamEvent:
    return NewStreamEvent("run-1", task, attempt, "effect-1", "text.delta", text, 7, T0)


def test_sequences_count_per_task_attempt(ledger: Database) -> None:
    make_run(ledger)
    with ledger.transaction() as conn:
        for event in (_event("x"), _event("y"), _event("z", attempt=2), _event("w", task="b")):
            append_stream_event_txn(conn, event)
    with ledger.read() as conn:
        found = [(e.task_id, e.attempt, e.sequence) for e in list_stream_events(conn, "run-1")]
    assert found == [("a", 1, 1), ("a", 1, 2), ("a", 2, 1), ("b", 1, 1)]


def test_an_oversized_payload_keeps_its_length_and_digest(ledger: Database) -> None:
    make_run(ledger)
    text = "é" * MAX_PAYLOAD_BYTES
    with ledger.transaction() as conn:
        record = append_stream_event_txn(conn, _event(text))
    assert record is not None and record.truncated
    raw = text.encode("utf-8")
    assert record.payload == {"bytes": len(raw), "sha256": hashlib.sha256(raw).hexdigest()}
    with ledger.read() as conn:
        [stored] = list_stream_events(conn, "run-1")
    assert stored == record


def test_an_attempt_keeps_at_most_the_cap(ledger: Database) -> None:
    make_run(ledger)
    with ledger.transaction() as conn:
        kept = [
            append_stream_event_txn(conn, _event(str(n))) for n in range(MAX_EVENTS_PER_ATTEMPT)
        ]
        over = append_stream_event_txn(conn, _event("one too many"))
        other = append_stream_event_txn(conn, _event("next attempt", attempt=2))
    assert all(r is not None for r in kept) and over is None
    assert other is not None and other.sequence == 1
    with ledger.read() as conn:
        assert len(list_stream_events(conn, "run-1")) == MAX_EVENTS_PER_ATTEMPT + 1
