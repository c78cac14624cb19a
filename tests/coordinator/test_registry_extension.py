"""A new action kind end to end: one registry entry + one executor, nothing else changed.

The kind (``tests/registry_ext.py``) is registered in this process only; the workflow using
it goes through the real YAML loader, compiler and ``api.start_run`` with a real worker
subprocess, which learns the executor from the ``Execute`` message and imports it from the
test package (``PYTHONPATH``).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from registry_helpers import REPO, compile_text, fetch_effects, start_text_run

from agentctl.core import registry
from agentctl.errors import RunFailedError, ValidationError
from tests import registry_ext

WORKFLOW = """
apiVersion: agentctl.dev/v1alpha1
kind: Workflow
metadata: {name: marker-demo}
spec:
  policy: {approval: never}
  actions:
    mark: {kind: test.marker}
  tasks:
    - id: first
      uses: action:mark
      with: {marker: marks.txt, text: hello}
    - id: second
      uses: action:mark
      needs: [first]
      with: {marker: marks.txt, text: "${{ tasks.first.output.wrote }} again"}
  outputs:
    said: "${{ tasks.second.output.wrote }}"
"""


@pytest.fixture
def marker_kind(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setenv("PYTHONPATH", str(REPO))  # the worker imports tests.registry_ext
    registry.register(registry_ext.MARKER)
    try:
        yield
    finally:
        registry.unregister(registry_ext.KIND)


def test_a_registered_kind_runs_in_a_real_worker(tmp_path: Path, marker_kind: None) -> None:
    outcome = start_text_run(tmp_path, WORKFLOW)
    assert outcome.state == "succeeded"
    assert outcome.output == {"said": "hello again"}
    assert (tmp_path / "marks.txt").read_text() == "hello\nhello again\n"  # each ran once
    rows = fetch_effects(tmp_path / "runtime.db")
    assert [(r["task_id"], r["operation"], r["status"]) for r in rows] == [
        ("first", "test.marker", "succeeded"),
        ("second", "test.marker", "succeeded"),
    ]
    assert rows[0]["effect_class"] == "external_mutate"
    assert rows[0]["idempotency"] == "at_most_once"
    assert rows[0]["request"] == {"marker": "marks.txt", "text": "hello"}
    assert rows[0]["result"]["pid"] != os.getpid()  # it ran out of process, in a worker


def test_policy_judges_a_registered_kind_by_its_policy_name(
    tmp_path: Path, marker_kind: None
) -> None:
    denied = WORKFLOW.replace("{approval: never}", "{approval: never, toolsDeny: [test.marker]}")
    with pytest.raises(RunFailedError, match=r"'test\.marker' is in policy\.toolsDeny"):
        start_text_run(tmp_path, denied)
    assert not (tmp_path / "marks.txt").exists()


def test_an_unregistered_kind_is_an_unknown_kind(tmp_path: Path) -> None:
    with pytest.raises(ValidationError) as caught:
        compile_text(WORKFLOW)
    (diag,) = caught.value.diagnostics
    assert diag.code == "schema_violation"
    assert diag.path == "spec.actions.mark.kind"
    assert "got the string 'test.marker'" in diag.message
