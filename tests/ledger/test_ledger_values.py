"""Large ledger values live in the artifact store once, referenced by digest (ADR 0008).

A real SQLite file and the real store beside it: long strings of content columns become one
blob each, pinned against GC; reading gives back exactly what was written; a lost or altered
blob is a clean persistence error, never a different value.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from ledger_helpers import T0, make_run, new_run, ts

from agentctl.core.canonical import canonical_json
from agentctl.core.effects import input_digest
from agentctl.core.jsonvalue import JsonValue
from agentctl.core.longterm import Entry
from agentctl.crashpoints import CRASH_ENV, CrashPoint
from agentctl.errors import PersistenceError
from agentctl.ledger import MemoryPut, NewEffect, TaskCompletion
from agentctl.ledger import longterm as lt
from agentctl.ledger.artifacts.gc import run_gc
from agentctl.ledger.artifacts.store import blob_file, open_artifact_store
from agentctl.ledger.artifacts.values import SPILL_MIN_CHARS
from agentctl.ledger.connection import Database, open_database
from agentctl.ledger.effects import finish_effect_txn, get_effect, insert_effect_txn
from agentctl.ledger.rows import loads_opt
from agentctl.ledger.runs import create_run_txn, get_run, set_run_state_txn
from agentctl.ledger.tasks import commit_tasks_txn, get_task, transition_task_txn

BIG = "big content ✓ " * (SPILL_MIN_CHARS // 8)  # non-ASCII, well over the threshold
LATER = "2024-07-01T12:00:00.000Z"  # every lease expired: GC would take anything unpinned


def _digest(text: str) -> str:
    return "sha256:" + hashlib.sha256(text.encode("utf-8")).hexdigest()


def _write_effect(request: JsonValue) -> NewEffect:
    return NewEffect(
        run_id="run-1",
        task_id="a",
        attempt=1,
        ordinal=0,
        operation="builtin.write",
        request=request,
        effect_class="workspace_mutate",
        risk="medium",
        idempotency="idempotent",
        trace_id="trace-1",
    )


def _record_write(ledger: Database, request: JsonValue, output: JsonValue) -> str:
    """One write effect and its task, as the coordinator records them, plus the run output."""
    make_run(ledger)
    effect = _write_effect(request)
    with ledger.transaction() as conn:
        transition_task_txn(conn, "run-1", "a", "ready", ts(1))
        transition_task_txn(conn, "run-1", "a", "running", ts(2), attempt=1)
        eid = insert_effect_txn(conn, effect, ts(3))
        conn.execute("UPDATE effects SET status = 'started' WHERE effect_id = ?", (eid,))
        finish_effect_txn(conn, eid, "succeeded", ts(4), result=output)
        commit_tasks_txn(
            conn, "run-1", [TaskCompletion("a", "succeeded", 1, output=output)], None, ts(5)
        )
        set_run_state_txn(conn, "run-1", "succeeded", ts(6), output={"a": output})
    return eid


def _column_bytes(db: Path) -> int:
    """Total length of every JSON column holding user content, as stored."""
    raw = sqlite3.connect(db)
    try:
        sql = """SELECT
            (SELECT SUM(LENGTH(request_json) + IFNULL(LENGTH(result_json), 0)) FROM effects)
          + (SELECT SUM(IFNULL(LENGTH(output_json), 0)) FROM task_states)
          + (SELECT SUM(IFNULL(LENGTH(output_json), 0) + LENGTH(inputs_json)) FROM runs)"""
        return int(raw.execute(sql).fetchone()[0])
    finally:
        raw.close()


@pytest.mark.sqlite_only  # reads the stored row text through sqlite3
def test_a_long_string_is_stored_once_and_read_back_exactly(
    ledger: Database, db_path: Path
) -> None:
    request: JsonValue = {"path": "out/big.txt", "content": BIG}
    output: JsonValue = {"status": "changed", "after": BIG, "before": None, "path": "out/big.txt"}
    eid = _record_write(ledger, request, output)

    with ledger.read() as conn:
        effect = get_effect(conn, eid)
        assert effect.request == request and effect.result == output
        assert effect.input_digest == input_digest(request)  # identity over the real value
        assert get_task(conn, "run-1", "a").output == output
        assert get_run(conn, "run-1").output == {"a": output}
        pinned = [r[0] for r in conn.execute("SELECT digest FROM value_blobs")]
    assert pinned == [_digest(BIG)]
    root = db_path.parent / "artifacts"
    blobs = [p for p in (root / "sha256").rglob("*") if p.is_file()]
    assert blobs == [blob_file(root, _digest(BIG))]
    assert blobs[0].read_bytes() == BIG.encode("utf-8")
    # Four rows name the content; the database holds none of it.
    assert _column_bytes(db_path) < 2000 < len(BIG)


def test_pinned_values_survive_garbage_collection(ledger: Database, db_path: Path) -> None:
    _record_write(ledger, {"content": BIG}, {"after": BIG})
    report = run_gc(open_artifact_store(ledger), LATER)
    assert report["report"]["blobs"] == []
    with ledger.read() as conn:
        assert get_task(conn, "run-1", "a").output == {"after": BIG}


def test_user_objects_that_look_like_references_round_trip(ledger: Database) -> None:
    lookalike = {"$artifact": _digest("x"), "bytes": 1}
    nested: JsonValue = {
        "plain": lookalike,
        "deep": [{"$artifact": {"literal": {"k": 1}}}, {"$artifact": "not a digest"}],
        "big": BIG,
    }
    make_run(ledger)
    with ledger.transaction() as conn:
        transition_task_txn(conn, "run-1", "a", "ready", ts(1))
        transition_task_txn(conn, "run-1", "a", "running", ts(2), attempt=1)
        done = TaskCompletion("a", "succeeded", 1, output=nested)
        commit_tasks_txn(conn, "run-1", [done], None, ts(3))
    with ledger.read() as conn:
        assert get_task(conn, "run-1", "a").output == nested


@pytest.mark.sqlite_only  # reads the stored row text through sqlite3
def test_short_values_stay_inline(ledger: Database, db_path: Path) -> None:
    short = "s" * (SPILL_MIN_CHARS - 100)
    _record_write(ledger, {"content": short}, {"after": short})
    raw = sqlite3.connect(db_path)
    (text,) = raw.execute("SELECT output_json FROM task_states WHERE task_id = 'a'").fetchone()
    assert raw.execute("SELECT COUNT(*) FROM value_blobs").fetchone()[0] == 0
    raw.close()
    assert short in text
    assert not (db_path.parent / "artifacts" / "sha256").exists()


@pytest.mark.sqlite_only  # reads the stored row text through sqlite3
def test_a_missing_blob_is_a_persistence_error(ledger: Database, db_path: Path) -> None:
    _record_write(ledger, {"content": BIG}, {"after": BIG})
    blob = blob_file(db_path.parent / "artifacts", _digest(BIG))
    os.chmod(blob, 0o600)
    blob.unlink()
    fresh = open_database(db_path, verify=False)
    try:
        missing = r"ledger value sha256:\w+ is missing"
        with pytest.raises(PersistenceError, match=missing) as info, fresh.read() as conn:
            get_task(conn, "run-1", "a")
        assert "backup" in info.value.data["hint"]
    finally:
        fresh.close()


def test_an_altered_blob_is_refused(ledger: Database, db_path: Path) -> None:
    _record_write(ledger, {"content": BIG}, {"after": BIG})
    blob = blob_file(db_path.parent / "artifacts", _digest(BIG))
    os.chmod(blob, 0o600)
    blob.write_bytes(BIG.replace("✓", "x", 1).encode("utf-8"))
    with pytest.raises(PersistenceError, match="does not match its digest"), ledger.read() as conn:
        get_task(conn, "run-1", "a")


def test_a_damaged_blob_is_rewritten_when_the_value_is_stored_again(
    ledger: Database, db_path: Path
) -> None:
    _record_write(ledger, {"content": BIG}, {"after": BIG})
    blob = blob_file(db_path.parent / "artifacts", _digest(BIG))
    os.chmod(blob, 0o600)
    blob.write_bytes(b"garbage")
    make_run(ledger, "run-2")
    with ledger.transaction() as conn:
        set_run_state_txn(conn, "run-2", "succeeded", T0, output={"again": BIG})
    with ledger.read() as conn:
        assert get_run(conn, "run-2").output == {"again": BIG}
        assert get_task(conn, "run-1", "a").output == {"after": BIG}


@pytest.mark.sqlite_only  # reads the stored row text through sqlite3
def test_a_stored_plan_text_with_a_long_literal_comes_back_as_the_same_text(
    ledger: Database, db_path: Path
) -> None:
    plan_text = canonical_json({"tasks": [{"id": "save", "with": {"content": BIG}}]})
    run = dataclasses.replace(new_run("run-p"), compiled_plan_json=plan_text)
    with ledger.transaction() as conn:
        create_run_txn(conn, run, ["save"], T0)
    with ledger.read() as conn:
        assert get_run(conn, "run-p").compiled_plan_json == plan_text
    raw = sqlite3.connect(db_path)
    (stored,) = raw.execute("SELECT compiled_plan_json FROM run_documents").fetchone()
    raw.close()
    assert len(stored) < 1000


@pytest.mark.sqlite_only  # reads the stored row text through sqlite3
def test_escaped_long_strings_move_and_many_short_ones_stay(
    ledger: Database, db_path: Path
) -> None:
    quoted = '{"k": "v\\\\\\"", "n": "\\n"}' * 4000  # JSON as text: quotes and escapes
    short = [f"s{i}" * 40 for i in range(3000)]  # 300 KB of row, no string long enough
    assert len(quoted) >= SPILL_MIN_CHARS
    _record_write(ledger, {"content": quoted}, {"after": quoted, "short": short})
    with ledger.read() as conn:
        assert get_task(conn, "run-1", "a").output == {"after": quoted, "short": short}
    raw = sqlite3.connect(db_path)
    (text,) = raw.execute("SELECT output_json FROM task_states WHERE task_id = 'a'").fetchone()
    (pins,) = raw.execute("SELECT COUNT(*) FROM value_blobs").fetchone()
    raw.close()
    assert pins == 1 and text.count('"$artifact"') == 1
    assert short[-1] in text


_INGEST = """
import sys
from agentctl.ledger.artifacts.store import open_artifact_store
from agentctl.ledger.connection import open_database

