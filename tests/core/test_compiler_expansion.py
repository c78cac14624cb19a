"""Static expansion and sub-workflow flattening: pinned ids, structure and limits."""

from __future__ import annotations

from typing import Any

import pytest
from compiler_docs import codes, compile_ok, diagnostics, task, workflow

from agentctl.core.compiler import (
    CapturedVars,
    child_id,
    compile_workflow,
    foreach_shadow_warnings,
)
from agentctl.errors import ValidationError


def test_pinned_foreach_ids() -> None:
    doc = workflow([task("greet", foreach={"items": ["ada", "lin"], "as": "name", "maxItems": 32})])
    plan = compile_ok(doc)
    assert plan.order == ("greet--0000-8cbaeab3680b", "greet--0001-e41cc1e0b8a6", "greet")
    assert child_id("greet", 0, {"name": "ada", "foreachIndex": 0}) == plan.order[0]
    first = plan.task("greet--0000-8cbaeab3680b")
    assert first.bindings == {"name": "ada", "foreachIndex": 0}
    assert first.vars["name"] == "ada" and first.parent == "greet"
    aggregate = plan.task("greet")
    assert aggregate.kind == "aggregate"
    assert aggregate.children == plan.order[:2] and aggregate.needs == plan.order[:2]


def test_pinned_foreach_id_of_a_small_float() -> None:
    """The digest is of the bindings as serde_json writes them: ``"item":0.00001``."""
    doc = workflow([task("f", foreach={"items": [0.00001], "as": "item", "maxItems": 32})])
    assert compile_ok(doc).order == ("f--0000-264321243c1d", "f")


def test_pinned_matrix_ids_sorted_axes_first_slowest() -> None:
    axes = {"os": ["linux", "mac"], "arch": ["amd64", "arm64"]}
    plan = compile_ok(workflow([task("build", matrix={"axes": axes, "maxItems": 4})]))
    assert plan.order[0] == "build--0000-f4109a71efaf"
    combos = [plan.task(i).bindings["matrix"] for i in plan.task("build").children]
    assert combos == [
        {"arch": "amd64", "os": "linux"},
        {"arch": "amd64", "os": "mac"},
        {"arch": "arm64", "os": "linux"},
        {"arch": "arm64", "os": "mac"},
    ]
    assert [plan.task(i).bindings["matrixIndex"] for i in plan.task("build").children] == [
        0,
        1,
        2,
        3,
    ]


def test_children_copy_definition_and_parent_needs() -> None:
    doc = workflow(
        [
            task("first"),
            task(
                "fan",
                "action:save",
                needs=["first"],
                foreach={"items": ["a"], "as": "item", "maxItems": 32},
                with_={"path": "out/${{ vars.item }}", "content": "${{ tasks.first.output }}"},
                retry={"maxAttempts": 3, "backoffMs": 5},
                failure="continue",
                when="${{ inputs.go }}",
                compensate={"uses": "action:save", "with": {"path": "out/x", "content": ""}},
            ),
        ],
        inputs={"go": True},
    )
    plan = compile_ok(doc)
    child = plan.task(plan.task("fan").children[0])
    assert child.needs == ("first",)
    assert child.retry.max_attempts == 3 and child.failure == "continue"
    assert child.when == "${{ inputs.go }}"
    assert child.compensate is not None and child.compensate.action == "save"
    aggregate = plan.task("fan")
    assert aggregate.with_ == {} and aggregate.when is None and aggregate.compensate is None
    assert aggregate.failure == "continue"


def test_foreach_over_max_items_is_schema_violation() -> None:
    doc = workflow([task("fan", foreach={"items": [1, 2, 3, 4], "as": "x", "maxItems": 3})])
    assert codes(doc) == {"schema_violation"}


def test_matrix_product_over_max_items_is_schema_violation() -> None:
    axes = {"a": [1, 2], "b": [1, 2]}
    assert codes(workflow([task("m", matrix={"axes": axes, "maxItems": 3})])) == {
        "schema_violation"
    }


def test_empty_axis_gives_aggregate_without_children() -> None:
    doc = workflow(
        [task("first"), task("m", needs=["first"], matrix={"axes": {"a": []}, "maxItems": 4})]
    )
    plan = compile_ok(doc)
    assert plan.order == ("first", "m")
    assert plan.task("m").children == () and plan.task("m").needs == ("first",)


