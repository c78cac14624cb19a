"""A run's compiled plan stored in parts (``ledger.plans``, schema v15), on both backends.

The plan text is cut into ``run_plan_parts`` rows of at most ``PART_CHARS`` characters, so
creating a large run never hands the database the whole plan as one value; reading joins the
parts back into exactly the text given, and a part gone is an error, never a shorter plan.
"""

from __future__ import annotations

import dataclasses
import itertools
from typing import Any

import pytest
from ledger_helpers import T0, new_run

from agentctl.core.canonical import canonical_json
from agentctl.errors import PersistenceError
from agentctl.ledger.artifacts.values import SPILL_MIN_CHARS
from agentctl.ledger.plans import PART_CHARS, PlanText
from agentctl.ledger.runs import create_run_txn, get_run, list_runs

# Many tasks of short strings (the shape of a large chain's plan), non-ASCII included, long
# enough for several parts.
PLAN = canonical_json(
    {"format": 1, "tasks": [{"id": f"t{i}", "with": {"v": f"wert ✓ {i}"}} for i in range(30_000)]}
)


def _pieces(text: str, size: int = 700) -> PlanText:
    """``text`` as pieces cut between whole tokens (after a comma), as the compiler makes."""
    cuts = [0, *(i + 1 for i in range(size, len(text), size) if text[i] == ","), len(text)]
    return PlanText(lambda: (text[a:b] for a, b in itertools.pairwise(cuts)))


def _create(ledger: Any, run_id: str, plan: str | PlanText | None = PLAN) -> None:
    run = dataclasses.replace(new_run(run_id), compiled_plan_json=plan)
    with ledger.transaction() as conn:
        create_run_txn(conn, run, ["a"], T0)


def test_a_plan_longer_than_a_part_is_stored_in_parts_and_read_back_whole(ledger: Any) -> None:
    assert len(PLAN) > 2 * PART_CHARS
    _create(ledger, "run-1")
    with ledger.read() as conn:
        assert get_run(conn, "run-1").compiled_plan_json == PLAN
        assert [r.compiled_plan_json for r in list_runs(conn)] == [PLAN]
        (inline, count) = conn.execute(
            "SELECT compiled_plan_json, plan_parts FROM run_documents WHERE run_id = ?",
            ("run-1",),
        ).fetchone()
        sizes = [
            int(r[0])
            for r in conn.execute(
                "SELECT length(plan_text) FROM run_plan_parts WHERE run_id = ? ORDER BY seq",
                ("run-1",),
            )
        ]
    assert inline is None
    assert count == len(sizes) == -(-len(PLAN) // PART_CHARS)
    assert max(sizes) <= PART_CHARS and sum(sizes) == len(PLAN)


def test_a_run_without_a_compiled_plan_has_no_parts(ledger: Any) -> None:
    _create(ledger, "run-1", plan=None)
    with ledger.read() as conn:
        assert get_run(conn, "run-1").compiled_plan_json is None
        assert conn.execute("SELECT count(*) FROM run_plan_parts").fetchone()[0] == 0


def test_a_missing_part_is_a_persistence_error(ledger: Any) -> None:
    _create(ledger, "run-1")
    with ledger.transaction() as conn:
        conn.execute("DELETE FROM run_plan_parts WHERE run_id = ? AND seq = 1", ("run-1",))
    with ledger.read() as conn, pytest.raises(PersistenceError, match="parts"):
        get_run(conn, "run-1")


def test_deleting_a_run_deletes_its_parts_and_no_other_runs(ledger: Any) -> None:
    _create(ledger, "run-1")
    _create(ledger, "run-2")
    with ledger.transaction() as conn:
        conn.execute("DELETE FROM runs WHERE run_id = ?", ("run-1",))
    with ledger.read() as conn:
        owners = {str(r[0]) for r in conn.execute("SELECT run_id FROM run_plan_parts")}
        assert owners == {"run-2"}
        assert get_run(conn, "run-2").compiled_plan_json == PLAN


def test_a_plan_given_in_pieces_is_stored_as_the_same_text(ledger: Any) -> None:
    _create(ledger, "run-1", _pieces(PLAN))
    _create(ledger, "run-2", PLAN)
    with ledger.read() as conn:
        assert get_run(conn, "run-1").compiled_plan_json == PLAN
        counts = conn.execute("SELECT plan_parts FROM run_documents ORDER BY run_id").fetchall()
    assert [r[0] for r in counts] == [-(-len(PLAN) // PART_CHARS)] * 2


@pytest.mark.parametrize("late", [False, True])
def test_a_long_literal_in_pieces_is_spilled_and_comes_back(ledger: Any, late: bool) -> None:
    """A string to store apart, found in the first stretch or after parts were written: the
    plan is stored inline, spilled (no part cuts a blob reference, which ``gc`` must see
    whole), and reading gives the text back."""
    long = "lang ✓ " * (SPILL_MIN_CHARS // 4)
    tasks: list[Any] = [{"id": f"t{i}", "v": i} for i in range(20_000)]
    tasks.insert(len(tasks) - 1 if late else 0, {"id": "big", "with": {"content": long}})
    text = canonical_json({"format": 1, "tasks": tasks})
    _create(ledger, "run-1", _pieces(text))
    with ledger.read() as conn:
        assert get_run(conn, "run-1").compiled_plan_json == text
        assert conn.execute("SELECT count(*) FROM run_plan_parts").fetchone()[0] == 0
        (stored, parts) = conn.execute(
            "SELECT compiled_plan_json, plan_parts FROM run_documents"
        ).fetchone()
    assert parts is None and long not in stored and '"$artifact"' in stored
