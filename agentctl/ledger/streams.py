"""Durable stream events: the bounded fragments of a streamed model answer (``stream_events``).

A streaming model call sends each delta to the coordinator, which appends it here and only
then lets the worker read more of the answer (ADR: durable streaming, docs/providers.md).

Invariants:
- ``sequence`` numbers the events of one task attempt from 1, across all its model calls, in
  the order they were appended (the next one is computed inside the appending transaction);
- one task attempt keeps at most ``MAX_EVENTS_PER_ATTEMPT`` events: a later fragment is not
  stored (``append_stream_event_txn`` returns None) — the effect's final result still carries
  the whole answer;
- a stored payload is at most ``MAX_PAYLOAD_BYTES`` of JSON: a longer text is replaced by its
  UTF-8 length and SHA-256, with ``truncated`` set;
- rows are append-only; nothing here updates or deletes them. A recorded replay copies its
  source's rows (``copy_stream_events_txn``) with ``source_run_id`` / ``source_sequence``.
"""

from __future__ import annotations

from dataclasses import dataclass

from agentctl.core.canonical import sha256_hex
from agentctl.core.jsonvalue import JsonObject, JsonValue
from agentctl.ledger.rows import ROW_FORMAT_VERSION, dumps, fetch_all, loads_opt
from agentctl.ledger.sql import Db

MAX_EVENTS_PER_ATTEMPT = 256
MAX_PAYLOAD_BYTES = 4096


@dataclass(frozen=True)
class NewStreamEvent:
    """One fragment as the coordinator received it (already redacted)."""

    run_id: str
    task_id: str
    attempt: int
    effect_id: str
    event_type: str  # "<kind>.delta": text, refusal, tool_arguments, reasoning
    text: str
    provider_sequence: int | None
    now: str


@dataclass(frozen=True)
class StreamEventRecord:
    """One recorded event of a model call's stream."""

    run_id: str
    task_id: str
    attempt: int
    sequence: int
    effect_id: str | None
    provider_sequence: int | None
    event_type: str
    payload: JsonValue
    truncated: bool
    created_at: str
    source_run_id: str | None = None
    source_sequence: int | None = None

    def to_json(self) -> JsonObject:
        return {
            "runId": self.run_id,
            "taskId": self.task_id,
            "attempt": self.attempt,
            "sequence": self.sequence,
            "effectId": self.effect_id,
            "providerSequence": self.provider_sequence,
            "eventType": self.event_type,
            "payload": self.payload,
            "truncated": self.truncated,
            "createdAt": self.created_at,
            "sourceRunId": self.source_run_id,
            "sourceSequence": self.source_sequence,
        }


def bounded_payload(text: str) -> tuple[JsonObject, bool]:
    """The payload stored for ``text`` and whether it had to be cut."""
    payload: JsonObject = {"text": text}
    if len(dumps(payload).encode("utf-8")) <= MAX_PAYLOAD_BYTES:
        return payload, False
    raw = text.encode("utf-8")
    return {"bytes": len(raw), "sha256": sha256_hex(raw)}, True


def append_stream_event_txn(conn: Db, new: NewStreamEvent) -> StreamEventRecord | None:
    """Append one event under the attempt's next sequence; None once the attempt's cap is hit."""
    (last,) = conn.execute(
        "SELECT COALESCE(MAX(sequence), 0) FROM stream_events"
        " WHERE run_id = ? AND task_id = ? AND attempt = ?",
        (new.run_id, new.task_id, new.attempt),
    ).fetchone()
    if last >= MAX_EVENTS_PER_ATTEMPT:
        return None
    payload, truncated = bounded_payload(new.text)
    record = StreamEventRecord(
        run_id=new.run_id,
        task_id=new.task_id,
        attempt=new.attempt,
        sequence=int(last) + 1,
        effect_id=new.effect_id,
        provider_sequence=new.provider_sequence,
        event_type=new.event_type,
        payload=payload,
        truncated=truncated,
        created_at=new.now,
    )
    _insert_txn(conn, record)
    return record


def _insert_txn(conn: Db, record: StreamEventRecord) -> None:
    conn.execute(
        "INSERT INTO stream_events (run_id, task_id, attempt, sequence, format_version,"
        " event_type, payload_json, created_at, effect_id, provider_sequence, truncated)"
        " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (
            record.run_id,
            record.task_id,
            record.attempt,
            record.sequence,
            ROW_FORMAT_VERSION,
            record.event_type,
            dumps(record.payload),
            record.created_at,
            record.effect_id,
            record.provider_sequence,
            int(record.truncated),
        ),
    )


def list_stream_events(conn: Db, run_id: str) -> list[StreamEventRecord]:
    """A run's stream events in the order they were appended."""
    rows = fetch_all(
        conn,
        "SELECT * FROM stream_events WHERE run_id = ? ORDER BY rowid",
        (run_id,),
        "stream event",
    )
    return [
        StreamEventRecord(
            run_id=r["run_id"],
            task_id=r["task_id"],
            attempt=r["attempt"],
            sequence=r["sequence"],
            effect_id=r["effect_id"],
            provider_sequence=r["provider_sequence"],
            event_type=r["event_type"],
            payload=loads_opt(r["payload_json"]),
            truncated=bool(r["truncated"]),
            created_at=r["created_at"],
            source_run_id=r["source_run_id"],
            source_sequence=r["source_sequence"],
        )
        for r in rows
    ]


def copy_stream_events_txn(conn: Db, source_run_id: str, run_id: str) -> None:
    """A recorded replay's copy of its source's events: same rows, linked to their origin."""
    conn.execute(
        "INSERT INTO stream_events (run_id, task_id, attempt, sequence, format_version,"
        " event_type, payload_json, created_at, effect_id, provider_sequence, truncated,"
        " source_run_id, source_sequence)"
        " SELECT ?, task_id, attempt, sequence, format_version, event_type, payload_json,"
        " created_at, effect_id, provider_sequence, truncated, run_id, sequence"
        " FROM stream_events WHERE run_id = ? ORDER BY rowid",
        (run_id, source_run_id),
    )