def test_reserved_binding_names_rejected_in_vars() -> None:
    doc = workflow([task("fan", vars={"x": 1}, foreach={"items": [1], "as": "x", "maxItems": 2})])
    assert codes(doc) == {"schema_violation"}
    assert codes(workflow([task("a", vars={"loopIndex": 1})])) == {"schema_violation"}
    assert codes(workflow([task("a")], vars={"matrix": 1})) == {"schema_violation"}


def test_a_foreach_as_name_set_by_the_task_s_own_var_file_is_refused() -> None:
    # The task's own layers may not set its `as` name (spec §4.8): a var file as inline vars.
    fan = {**task("fan", foreach={"items": [1], "as": "x"}), "varsFiles": ["t.yaml"]}
    captured = CapturedVars(files={"t.yaml": {"x": 99}})
    with pytest.raises(ValidationError) as info:
        compile_workflow(workflow([fan]), variables=captured)
    [diag] = info.value.diagnostics
    assert (diag.code, diag.path, diag.severity) == (
        "schema_violation",
        "spec.tasks.0.varsFiles.0",
        "error",
    )
    assert "vars.x" in diag.message and "`fan`" in diag.message
    compile_workflow(workflow([fan]), variables=CapturedVars(files={"t.yaml": {"y": 1}}))


def test_a_foreach_item_hiding_a_shared_variable_is_a_warning() -> None:
    # Workflow, agent and command-line layers are shared with other tasks: the item may hide
    # their value in the children, but never silently (the value given is not what they see).
    agent = {"provider": "p", "model": "m", "instructions": "i", "tools": [], "vars": {"a": 1}}
    doc = workflow(
        [
            task("t", foreach={"items": [7], "as": "x"}),
            task("u", foreach={"items": [7], "as": "x"}),
            task("g", "agent:w", foreach={"items": [7], "as": "a"}, with_={"prompt": "p"}),
            task("i", foreach={"items": [7]}),
            task("plain", with_={"v": "${{ vars.x }}"}),
        ],
        vars={"x": 99},
        varsFiles=["w.yaml"],
        providers={"p": {"kind": "fake"}},
        agents={"w": agent},
    )
    captured = CapturedVars(files={"w.yaml": {"x": 1, "item": 2}}, cli={"c": 3})
    plan = compile_workflow(doc, variables=captured)
    assert plan.task("plain").vars["x"] == 99  # the other tasks keep the variable
    found = foreach_shadow_warnings(doc, captured, file="wf.yaml")
    assert [(d.severity, d.code, d.path) for d in found] == [
        ("warning", "schema_violation", "spec.vars.x"),  # (the value that wins, not w.yaml's)
        ("warning", "schema_violation", "spec.agents.w.vars.a"),
        ("warning", "schema_violation", "spec.varsFiles.0"),  # `item`, the default `as`
    ]
    assert found[0].message.startswith("workflow variable `x` is hidden in the children of ")
    assert "tasks `t`, `u`" in found[0].message and found[0].file == "wf.yaml"
    on_cli = foreach_shadow_warnings(doc, CapturedVars(cli={"x": 5}))
    assert (on_cli[0].path, on_cli[0].message.split(" is ")[0]) == (None, "--var x")
    assert foreach_shadow_warnings(workflow([task("t", foreach={"items": [1]})]), captured) == []


def _loop(**loop: object) -> dict[str, object]:
    spec = {"maxIterations": 3, "while": "${{ vars.loopIndex < 2 }}", "initial": {"n": 0}}
    spec.update(loop)
    return spec


def test_loop_chain_structure() -> None:
    plan = compile_ok(workflow([task("pre"), task("poll", needs=["pre"], loop=_loop())]))
    children = plan.task("poll").children
    assert len(children) == 3 and plan.order == ("pre", *children, "poll")
    first, second, third = (plan.task(c) for c in children)
    assert first.bindings == {"loopIndex": 0, "loopPrevious": {"n": 0}}
    assert first.id == child_id("poll", 0, first.bindings)
    assert second.bindings["loopPrevious"] == f"${{{{ tasks.{first.id}.output }}}}"
    assert second.needs == ("pre", first.id) and third.needs == ("pre", second.id)
    assert first.when == "${{ vars.loopIndex < 2 }}"
    aggregate = plan.task("poll")
    assert aggregate.kind == "loop_aggregate" and aggregate.max_iterations == 3
    assert aggregate.guard == "${{ vars.loopIndex < 2 }}" and aggregate.needs == children


