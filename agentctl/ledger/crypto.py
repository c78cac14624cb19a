"""Column encryption at rest: the envelope codec and the SQL that enforces it (ADR 0010).

Job: seal the sensitive columns (``SENSITIVE``) of an encrypted ledger in AES-256-GCM
envelopes ``agentctl.encrypted.v1:<keyId>:<base64 nonce|ciphertext|tag>`` and open them again
as rows are read, so no ledger module above this one knows encryption exists.

Invariants:
- the associated data binds ``table``, ``column`` and the key id, so an envelope moved to another
  column (or relabelled with another key id) fails to open instead of being read as that column;
- once enabled (a ``state_encryption`` row), triggers on every sensitive table are the one write
  path that matters: a plaintext value written by any statement is replaced, in the same
  statement, by its envelope (``agentctl_seal``, registered only on connections that hold the
  key — any other writer fails with "no such function"), and an envelope under any key id but
  the database's is refused (``RAISE(ABORT)``). ``secure_delete`` zeroes the replaced bytes;
- the key never reaches the database: only its id, the name of the variable that held it and
  a check envelope (a known text sealed under it) are recorded, so a wrong key is told from a
  missing one before any row is read;
- a connection that cannot open the database's key fails with ``PersistenceError`` (exit 5)
  naming the key id and the variable it looked in, before migrations or any write.
"""

from __future__ import annotations

import base64
import binascii
import functools
import os
import re
import sqlite3
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from agentctl.errors import PersistenceError, ValidationError
from agentctl.ledger.sql import SqlParam

if TYPE_CHECKING:
    from sqlite3 import _Parameters

    from cryptography.hazmat.primitives.ciphers.aead import AESGCM

PREFIX = "agentctl.encrypted.v1:"
# Names a variable holding the key, overriding the one recorded in the database (for a run
# whose environment names the key differently, e.g. after moving the database to another host).
KEY_ENV_OVERRIDE = "AGENTCTL_DB_KEY_ENV"
SEAL_FUNCTION = "agentctl_seal"
_KEY_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")
_NONCE_BYTES = 12
_CHECK_TEXT = "agentctl key check"
_CHECK_AT = ("state_encryption", "key_check")

# Every column that can hold user data, outputs, effect requests/results, memory, stream
# fragments, approval payloads, audit details or error texts (docs/encryption.md lists why).
SENSITIVE: Mapping[str, tuple[str, ...]] = {
    "runs": (
        "workflow_json",
        "plan_json",
        "compiled_plan_json",
        "inputs_json",
        "working_memory_json",
        "output_json",
        "reason",
    ),
    "run_documents": ("workflow_json", "plan_json", "compiled_plan_json"),
    "run_plan_parts": ("plan_text",),
    "task_states": (
        "output_json",
        "error",
        "state_delta_json",
        "artifact_manifest_json",
        "decision_json",
    ),
    "effects": ("request_json", "result_json", "error"),
    "approvals": ("redacted_input_json", "expected_effect", "reason", "resolution_reason"),
    "checkpoints": ("state_json",),
    "audit_events": ("payload_json",),
    "effect_reconciliations": ("reason", "evidence_json", "result_json"),
    "provider_sessions": ("state_json",),
    "tool_calls": ("input_json", "output_json", "error"),
    "stream_events": ("payload_json",),
    "long_term_memory": ("value_json", "text", "metadata_json", "vector_json"),
    "protocol_calls": ("detail",),
}


@dataclass(frozen=True)
class KeyState:
    """The ``state_encryption`` row: which key seals the database, never the key itself."""

    key_id: str
    key_env: str
    key_check: str


@dataclass(frozen=True)
class ColumnKey:
    """The key that seals and opens a ledger's encrypted columns, with its id."""

    key_id: str
    env: str
    aead: AESGCM


def check_key_id(key_id: str) -> str:
    """Key ids go into envelopes and trigger text, so only a safe alphabet is accepted."""
    if not _KEY_ID.fullmatch(key_id):
        raise ValidationError(
            f"key id {key_id!r} must be 1-64 letters, digits, '.', '_' or '-' "
            "(starting with a letter or digit)"
        )
    return key_id