print(open_artifact_store(open_database(sys.argv[1])).ingest(sys.argv[2], sys.argv[3]).digest)
"""


def test_a_file_holding_a_stored_value_is_ingested_without_a_copy(
    ledger: Database, db_path: Path, tmp_path: Path
) -> None:
    """The write's file is the value's bytes: ingestion must not copy them again. It would
    pass the crash point after the temporary copy, which kills the process."""
    _record_write(ledger, {"content": BIG}, {"after": BIG})
    written = tmp_path / "big.txt"
    written.write_text(BIG, encoding="utf-8")
    env = {**os.environ, CRASH_ENV: CrashPoint.ARTIFACT_AFTER_TMP_WRITE.value}
    args = [sys.executable, "-c", _INGEST, str(db_path), str(written), ts(9)]
    done = subprocess.run(args, env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == _digest(BIG)


@pytest.mark.sqlite_only  # reads the stored row text through sqlite3
def test_a_long_term_memory_value_is_stored_apart_and_read_back(
    ledger: Database, db_path: Path
) -> None:
    put = MemoryPut("ns", "doc", Entry({"body": BIG}, "a short searchable text", {}))
    with ledger.transaction() as conn:
        lt.put_txn(conn, put, T0)
    with ledger.read() as conn:
        assert lt.get_entry(conn, "ns", "doc", ts(1)).value == {"body": BIG}
        assert [c.value for c in lt.candidates(conn, "ns", ts(1))] == [{"body": BIG}]
    raw = sqlite3.connect(db_path)
    (stored,) = raw.execute("SELECT value_json FROM long_term_memory").fetchone()
    raw.close()
    assert len(stored) < 200


@pytest.mark.parametrize("threshold", [8, 9, 64])
def test_the_long_string_screen_finds_every_long_quote_free_stretch(
    monkeypatch: pytest.MonkeyPatch, threshold: int
) -> None:
    """The windowed screen answers as the definition does: some stretch between quotes
    (escape pairs masked) is ``threshold`` characters or longer."""
    import random

    from agentctl.ledger.artifacts import values

    monkeypatch.setattr(values, "SPILL_MIN_CHARS", threshold)
    rng = random.Random(threshold)
    for _ in range(3000):
        size = rng.randrange(0, 6 * threshold)
        text = "".join(rng.choice('ab"\\\\') if rng.random() < 0.3 else "x" for _ in range(size))
        masked = text.replace("\\\\", "__").replace('\\"', "__")
        expected = len(text) >= threshold and max(map(len, masked.split('"'))) >= threshold
        assert values._may_hold_long_string(text) == expected, text


# Canonical texts, texts with space around them, and damaged ones.
_STORED_TEXTS = [
    '{"a":[1,2.5,null,true],"b":"\\u00e9\u2028"}',
    '"x"',
    "-0",
    "1e400",
    "NaN",
    "Infinity",
    '" "',
    ' {"a":1}',
    '{"a":1}\n',
    '{"a":1}x',
    "",
    "  ",
    '"\\x"',
    "9" * 5000,
    '{"a":}',
    "[1,2",
]


@pytest.mark.parametrize("text", _STORED_TEXTS)
def test_a_json_column_reads_as_json_loads_does(text: str) -> None:
    """``loads_opt`` reads a stored text by the C scanner when it holds one whole value and by
    ``json.loads`` otherwise: the same value, and the same failure as corrupt state."""
    try:
        expected: object = json.loads(text)
    except ValueError as exc:
        with pytest.raises(PersistenceError, match="corrupt state") as caught:
            loads_opt(text)
        assert str(exc) in str(caught.value)
        return
    got = loads_opt(text)
    if isinstance(expected, float) and math.isnan(expected):
        assert isinstance(got, float) and math.isnan(got)
    else:
        assert got == expected and type(got) is type(expected)
