"""A run's stored workflow is the same row whether its creation encodes the document or takes
the text the compile made for the workflow digest (``Plan.take_document_text``), on SQLite,
on PostgreSQL and on an encrypted SQLite ledger (docs/encryption.md).

The document holds a string long enough to be stored apart as a blob (inline and sealed on an
encrypted ledger) and an object with an ``"$artifact"`` key (stored escaped), so the row is the
one ``dumps_value`` writes only if the carried text goes through the same spilling.
"""

from __future__ import annotations

import base64
import os
import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from agentctl.coordinator import api
from agentctl.core.canonical import canonical_json
from agentctl.core.compiler import compile_workflow
from agentctl.core.dsl import load_workflow
from agentctl.ledger import open_ledger
from agentctl.ledger.artifacts.values import SPILL_MIN_CHARS
from agentctl.ledger.connection import open_database
from agentctl.ledger.crypto import PREFIX
from agentctl.ledger.encryption import EncryptionChange, change_encryption
from agentctl.ledger.opening import ARTIFACTS_ENV
from tests.ledger.pg_fixture import pg_database, pg_url

__all__ = ["pg_database", "pg_url"]

WORKFLOW = """
apiVersion: agentctl.dev/v1alpha1
kind: Workflow
metadata: {name: texts}
spec:
  actions:
    say: {kind: builtin.assign}
  tasks:
    - id: a
      uses: action:say
      with: {text: LONG, note: "é", looks: {"$artifact": "not a blob"}}
"""
KEY_ENV = "AGENTCTL_TEST_CREATED_TEXT_KEY"
WHEN = "2026-01-01T00:00:00.000000Z"


def _document() -> dict[str, Any]:
    return load_workflow(WORKFLOW.replace("LONG", "x" * (SPILL_MIN_CHARS + 10))).document


def _create(db: str, workspace: Path, carried: bool) -> str:
    """Submit the run (its creation taking the compile's text if ``carried``); its id."""
    document = _document()
    plan = compile_workflow(document)
    taken = plan.take_document_text(document)
    assert taken == canonical_json(document)  # the compile does make the text for this one
    if carried:
        plan = compile_workflow(document)
    data = api.submit_run(document=document, plan=plan, inputs={}, db=db, workspace=str(workspace))
    assert plan.take_document_text(document) is None  # the creation took it (or nothing)
    return str(data["runId"])


def _rows_and_workflows(
    db: str, workspace: Path, row_of: Callable[[str], str]
) -> tuple[list[str], list[object]]:
    """The stored ``workflow_json`` and the read ``get_run().workflow`` of an encoded and a
    carried run on ledger ``db``."""
    ids = [_create(db, workspace, carried) for carried in (False, True)]
    with open_ledger(db) as ledger:
        workflows: list[object] = [ledger.get_run(run_id).workflow for run_id in ids]
    return [row_of(run_id) for run_id in ids], workflows


def _sqlite_row(db: str) -> Callable[[str], str]:
    def row_of(run_id: str) -> str:
        with sqlite3.connect(db) as conn:
            sql = "SELECT workflow_json FROM run_documents WHERE run_id = ?"
            return str(conn.execute(sql, (run_id,)).fetchone()[0])

    return row_of


def test_carried_text_is_stored_as_the_encoded_document(tmp_path: Path) -> None:
    db = str(tmp_path / "runtime.db")
    (encoded, taken), workflows = _rows_and_workflows(db, tmp_path, _sqlite_row(db))
    assert '{"$artifact":"sha256:' in encoded  # the long string was stored apart
    assert '{"$artifact":{"literal":' in encoded  # the document's own marker was escaped
    assert taken == encoded
    assert workflows == [_document(), _document()]


def test_carried_text_is_stored_as_the_encoded_document_on_postgresql(
    pg_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import psycopg

    monkeypatch.setenv(ARTIFACTS_ENV, str(tmp_path / "artifacts"))

    def row_of(run_id: str) -> str:
        with psycopg.connect(pg_url) as conn:
            sql = "SELECT workflow_json FROM run_documents WHERE run_id = %s"
            row = conn.execute(sql, (run_id,)).fetchone()
            assert row is not None
            return str(row[0])

    (encoded, taken), workflows = _rows_and_workflows(pg_url, tmp_path, row_of)
    assert '{"$artifact":"sha256:' in encoded
    assert '{"$artifact":{"literal":' in encoded
    assert taken == encoded
    assert workflows == [_document(), _document()]


def test_carried_text_is_stored_as_the_encoded_document_when_encrypted(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Sealed envelopes differ (random nonces): the decrypted column and the read document
    are compared instead, and the long string stays inline (no blob in plaintext)."""
    monkeypatch.setenv(KEY_ENV, base64.b64encode(os.urandom(32)).decode())
    db = str(tmp_path / "runtime.db")
    open_ledger(db).close()  # created and migrated, then keyed
    keyed = open_database(db)
    try:
        change_encryption(keyed, EncryptionChange("enable", "k1", KEY_ENV, WHEN))
    finally:
        keyed.close()

    def row_of(run_id: str) -> str:  # read through the key: the decrypted column
        keyed = open_database(db)
        try:
            with keyed.read() as conn:
                sql = "SELECT workflow_json FROM run_documents WHERE run_id = ?"
                return str(conn.execute(sql, (run_id,)).fetchone()[0])
        finally:
            keyed.close()

    (encoded, taken), workflows = _rows_and_workflows(db, tmp_path, row_of)
    with sqlite3.connect(db) as raw:  # without the key: both rows are sealed
        rows = raw.execute("SELECT workflow_json FROM run_documents").fetchall()
    assert len(rows) == 2 and all(str(row[0]).startswith(f"{PREFIX}k1:") for row in rows)
    assert '{"$artifact":"sha256:' not in encoded  # kept inline, sealed with its row
    assert '{"$artifact":{"literal":' in encoded
    assert taken == encoded
    assert workflows == [_document(), _document()]