def load_key(key_id: str, env: str, *, new: bool = False) -> ColumnKey:
    """The key ``key_id`` from variable ``env``: base64 of exactly 32 bytes. ``new``: a key
    being introduced (``enable``/``rotate``), not the one the database is sealed under; it is
    the operator's input, so its id is checked first, with the key (exit 2 for either)."""
    from cryptography.hazmat.primitives.ciphers.aead import AESGCM

    if new:
        check_key_id(key_id)
    if new and not env:
        raise ValidationError("--key-env must name the environment variable holding the key")
    text = os.environ.get(env)
    if not text and new:
        state = "is not set" if text is None else "is set but empty"
        raise ValidationError(f"the new key {key_id!r} is read from {env}, which {state}")
    if not text:
        raise PersistenceError(
            f"the database is encrypted under key {key_id!r}; set {env} to that key "
            f"(base64 of 32 bytes), or {KEY_ENV_OVERRIDE} to the name of a variable holding it"
        )
    try:
        raw = base64.b64decode(text.strip(), validate=True)
    except (binascii.Error, ValueError):
        raw = b""
    if len(raw) != 32:
        # A key being introduced is the operator's input (exit 2); the key a database is
        # sealed under that cannot be used means the database cannot be opened (exit 5).
        problem = ValidationError if new else PersistenceError
        raise problem(f"{env} (key {key_id!r}) is not base64 of 32 bytes")
    return ColumnKey(key_id, env, AESGCM(raw))


def _aad(table: str, column: str, key_id: str) -> bytes:
    return f"{PREFIX}{table}.{column}:{key_id}".encode()


def seal(key: ColumnKey, table: str, column: str, plaintext: str) -> str:
    nonce = os.urandom(_NONCE_BYTES)
    sealed = key.aead.encrypt(nonce, plaintext.encode(), _aad(table, column, key.key_id))
    return f"{PREFIX}{key.key_id}:{base64.b64encode(nonce + sealed).decode('ascii')}"


def envelope_key_id(value: str) -> str:
    return value[len(PREFIX) :].split(":", 1)[0]


def try_open(key: ColumnKey, table: str, column: str, envelope: str) -> str | None:
    """The plaintext of ``envelope`` sealed for ``table.column`` under ``key``; None if not."""
    from cryptography.exceptions import InvalidTag

    key_id, _, body = envelope[len(PREFIX) :].partition(":")
    if key_id != key.key_id:
        return None
    try:
        raw = base64.b64decode(body, validate=True)
        opened = key.aead.decrypt(
            raw[:_NONCE_BYTES], raw[_NONCE_BYTES:], _aad(table, column, key_id)
        )
    except (InvalidTag, binascii.Error, ValueError):
        return None
    return opened.decode()


def key_check(key: ColumnKey) -> str:
    return seal(key, *_CHECK_AT, _CHECK_TEXT)


def opens(key: ColumnKey, state: KeyState) -> bool:
    """Whether ``key`` is the key that encrypts the database ``state`` describes."""
    return try_open(key, *_CHECK_AT, state.key_check) == _CHECK_TEXT


def same_secret(key: ColumnKey, state: KeyState) -> bool:
    """Whether ``key``'s bytes, whatever id it is given, are those of the database's key."""
    return opens(replace(key, key_id=state.key_id), state)


def verify_key(key: ColumnKey, state: KeyState) -> None:
    if not opens(key, state):
        raise PersistenceError(
            f"the key in {key.env} is not key {state.key_id!r} that encrypts this database "
            f"(wrong key); set {key.env} to key {state.key_id!r}"
        )


def read_state(conn: sqlite3.Connection) -> KeyState | None:
    """The database's key state; None when it is not encrypted (or predates the table)."""
    has_table = conn.execute(
        "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'state_encryption'"
    ).fetchone()
    if has_table is None:
        return None
    row = conn.execute("SELECT key_id, key_env, key_check FROM state_encryption").fetchone()
    return None if row is None else KeyState(str(row[0]), str(row[1]), str(row[2]))


def key_for(state: KeyState) -> ColumnKey:
    """The database's key, from the override variable's target or the recorded variable."""
    key = load_key(state.key_id, os.environ.get(KEY_ENV_OVERRIDE) or state.key_env)
    verify_key(key, state)
    return key


