"""Template checks of variables (spec/dsl.md §4.3, §6.4): each finding once, at the layer and
key that writes the value — not once per task at a ``vars`` path the task does not have — with
a help that can fix it at that layer."""

from __future__ import annotations

from typing import Any

import pytest
from compiler_docs import SHARED_VARS, compile_ok, task, workflow

from agentctl.core.compiler import CapturedVars, compile_workflow
from agentctl.core.dsl import load_workflow
from agentctl.errors import Diagnostic, ValidationError


def _rejected(doc: dict[str, Any], captured: CapturedVars | None = None) -> list[Diagnostic]:
    with pytest.raises(ValidationError) as info:
        compile_workflow(doc, variables=captured)
    return info.value.diagnostics


def _found(doc: dict[str, Any], captured: CapturedVars | None = None) -> list[tuple[Any, ...]]:
    return [(d.code, d.path) for d in _rejected(doc, captured)]


def _repro(value: str) -> list[Diagnostic]:
    loaded = load_workflow(SHARED_VARS.replace("VALUE", value), file="wf.yaml")
    with pytest.raises(ValidationError) as info:
        compile_workflow(loaded.document, file="wf.yaml", locate=loaded.locate)
    return info.value.diagnostics


def test_a_workflow_variable_syntax_error_is_reported_once_at_the_variable() -> None:
    [diag] = _repro("${{ inputs.a")
    assert (diag.code, diag.path, diag.file) == ("invalid_template", "spec.vars.q", "wf.yaml")
    assert (diag.line, diag.column) == (6, 8)
    assert "unclosed template" in diag.message and "`q`" in diag.message


def test_a_workflow_variable_reading_a_task_is_reported_once_with_a_help_that_fits() -> None:
    [diag] = _repro("${{ tasks.a.output }}")
    assert (diag.code, diag.path, diag.line) == ("invalid_template", "spec.vars.q", 6)
    assert "`a`, `b`" in diag.message  # every task that gets it, once
    # Task a cannot need itself: "add a to needs" cannot fix this.
    assert diag.help is not None and "add a to needs" not in diag.help
    assert "cannot need itself" in diag.help and "set vars.q in the vars" in diag.help


def test_a_shared_variable_counts_only_where_it_wins_and_is_not_needed() -> None:
    # x needs a; y overrides q with its own value; z and w read a without needing it.
    doc = workflow(
        [
            task("a"),
            task("x", needs=["a"]),
            task("y", vars={"q": 1}),
            task("z"),
            task("w", foreach={"items": [1, 2]}),
        ],
        vars={"q": "${{ tasks.a.output }}"},
    )
    [diag] = _rejected(doc)
    assert diag.path == "spec.vars.q"
    assert diag.message.endswith("tasks `a`, `z`, `w` get it without needing `a`")
    doc["spec"]["tasks"] = [task("a"), task("z", needs=["a"])]
    [diag] = _rejected(doc)
    assert "task `a` gets it" in diag.message and "cannot need itself" in str(diag.help)
    doc["spec"]["tasks"] = [task("a", vars={"q": 0}), task("z")]
    [diag] = _rejected(doc)
    assert (
        diag.help
        == "add a to the needs of z, or set vars.q in the vars of the tasks that need a instead"
    )
    doc["spec"]["tasks"] = [task("a", vars={"q": 0}), task("z", needs=["a"])]
    compile_ok(doc)


def test_an_agent_variable_is_reported_at_the_agent() -> None:
    agent = {"provider": "p", "model": "m", "instructions": "x", "tools": []}
    agent["vars"] = {
        "k": "${{ inputs.x",
        "r": "${{ tasks.a.output }}",
        "g": "${{ tasks.g.output }}",
    }
    doc = workflow(
        [task("a"), task("one", "agent:w"), task("two", "agent:w", needs=["a"])],
        providers={"p": {"kind": "fake"}},
        agents={"w": agent},
    )
    assert _found(doc) == [
        ("invalid_template", "spec.agents.w.vars.k"),
        ("missing_reference", "spec.agents.w.vars.g"),
        ("invalid_template", "spec.agents.w.vars.r"),
    ]
    messages = [d.message for d in _rejected(doc)]
    assert messages[2].endswith("and task `one` gets it without needing `a`")