def test_loop_output_in_guard_is_rewritten() -> None:
    plan = compile_ok(workflow([task("poll", loop=_loop(**{"while": "${{ loop.output.more }}"}))]))
    assert plan.task("poll").guard == "${{ vars.loopPrevious.more }}"
    assert plan.task(plan.task("poll").children[0]).when == "${{ vars.loopPrevious.more }}"


def test_loop_rejections() -> None:
    assert codes(workflow([task("p", loop=_loop(), when="${{ inputs.x }}")])) == {
        "schema_violation"
    }
    assert codes(workflow([task("p", loop=_loop(**{"while": "vars.loopIndex < 2"}))])) == {
        "invalid_template"
    }
    not_exact = "go ${{ vars.loopIndex }}"
    assert codes(workflow([task("p", loop=_loop(**{"while": not_exact}))])) == {"invalid_template"}


SHOUT = {
    "version": "0.1.0",
    "inputs": {"word": "hey"},
    "inputSchema": {"type": "object"},
    "outputSchema": {"type": "object"},
    "outputs": {"loud": "${{ tasks.echo.output.output.w }}"},
    "tasks": [task("echo", with_={"w": "${{ inputs.word }}"})],
}


def test_subworkflow_ids_and_rewrites() -> None:
    doc = workflow(
        [task("pre"), task("wrap", "workflow:shout", needs=["pre"], with_={"word": "hi"})],
        subworkflows={"shout": SHOUT},
    )
    plan = compile_ok(doc)
    assert plan.order == ("pre", "wrap--inputs-a160ebeb", "wrap--echo", "wrap")
    boundary = plan.task("wrap--inputs-a160ebeb")
    assert boundary.kind == "subworkflow_input" and boundary.with_ == {"word": "hi"}
    assert boundary.needs == ("pre",) and boundary.output_schema == {"type": "object"}
    echo = plan.task("wrap--echo")
    assert echo.with_ == {"w": "${{ tasks.wrap--inputs-a160ebeb.output.word }}"}
    assert echo.needs == ("wrap--inputs-a160ebeb",) and echo.parent == "wrap"
    out = plan.task("wrap")
    assert out.kind == "subworkflow_output"
    assert out.with_ == {"loud": "${{ tasks.wrap--echo.output.output.w }}"}
    assert set(out.needs) == {"wrap--inputs-a160ebeb", "wrap--echo"}


def test_subworkflow_memory_keys_are_prefixed() -> None:
    sub = dict(SHOUT, tasks=[task("keep", "action:remember", with_={"key": "k", "value": 1})])
    sub["outputs"] = {}
    doc = workflow([task("my-call", "workflow:shout")], subworkflows={"shout": sub})
    keep = compile_ok(doc).task("my-call--keep")
    assert keep.with_["key"] == "my_call__k" and keep.memory_writes == ("my_call__k",)


def test_subworkflow_templated_memory_key_unsupported() -> None:
    sub = dict(SHOUT, tasks=[task("keep", "action:remember", with_={"key": "${{ inputs.word }}"})])
    sub["outputs"] = {}
    doc = workflow([task("wrap", "workflow:shout")], subworkflows={"shout": sub})
    assert "unsupported_capability" in codes(doc)


def test_nested_subworkflows_namespace_each_level() -> None:
    outer = {
        "version": "1.0.0",
        "inputs": {"word": "x"},
        "outputs": {"got": "${{ tasks.inner.output.loud }}"},
        "tasks": [task("inner", "workflow:shout", with_={"word": "${{ inputs.word }}"})],
    }
    doc = workflow(
        [task("top", "workflow:outer", with_={"word": "yo"})],
        subworkflows={"shout": SHOUT, "outer": outer},
    )
    plan = compile_ok(doc)
    outer_in = next(i for i in plan.order if i.startswith("top--inputs-"))
    inner_in = next(i for i in plan.order if i.startswith("top--inner--inputs-"))
    assert plan.order == (outer_in, inner_in, "top--inner--echo", "top--inner", "top")
    assert plan.task(inner_in).with_ == {"word": f"${{{{ tasks.{outer_in}.output.word }}}}"}
    assert outer_in in plan.task(inner_in).needs
    assert plan.task("top").with_ == {"got": "${{ tasks.top--inner.output.loud }}"}