class ColumnCodec:
    """Seals for the triggers, opens for the row factory; ``previous`` only during rotate."""

    def __init__(self, current: ColumnKey, previous: ColumnKey | None = None) -> None:
        self.current = current
        self.previous = previous
        self.failure: PersistenceError | None = None

    def seal_value(self, table: str, column: str, value: SqlParam) -> SqlParam:
        """``agentctl_seal``: plaintext → envelope; envelopes (checked by triggers) unchanged."""
        if value is None or (isinstance(value, str) and value.startswith(PREFIX)):
            return value
        return seal(self.current, table, column, str(value))

    def reseal_value(self, table: str, column: str, value: SqlParam) -> SqlParam:
        """``agentctl_reseal`` (rotate): the previous key's envelope → the current key's."""
        if not isinstance(value, str) or not value.startswith(PREFIX):
            return self.seal_value(table, column, value)
        try:
            return seal(self.current, table, column, self.open_value(value, ((table, column),)))
        except PersistenceError as exc:
            self.failure = exc  # SQLite reports only "user-defined function raised exception"
            raise

    def open_value(self, envelope: str, places: tuple[tuple[str, str], ...]) -> str:
        keys = (self.current,) if self.previous is None else (self.current, self.previous)
        for key in keys:
            for table, column in places:
                opened = try_open(key, table, column, envelope)
                if opened is not None:
                    return opened
        where = " or ".join(f"{t}.{c}" for t, c in places) or "an unknown column"
        raise PersistenceError(
            f"a value read from {where} does not open under key {self.current.key_id!r} "
            f"(it is under key {envelope_key_id(envelope)!r}, corrupt, or moved from another "
            "column)"
        )

    def decode_row(self, cursor: sqlite3.Cursor, values: tuple[object, ...]) -> sqlite3.Row:
        """The row factory: every envelope in ``values`` opened for the column it came from."""
        # Only sensitive tables hold sealed values (``state_encryption``'s key check is read
        # sealed, and verified by ``verify_key``).
        tables = tables_of(getattr(cursor, "sql", ""))
        if tables and any(isinstance(v, str) and v.startswith(PREFIX) for v in values):
            names = [d[0] for d in cursor.description]
            values = tuple(
                self.open_value(v, places_of(tables, name))
                if isinstance(v, str) and v.startswith(PREFIX)
                else v
                for v, name in zip(values, names, strict=True)
            )
        return sqlite3.Row(cursor, values)


@functools.lru_cache(maxsize=512)
def tables_of(sql: str) -> tuple[str, ...]:
    """The sensitive tables a statement reads (``FROM``/``JOIN``/``UPDATE``/``INTO``)."""
    found = re.findall(r"\b(?:FROM|JOIN|UPDATE|INTO)\s+\"?(\w+)", sql, flags=re.IGNORECASE)
    return tuple(dict.fromkeys(t for t in found if t in SENSITIVE))


@functools.lru_cache(maxsize=1024)
def places_of(tables: tuple[str, ...], name: str) -> tuple[tuple[str, str], ...]:
    """Where a result column named ``name`` may come from: the statement's tables having such a
    column, else (an alias) any sensitive column of those tables."""
    exact = tuple((t, name) for t in tables if name in SENSITIVE[t])
    if not exact and name.startswith("doc_") and "run_documents" in tables:
        # ``runs.py`` reads a run's documents as ``doc_<column>`` beside ``runs.*``.
        exact = (("run_documents", name.removeprefix("doc_")),)
    return exact or tuple((t, c) for t in tables for c in SENSITIVE[t])


class _SqlCursor(sqlite3.Cursor):
    """A cursor that remembers its statement, so the row factory knows the tables it reads."""

    sql = ""

    def execute(self, sql: str, parameters: _Parameters = (), /) -> _SqlCursor:
        self.sql = sql
        super().execute(sql, parameters)
        return self


class LedgerConnection(sqlite3.Connection):
    """The ledger's connection class: plain sqlite3 until :func:`attach` gives it a codec (and
    makes it a ``_SealedConnection``). No Python runs in a plain ledger's ``execute``: it is
    called about ten times per effect step."""

    codec: ColumnCodec | None = None


class _SealedConnection(LedgerConnection):
    """A connection holding the key: its cursors remember their statement for the row factory."""

    def execute(self, sql: str, parameters: _Parameters = (), /) -> sqlite3.Cursor:
        return self.cursor(_SqlCursor).execute(sql, parameters)


def attach(conn: sqlite3.Connection, codec: ColumnCodec) -> None:
    """Make ``conn`` seal on write (the triggers' function) and open on read."""
    if not isinstance(conn, LedgerConnection):
        raise TypeError("encrypted ledgers need a LedgerConnection")
    conn.codec = codec
    conn.__class__ = _SealedConnection  # same layout: only ``execute`` differs
    conn.create_function(SEAL_FUNCTION, 3, codec.seal_value)
    conn.create_function("agentctl_reseal", 3, codec.reseal_value)
    conn.row_factory = codec.decode_row
    # Replaced plaintext is zeroed, not left in free space; temp files stay in memory.
    conn.execute("PRAGMA secure_delete = ON")
    conn.execute("PRAGMA temp_store = MEMORY")


def detach(conn: sqlite3.Connection) -> None:
    """Back to a plain connection (an ``enable`` that rolled back)."""
    if isinstance(conn, LedgerConnection):
        conn.codec = None
        conn.__class__ = LedgerConnection
    conn.row_factory = sqlite3.Row


def attach_if_encrypted(conn: sqlite3.Connection) -> KeyState | None:
    """Open the database's key onto ``conn`` if it is encrypted (exit 5 if the key is not
    there or is not the database's); None for a plain database."""
    state = read_state(conn)
    if state is not None:
        attach(conn, ColumnCodec(key_for(state)))
    return state