def test_a_task_variable_is_reported_at_its_key_once_for_every_child() -> None:
    own = {"v": "${{ tasks.x.output }}", "s": "${{ tasks.y.output }}", "e": "${{ oops"}
    doc = workflow([task("x"), task("y", foreach={"items": [1, 2, 3]}, vars=own)])
    found = _rejected(doc)
    assert [(d.code, d.path) for d in found] == [
        ("invalid_template", "spec.tasks.1.vars.e"),
        ("invalid_template", "spec.tasks.1.vars.v"),
        ("invalid_template", "spec.tasks.1.vars.s"),
    ]
    assert found[1].help == "add x to needs"
    assert found[2].help is not None and "cannot need itself" in found[2].help


def test_var_files_and_the_command_line_keep_their_places() -> None:
    doc = workflow([{**task("a"), "varsFiles": ["t.yaml"]}, task("b")], varsFiles=["w.yaml"])
    files = {"w.yaml": {"f": "${{ tasks.a.output }}"}, "t.yaml": {"g": ["${{ tasks.b.output }}"]}}
    captured = CapturedVars(files=files, cli={"c": "${{ nope"})
    found = _rejected(doc, captured)
    assert [(d.code, d.path) for d in found] == [
        ("invalid_template", None),  # --var c: no document path
        ("invalid_template", "spec.tasks.0.varsFiles.0"),
        ("invalid_template", "spec.varsFiles.0"),
    ]
    assert found[1].message == (
        "task `a` reads tasks.b.output (in vars.g of variable file 't.yaml') without needing `b`"
    )
    assert found[2].message.startswith("vars.f of variable file 'w.yaml' reads tasks.a.output")


def test_engine_bindings_are_checked_where_the_expansion_writes_them() -> None:
    doc = workflow(
        [
            task("a"),
            task("f", foreach={"items": [1, "${{ tasks.a.output }}"]}),
            task("m", matrix={"axes": {"os": ["${{ tasks.ghost.output }}"]}}),
            task(
                "l",
                loop={
                    "maxIterations": 3,
                    "while": "${{ vars.loopIndex < 2 }}",
                    "initial": "${{ tasks.a.output }}",
                },
            ),
        ]
    )
    assert _found(doc) == [
        ("invalid_template", "spec.tasks.1.foreach.items.1"),
        ("missing_reference", "spec.tasks.2.matrix.axes.os"),
        ("invalid_template", "spec.tasks.3.loop.initial"),
    ]
    for where in ("foreach", "loop"):
        doc["spec"]["tasks"][1 if where == "foreach" else 3]["needs"] = ["a"]
    doc["spec"]["tasks"].pop(2)
    compile_ok(doc)  # a later loop child's loopPrevious reads the child before: no finding


def test_a_sub_workflow_task_variable_is_reported_at_its_definition() -> None:
    reads = {"v": "${{ tasks.s0.output }}", "e": "${{ nope"}
    definition = {"version": "0.1.0", "tasks": [task("s0"), task("s1", vars=reads)]}
    doc = workflow([task("inv", "workflow:sub")], subworkflows={"sub": definition})
    found = _rejected(doc)
    assert [(d.code, d.path) for d in found] == [
        ("invalid_template", "spec.subworkflows.sub.tasks.1.vars.e"),
        ("invalid_template", "spec.subworkflows.sub.tasks.1.vars.v"),
    ]
    assert found[1].message == "task `inv--s1` reads tasks.inv--s0.output without needing `inv--s0`"