def test_subworkflow_cycle_and_unknown() -> None:
    a = dict(SHOUT, tasks=[task("x", "workflow:b")], outputs={})
    b = dict(SHOUT, tasks=[task("y", "workflow:a")], outputs={})
    found = diagnostics(workflow([task("go", "workflow:a")], subworkflows={"a": a, "b": b}))
    assert ("dependency_cycle", "sub-workflow cycle: a -> b -> a") in found
    assert codes(workflow([task("go", "workflow:nope")])) == {"missing_reference"}


def test_subworkflow_invocation_restrictions() -> None:
    retry = {"maxAttempts": 2, "backoffMs": 0}
    base = {"subworkflows": {"shout": SHOUT}}
    assert codes(workflow([task("wrap", "workflow:shout", retry=retry)], **base)) == {
        "schema_violation"
    }
    assert codes(workflow([task("wrap", "workflow:shout", when="${{ inputs.a }}")], **base)) == {
        "schema_violation"
    }
    bad_version = {"shout": dict(SHOUT, version="v1")}
    assert codes(workflow([task("wrap", "workflow:shout")], subworkflows=bad_version)) == {
        "schema_violation"
    }


def test_literal_subworkflow_inputs_are_checked_against_its_input_schema() -> None:
    # Defaults ⊕ `with` with no template are known at compile time: a mismatch would fail the
    # input boundary on every run, so `check` reports it at the invocation's `with`.
    typed = dict(SHOUT, inputSchema={"type": "object", "properties": {"word": {"type": "string"}}})
    base = {"subworkflows": {"shout": typed}}
    assert diagnostics(workflow([task("wrap", "workflow:shout", with_={"word": 5})], **base)) == [
        (
            "schema_violation",
            "task `wrap`: the inputs of shout@0.1.0 do not match its inputSchema: "
            "/word: expected string, got integer",
        )
    ]
    bad_default = {"shout": dict(typed, inputs={"word": 5})}
    assert codes(workflow([task("wrap", "workflow:shout")], subworkflows=bad_default)) == {
        "schema_violation"
    }
    # A matching literal, or a template (judged when it renders), compiles.
    compile_ok(workflow([task("wrap", "workflow:shout", with_={"word": "hi"})], **base))
    templated = task("wrap", "workflow:shout", with_={"word": "${{ inputs.n }}"})
    compile_ok(workflow([templated], inputs={"n": 5}, **base))


def _leak(found: list[tuple[str, str]], where: str, name: str = "shout") -> bool:
    message = f"sub-workflow `{name}`: {where} to task `pre`, which is not one of the sub-workflow's tasks"
    return ("missing_reference", message) in found


def test_a_subworkflow_cannot_name_a_caller_task() -> None:
    # spec/dsl.md §4.9: only local `tasks.` references are rewritten; a definition naming the
    # caller's `pre` (needing it, reading it) would read whatever the caller calls `pre`.
    reads = task("echo", needs=["pre"], with_={"w": "${{ tasks.pre.output.output.w }}"})
    found = diagnostics(
        workflow(
            [task("pre"), task("wrap", "workflow:shout", needs=["pre"])],
            subworkflows={"shout": dict(SHOUT, tasks=[reads])},
        )
    )
    assert _leak(found, "its task `echo` refers")
    outputs = {"loud": "${{ tasks.pre.output.output.w }}"}
    found = diagnostics(
        workflow(
            [task("pre"), task("wrap", "workflow:shout", needs=["pre"])],
            subworkflows={"shout": dict(SHOUT, outputs=outputs)},
        )
    )
    assert _leak(found, "its outputs refer")


def test_an_unknown_need_in_a_subworkflow_is_reported_once() -> None:
    # Its scope reports it; the expanded graph's needs check used to report it again, by
    # the expanded id (`wrap--echo`) the user never wrote.
    needs = task("echo", needs=["nope"], with_={"w": "${{ inputs.word }}"})
    doc = workflow(
        [task("wrap", "workflow:shout")], subworkflows={"shout": dict(SHOUT, tasks=[needs])}
    )
    [found] = diagnostics(doc)
    assert found[0] == "missing_reference" and "its task `echo` refers to task `nope`" in found[1]


