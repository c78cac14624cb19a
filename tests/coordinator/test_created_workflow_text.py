"""A run's stored workflow is the same row whether its creation encodes the document or takes
the text the compile made for the workflow digest (``Plan.take_document_text``).

The document holds a string long enough to be stored apart as a blob, so the row is the one
``dumps_value`` writes only if the carried text goes through the same spilling.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

from agentctl.coordinator import api
from agentctl.core.canonical import canonical_json
from agentctl.core.compiler import compile_workflow
from agentctl.core.dsl import load_workflow
from agentctl.ledger.artifacts.values import SPILL_MIN_CHARS

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
      with: {text: LONG, note: "é"}
"""


def _stored_workflow(tmp_path: Path, name: str, carried: bool) -> tuple[str, str]:
    """(the document's canonical JSON, the run's stored ``workflow_json``)."""
    long = "x" * (SPILL_MIN_CHARS + 10)
    document = load_workflow(WORKFLOW.replace("LONG", long)).document
    plan = compile_workflow(document)
    if not carried:
        assert plan.take_document_text(document) == canonical_json(document)
    db = str(tmp_path / f"{name}.db")
    api.submit_run(document=document, plan=plan, inputs={}, db=db, workspace=str(tmp_path))
    assert plan.take_document_text(document) is None  # the creation took it (or nothing)
    with sqlite3.connect(db) as conn:
        (row,) = conn.execute("SELECT workflow_json FROM run_documents").fetchone()
    return canonical_json(document), str(row)


def test_carried_text_is_stored_as_the_encoded_document(tmp_path: Path) -> None:
    text, encoded = _stored_workflow(tmp_path, "encoded", carried=False)
    same_text, taken = _stored_workflow(tmp_path, "carried", carried=True)
    assert text == same_text
    assert "$artifact" in encoded  # the long string was stored apart
    assert taken == encoded
