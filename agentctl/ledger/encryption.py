"""``db encryption inventory|enable|rotate``: what is sealed under which key, and changing it.

Invariants:
- ``enable`` and ``rotate`` are each one transaction: the key row, the triggers and every
  sensitive value change together or not at all; ``dry_run`` counts what would change and
  writes nothing;
- after either commits, the WAL is checkpointed and truncated, so frames holding the values
  as they were (plaintext, or the old key's envelopes) do not outlive the change;
- the inventory is computed in SQL over the stored text (prefix and key id only), so it needs
  no key and never opens an envelope;
- neither changes anything while a live process drives a run (exit 5): that process opened
  the database under the previous key state, so its next write would be refused by the
  triggers and the effect it had just executed would be left uncertain.
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass, field

from agentctl.core.jsonvalue import JsonObject
from agentctl.errors import OwnershipError, PersistenceError, ValidationError
from agentctl.ledger import crypto, leases
from agentctl.ledger.connection import Database
from agentctl.ledger.crypto import PREFIX, SENSITIVE, ColumnCodec, ColumnKey

_STALE = "agentctl: a column value is encrypted under another key than the database key"


@dataclass(frozen=True)
class EncryptionChange:
    """``enable`` (action) or ``rotate`` to key ``key_id`` read from variable ``key_env``."""

    action: str  # "enable" | "rotate"
    key_id: str
    key_env: str
    now: str
    dry_run: bool = False


@dataclass(frozen=True)
class ColumnCount:
    """How many values of one sensitive column are plaintext or sealed, by key id."""

    table: str
    column: str
    plaintext: int
    encrypted: dict[str, int] = field(default_factory=dict)  # key id → values

    def to_json(self) -> JsonObject:
        return {
            "table": self.table,
            "column": self.column,
            "plaintext": self.plaintext,
            "encrypted": dict(self.encrypted),
        }


@dataclass(frozen=True)
class EncryptionReport:
    """A ledger's encryption inventory, or what enabling or rotating changed."""

    key_id: str | None
    key_env: str | None
    columns: tuple[ColumnCount, ...]
    action: str = "inventory"
    changed: int = 0  # values (re)sealed, or that would be with dry_run
    dry_run: bool = False

    def to_json(self) -> JsonObject:
        return {
            "action": self.action,
            "encrypted": self.key_id is not None,
            "keyId": self.key_id,
            "keyEnv": self.key_env,
            "dryRun": self.dry_run,
            "changed": self.changed,
            "columns": [c.to_json() for c in self.columns],
        }


def _count(conn: sqlite3.Connection, table: str, column: str) -> ColumnCount:
    n = len(PREFIX)
    rows = conn.execute(
        f"SELECT CASE WHEN substr({column}, 1, {n}) = ?"
        f" THEN substr({column}, {n + 1}, instr(substr({column}, {n + 1}), ':') - 1)"
        f" ELSE '' END AS k, count(*) FROM {table} WHERE {column} IS NOT NULL GROUP BY k",
        (PREFIX,),
    ).fetchall()
    found = {str(r[0]): int(r[1]) for r in rows}
    return ColumnCount(table, column, found.pop("", 0), found)


def inventory(conn: sqlite3.Connection, action: str = "inventory") -> EncryptionReport:
    state = crypto.read_state(conn)
    columns = tuple(_count(conn, t, c) for t, cs in SENSITIVE.items() for c in cs)
    return EncryptionReport(
        state.key_id if state else None, state.key_env if state else None, columns, action
    )


def _triggers(table: str, columns: tuple[str, ...], key_id: str) -> tuple[str, ...]:
    """Refuse envelopes under another key (before), seal plaintext in place (after)."""
    current = f"{PREFIX}{key_id}:*"
    stale = " OR ".join(
        f"(NEW.{c} GLOB '{PREFIX}*' AND NEW.{c} NOT GLOB '{current}')" for c in columns
    )
    plain = " OR ".join(f"(NEW.{c} IS NOT NULL AND NEW.{c} NOT GLOB '{PREFIX}*')" for c in columns)
    sealed = ", ".join(f"{c} = {crypto.SEAL_FUNCTION}('{table}', '{c}', {c})" for c in columns)
    of = ", ".join(columns)
    name = f"agentctl_crypt_{table}"
    return (
        f"CREATE TRIGGER {name}_stale_insert BEFORE INSERT ON {table} WHEN {stale}"
        f" BEGIN SELECT RAISE(ABORT, '{_STALE} {key_id}'); END",
        f"CREATE TRIGGER {name}_stale_update BEFORE UPDATE OF {of} ON {table} WHEN {stale}"
        f" BEGIN SELECT RAISE(ABORT, '{_STALE} {key_id}'); END",
        f"CREATE TRIGGER {name}_seal_insert AFTER INSERT ON {table} WHEN {plain}"
        f" BEGIN UPDATE {table} SET {sealed} WHERE rowid = NEW.rowid; END",
        f"CREATE TRIGGER {name}_seal_update AFTER UPDATE OF {of} ON {table} WHEN {plain}"
        f" BEGIN UPDATE {table} SET {sealed} WHERE rowid = NEW.rowid; END",
    )


def _replace_triggers(conn: sqlite3.Connection, key_id: str) -> None:
    old = conn.execute(
        "SELECT name FROM sqlite_master WHERE type = 'trigger' AND name LIKE 'agentctl_crypt_%'"
    ).fetchall()
    for (name,) in old:
        conn.execute(f"DROP TRIGGER {name}")
    for table, columns in SENSITIVE.items():
        for statement in _triggers(table, columns, key_id):
            conn.execute(statement)


