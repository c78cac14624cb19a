"""Loading and compiling a large workflow runs with the cyclic collector held off, and
leaves it as it found it (on success and on a rejected document)."""

from __future__ import annotations

import gc
import sys
from collections.abc import Iterator
from types import FrameType

import pytest
import yaml

from agentctl.core.collector import collector_paused
from agentctl.core.compiler import compile_workflow
from agentctl.core.dsl import load_workflow
from agentctl.errors import ValidationError


def _chain_source(n: int) -> str:
    tasks = [
        {"id": f"t{i}", "uses": "action:a", **({"needs": [f"t{i - 1}"]} if i else {})}
        for i in range(n)
    ]
    doc = {
        "apiVersion": "agentctl.dev/v1alpha1",
        "kind": "Workflow",
        "metadata": {"name": "chain"},
        "spec": {"actions": {"a": {"kind": "builtin.assign"}}, "tasks": tasks},
    }
    return yaml.safe_dump(doc, sort_keys=False)


PAUSED = {"load_workflow", "compile_workflow"}


def _inside_paused_call() -> bool:
    frame: FrameType | None = sys._getframe(1)
    while frame is not None:
        if frame.f_code.co_name in PAUSED and "agentctl" in frame.f_code.co_filename:
            return True
        frame = frame.f_back
    return False


@pytest.fixture
def collections() -> Iterator[list[int]]:
    """Generations of the automatic collections that start inside a load or a compile (the
    first collection after one, once the collector is back on, is expected and not kept)."""
    seen: list[int] = []

    def note(phase: str, info: dict[str, int]) -> None:
        if phase == "start" and _inside_paused_call():
            seen.append(info["generation"])

    was_enabled = gc.isenabled()
    gc.enable()
    gc.callbacks.append(note)
    try:
        yield seen
    finally:
        gc.callbacks.remove(note)
        if not was_enabled:
            gc.disable()


def test_a_large_workflow_loads_and_compiles_without_a_collection(
    collections: list[int],
) -> None:
    # ~10^5 objects: with the collector on, gen-0 collections would start every 700.
    loaded = load_workflow(_chain_source(1500))
    plan = compile_workflow(loaded.document, locate=loaded.locate)
    assert len(plan.tasks) == 1500
    assert collections == []
    assert gc.isenabled()


def test_a_rejected_document_leaves_the_collector_on(collections: list[int]) -> None:
    with pytest.raises(ValidationError):
        load_workflow("apiVersion: agentctl.dev/v1alpha1\nkind: Workflow\nspec: {tasks: 3}\n")
    assert gc.isenabled()


def test_nested_pauses_restore_the_outer_state() -> None:
    was_enabled = gc.isenabled()
    gc.enable()
    try:
        with collector_paused():
            with collector_paused():
                assert not gc.isenabled()
            assert not gc.isenabled()
        assert gc.isenabled()
        gc.disable()
        with collector_paused():
            pass
        assert not gc.isenabled()
    finally:
        (gc.enable if was_enabled else gc.disable)()