def test_a_nested_invocation_cannot_name_its_callers_task_either() -> None:
    inner_call = task("inner", "workflow:shout", needs=["pre"], with_={"word": "w"})
    outer = dict(SHOUT, tasks=[inner_call], outputs={})
    found = diagnostics(
        workflow(
            [task("pre"), task("top", "workflow:outer", needs=["pre"])],
            subworkflows={"shout": SHOUT, "outer": outer},
        )
    )
    assert _leak(found, "its task `inner` refers", "outer")


def _only_diagnostic(doc: dict[str, Any]) -> tuple[str, str]:
    with pytest.raises(ValidationError) as info:
        compile_workflow(doc, file="wf.yaml")
    [diag] = info.value.diagnostics
    return diag.code, diag.path


def test_a_subworkflow_output_problem_is_located_in_the_definition_once() -> None:
    broken = dict(SHOUT, outputs={"loud": "${{ tasks.echo.output"})
    doc = workflow([task("wrap", "workflow:shout")], subworkflows={"shout": broken})
    assert _only_diagnostic(doc) == ("invalid_template", "spec.subworkflows.shout.outputs.loud")
    # An unknown task is reported by the definition's scope check, not again by the reads one.
    unknown = dict(SHOUT, outputs={"loud": "${{ tasks.nope.output }}"})
    doc = workflow([task("wrap", "workflow:shout")], subworkflows={"shout": unknown})
    assert _only_diagnostic(doc) == ("missing_reference", "spec.subworkflows.shout.outputs")


def test_a_foreach_item_problem_is_located_at_the_item() -> None:
    fan = task("fan", foreach={"items": ["ok", "${{ inputs.x"], "as": "item", "maxItems": 4})
    assert _only_diagnostic(workflow([fan])) == ("invalid_template", "spec.tasks.0.foreach.items.1")


def test_invocations_sharing_a_memory_prefix_are_refused() -> None:
    sub = dict(SHOUT, tasks=[task("keep", "action:remember", with_={"key": "k", "value": 1})])
    sub["outputs"] = {}
    doc = workflow(
        [task("x-y", "workflow:shout"), task("x_y", "workflow:shout")],
        subworkflows={"shout": sub},
        max_concurrency=1,
    )
    with pytest.raises(ValidationError) as info:
        compile_workflow(doc)
    [diag] = info.value.diagnostics
    assert diag.code == "schema_violation" and diag.path == "spec.tasks.1.id"
    assert "`x-y` and `x_y`" in diag.message and "`x_y__`" in diag.message
    # A nested invocation's prefix is its flattened id's: `top--inner` → `top__inner__`.
    outer = {"version": "1.0.0", "tasks": [task("inner", "workflow:shout")]}
    nested = workflow(
        [task("top", "workflow:outer"), task("top__inner", "workflow:shout")],
        subworkflows={"shout": sub, "outer": outer},
    )
    assert codes(nested) == {"schema_violation"}


def test_a_subworkflow_reading_an_undeclared_input_is_refused() -> None:
    sub = {
        "version": "1.0.0",
        "inputs": {"a": 1},
        "outputs": {"o": "${{ inputs.b }}"},
        "tasks": [task("e", when="inputs.c == 1", with_={"x": "${{ inputs.a }}-${{ inputs.zz }}"})],
    }
    doc = workflow([task("w", "workflow:s", with_={"c": 1})], subworkflows={"s": sub})
    with pytest.raises(ValidationError) as info:
        compile_workflow(doc)
    found = [(d.code, d.path, d.message.split("`")[5]) for d in info.value.diagnostics]
    assert found == [
        ("missing_reference", "spec.subworkflows.s.tasks.0.with.x", "inputs.zz"),
        ("missing_reference", "spec.subworkflows.s.outputs.o", "inputs.b"),
    ]
    # Given by the invocation, or declared with a default: the same reads compile.
    given = workflow(
        [task("w", "workflow:s", with_={"b": 1, "c": 1, "zz": 2})], subworkflows={"s": sub}
    )
    compile_ok(given)
