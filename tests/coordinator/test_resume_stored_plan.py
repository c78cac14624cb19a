"""Resume, fork and compensate drive the plan stored with the run; they never recompile.

A run is created (stored plan included) without being driven, then ``api.resume`` drives it
in-process while every way into the compiler raises. A run from before schema v4 (no stored
plan) still resumes, by compiling its stored workflow as before.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from registry_helpers import compile_text, fetch_effects

from agentctl.coordinator import api, creation, service
from agentctl.coordinator.clock import Clock
from agentctl.core.compiler import compile as compile_module
from agentctl.core.compiler import plan_to_json
from agentctl.core.compiler.stored import plan_from_stored
from agentctl.ledger import open_ledger

WORKFLOW = """
apiVersion: agentctl.dev/v1alpha1
kind: Workflow
metadata: {name: stored}
spec:
  policy: {approval: never, writableRoots: [out]}
  memory: {working: {greeting: hi}}
  actions:
    put: {kind: builtin.write}
    say: {kind: builtin.assign}
  tasks:
    - id: hello
      uses: action:say
      with: {text: "${{ memory.greeting }} there"}
    - id: save
      uses: action:put
      needs: [hello]
      with: {path: out/hello.txt, content: "${{ tasks.hello.output.output.text }}"}
  outputs:
    text: "${{ tasks.hello.output.output.text }}"
"""


def _created_run(tmp_path: Path) -> tuple[str, str]:
    """A created, never-driven run (as after a crash right after creation)."""
    document, plan = compile_text(WORKFLOW)
    db = str(tmp_path / "runtime.db")
    with open_ledger(db) as ledger:
        run_id, _trace = service.create_run(
            ledger,
            plan=plan,
            document=document,
            inputs={},
            workspace=str(tmp_path),
            clock=Clock(),
        )
    return db, run_id


def _forbid_compiling(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    calls: list[str] = []

    def refuse(name: str) -> Callable[..., Any]:
        def compiled(*_args: Any, **_kwargs: Any) -> Any:
            calls.append(name)
            raise AssertionError(f"{name} was called")

        return compiled

    monkeypatch.setattr(creation, "compile_workflow", refuse("creation.compile_workflow"))
    monkeypatch.setattr(compile_module, "flatten_tasks", refuse("compiler.flatten_tasks"))
    return calls


def test_resume_loads_the_stored_plan_and_never_compiles(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    db, run_id = _created_run(tmp_path)
    calls = _forbid_compiling(monkeypatch)
    outcome = api.resume(run_id, db=db, workspace=None, timeout_s=60)
    assert calls == []
    assert (outcome.state, outcome.output) == ("succeeded", {"text": "hi there"})
    assert (tmp_path / "out" / "hello.txt").read_text() == "hi there"


def _stored_plan(db: str, run_id: str) -> str:
    """The compiled plan text as the ledger file holds it: the run's parts, in order."""
    with sqlite3.connect(db) as conn:
        rows = conn.execute(
            "SELECT plan_text FROM run_plan_parts WHERE run_id = ? ORDER BY seq", (run_id,)
        ).fetchall()
    assert rows
    return "".join(str(r[0]) for r in rows)


def test_the_stored_plan_is_the_compiled_plan(tmp_path: Path) -> None:
    db, run_id = _created_run(tmp_path)
    assert plan_from_stored(json.loads(_stored_plan(db, run_id))) == compile_text(WORKFLOW)[1]


def test_fork_drives_the_stored_plan_and_stores_it_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    db, run_id = _created_run(tmp_path)
    api.resume(run_id, db=db, workspace=None, timeout_s=60)
    calls = _forbid_compiling(monkeypatch)
    forked = api.fork(run_id, db=db, workspace=None, timeout_s=60)
    assert calls == []
    assert forked.state == "succeeded"
    assert _stored_plan(db, forked.run_id) == _stored_plan(db, run_id)


def test_a_run_from_before_v4_resumes_by_compiling(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    db, run_id = _created_run(tmp_path)
    with sqlite3.connect(db) as conn:
        conn.execute("UPDATE run_documents SET compiled_plan_json = NULL, plan_parts = NULL")
        conn.execute("DELETE FROM run_plan_parts")
    compiled: list[Any] = []
    original = creation.compile_workflow
    monkeypatch.setattr(
        creation, "compile_workflow", lambda doc: compiled.append(doc) or original(doc)
    )
    outcome = api.resume(run_id, db=db, workspace=None, timeout_s=60)
    assert len(compiled) == 1
    assert (outcome.state, outcome.output) == ("succeeded", {"text": "hi there"})
    assert [e["operation"] for e in fetch_effects(Path(db))] == ["builtin.write"]


def test_the_printed_plan_is_derived_from_the_compiled_one(tmp_path: Path) -> None:
    db, run_id = _created_run(tmp_path)
    with sqlite3.connect(db) as conn:
        (printed,) = conn.execute("SELECT plan_json FROM run_documents").fetchone()
    assert printed == "{}"  # only the compiled plan is stored
    _document, plan = compile_text(WORKFLOW)
    with open_ledger(db) as ledger:
        run = ledger.find_run(run_id)
    assert run.plan == plan_to_json(plan)
    assert run.plan["tasks"]["save"]["needs"] == ["hello"]