def _reseal_all(conn: sqlite3.Connection) -> None:
    """Every non-NULL sensitive value through ``agentctl_reseal``: plaintext and the previous
    key's envelopes come out under the current key."""
    for table, columns in SENSITIVE.items():
        sets = ", ".join(f"{c} = agentctl_reseal('{table}', '{c}', {c})" for c in columns)
        where = " OR ".join(f"{c} IS NOT NULL" for c in columns)
        conn.execute(f"UPDATE {table} SET {sets} WHERE {where}")


def _foreign_envelopes(before: EncryptionReport) -> None:
    """Refuse to reseal values under a key id that is not the database's: no key opens them."""
    for c in before.columns:
        strangers = sorted(k for k in c.encrypted if k != before.key_id)
        if strangers:
            raise PersistenceError(
                f"{c.table}.{c.column} holds values encrypted under key {strangers[0]!r}, which "
                "is not this database's key; restore the database from a backup"
            )


# ``db encryption`` on a server database: refused before it is opened (``cli_encryption``)
# and by the PostgreSQL ledger itself.
ENCRYPTION_UNSUPPORTED = (
    "db encryption is not supported on a PostgreSQL ledger: agentctl's column encryption is "
    "built on SQLite triggers; use the server's encryption at rest (docs/operations.md, "
    "PostgreSQL)"
)


def _check_change(change: EncryptionChange, state: crypto.KeyState | None) -> None:
    crypto.check_key_id(change.key_id)
    if change.action == "enable" and state is not None:
        raise ValidationError(
            f"the database is already encrypted under key {state.key_id!r}; use "
            "`db encryption rotate` to change the key"
        )
    if change.action == "rotate" and state is None:
        raise ValidationError("the database is not encrypted; use `db encryption enable`")
    if change.action == "rotate" and state is not None and state.key_id == change.key_id:
        raise ValidationError(f"rotate needs a new key id; {change.key_id!r} is the current one")


def _write_state(conn: sqlite3.Connection, key: ColumnKey, now: str, enabling: bool) -> None:
    conn.execute(
        "INSERT INTO state_encryption (id, key_id, key_env, key_check, enabled_at, rotated_at)"
        " VALUES (1, ?, ?, ?, ?, NULL) ON CONFLICT (id) DO UPDATE SET key_id = excluded.key_id,"
        " key_env = excluded.key_env, key_check = excluded.key_check, rotated_at = ?",
        (key.key_id, key.env, crypto.key_check(key), now, None if enabling else now),
    )


def _refuse_driven_runs(conn: sqlite3.Connection, change: EncryptionChange) -> None:
    """Refuse while a live process drives a run. Checked inside the write transaction, so no
    run can take a lease between this check and the commit."""
    rows = conn.execute(
        "SELECT run_id FROM runs WHERE owner_pid IS NOT NULL AND state IN ('running', 'paused')"
    ).fetchall()
    live = [str(r[0]) for r in rows if leases.has_live_owner(conn, str(r[0]), change.now)]
    if live:
        raise OwnershipError(
            f"run {live[0]} is being driven by a live agentctl process"
            f"{f' ({len(live)} runs in all)' if len(live) > 1 else ''}; {change.action} "
            "encryption once no run is executing (let it finish, or `agentctl cancel` it)"
        )


def _reseal_in_one_transaction(db: Database, change: EncryptionChange, key: ColumnKey) -> None:
    """State row, triggers and every value under ``key``, committed together; the connection
    holds the previous key too for this transaction only, and gets it back on failure."""
    old = db.conn.codec if isinstance(db.conn, crypto.LedgerConnection) else None
    both = ColumnCodec(key, old.current if old else None)
    crypto.attach(db.conn, both)
    try:
        with db.transaction() as conn:
            _refuse_driven_runs(conn, change)
            _write_state(conn, key, change.now, change.action == "enable")
            _replace_triggers(conn, key.key_id)
            _reseal_all(conn)
    except BaseException as exc:
        if old is not None:
            crypto.attach(db.conn, old)
        else:
            crypto.detach(db.conn)
        if both.failure is not None:
            raise both.failure from exc
        raise
    crypto.attach(db.conn, ColumnCodec(key))


def change_encryption(db: Database, change: EncryptionChange) -> EncryptionReport:
    """``enable`` or ``rotate`` in one transaction (or, with ``dry_run``, only count)."""
    with db.read() as conn:
        state = crypto.read_state(conn)
        _check_change(change, state)
        before = inventory(conn, change.action)
    _foreign_envelopes(before)
    key = crypto.load_key(change.key_id, change.key_env, new=True)
    if state is not None and crypto.same_secret(key, state):
        # A new id for the same bytes would leave the database open to the "old" key.
        raise ValidationError(
            f"the key in {change.key_env} is the current key {state.key_id!r}; rotate needs "
            "a new key (nothing was changed)"
        )
    # Every value not already under the new key changes (plaintext and old envelopes).
    changed = sum(c.plaintext + sum(c.encrypted.values()) for c in before.columns)
    if change.dry_run:
        return EncryptionReport(
            before.key_id, before.key_env, before.columns, change.action, changed, True
        )
    _reseal_in_one_transaction(db, change, key)
    db.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    with db.read() as conn:
        after = inventory(conn, change.action)
    return EncryptionReport(after.key_id, after.key_env, after.columns, change.action, changed)
