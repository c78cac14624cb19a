"""Compile-time checks: references, templates, routers, memory writes, capabilities,
compensation, budgets, duplicates, cycles and the declaration-order tie-break."""

from __future__ import annotations

from typing import Any

import pytest
from compiler_docs import codes, compile_ok, diagnostics, task, workflow

from agentctl.core.compiler import CapturedVars, compile_workflow
from agentctl.core.dsl.unused import unused_key_findings
from agentctl.errors import ValidationError


def test_declaration_order_tie_break() -> None:
    plan = compile_ok(workflow([task("b"), task("a"), task("c", needs=["a", "b"])]))
    assert plan.order == ("b", "a", "c")
    assert [t.position for t in plan.tasks] == [0, 1, 2]
    assert [t.id for t in plan.tasks] == list(plan.order)


def test_ready_queue_prefers_earlier_declaration() -> None:
    plan = compile_ok(workflow([task("a"), task("y", needs=["a"]), task("b")]))
    assert plan.order == ("a", "y", "b")


def test_cycle_is_named() -> None:
    doc = workflow([task("a", needs=["c"]), task("b", needs=["a"]), task("c", needs=["b"])])
    assert diagnostics(doc) == [("dependency_cycle", "task dependency cycle: a -> c -> b -> a")]


def test_unknown_references() -> None:
    assert codes(workflow([task("a", "action:nope")])) == {"missing_reference"}
    assert codes(workflow([task("a", "agent:nope")])) == {"missing_reference"}
    assert codes(workflow([task("a", needs=["ghost"])])) == {"missing_reference"}
    reads_ghost = task("a", with_={"x": "${{ tasks.ghost.output }}"})
    assert codes(workflow([reads_ghost])) == {"missing_reference"}


def test_duplicate_ids_after_expansion() -> None:
    plan_doc = workflow([task("a"), task("a")])
    assert codes(plan_doc) == {"duplicate_task"}
    fan = task("fan", foreach={"items": ["a"], "as": "item", "maxItems": 2})
    clash = task("fan--0000-" + _first_fan_digest())
    assert codes(workflow([fan, clash])) == {"duplicate_task"}


def _first_fan_digest() -> str:
    from agentctl.core.compiler import child_id

    return child_id("fan", 0, {"item": "a", "foreachIndex": 0}).rsplit("-", 1)[1]


def test_task_read_requires_own_needs() -> None:
    doc = workflow([task("x"), task("y", with_={"v": "${{ tasks.x.output.output }}"})])
    with pytest.raises(ValidationError) as info:
        compile_workflow(doc, file="wf.yaml")
    [diag] = info.value.diagnostics
    assert diag.code == "invalid_template" and diag.help == "add x to needs"
    assert diag.path == "spec.tasks.1.with.v" and diag.file == "wf.yaml"  # at the value
    in_vars = workflow([task("x"), task("y", vars={"v": "${{ tasks.x.output }}"})])
    assert codes(in_vars) == {"invalid_template"}


def test_when_is_exempt_from_needs_rule_but_checked() -> None:
    compile_ok(workflow([task("x"), task("y", when="${{ tasks.x.output.ok }}")]))
    assert codes(workflow([task("y", when="${{ vars.a < b }}")])) == {"invalid_template"}


def test_template_syntax_errors() -> None:
    assert codes(workflow([task("a", with_={"v": "${{ inputs.a"})])) == {"invalid_template"}
    assert codes(workflow([task("a", with_={"v": "${{ }}"})])) == {"invalid_template"}
    assert codes(workflow([task("a", with_={"v": "${{ env.HOME }}"})])) == {"invalid_template"}


def test_locate_gives_line_and_column_of_nearest_ancestor() -> None:
    positions = {"spec.tasks.0": (7, 5)}
    doc = workflow([task("a", "action:nope")])
    with pytest.raises(ValidationError) as info:
        compile_workflow(doc, locate=positions.get)
    [diag] = info.value.diagnostics
    assert (diag.line, diag.column, diag.path) == (7, 5, "spec.tasks.0.uses")


def test_all_diagnostics_reported_together() -> None:
    doc = workflow([task("a", "action:nope"), task("b", needs=["ghost"])])
    assert [code for code, _ in diagnostics(doc)] == ["missing_reference", "missing_reference"]


def _router(**route: Any) -> dict[str, Any]:
    spec = {"select": "${{ tasks.src.output.v }}", "cases": [{"equals": 1, "tasks": ["x"]}]}
    spec["default"] = []
    spec.update(route)
    return task("pick", "router", needs=["src"], route=spec)


def _routed(*extra: dict[str, Any], router: dict[str, Any] | None = None) -> dict[str, Any]:
    tasks = [task("src"), router or _router(), task("x", needs=["pick"]), *extra]
    return workflow(tasks)


def test_router_compiles() -> None:
    route = compile_ok(_routed()).task("pick").route
    assert route is not None and route.cases[0].tasks == ("x",)
    assert compile_ok(_routed()).task("pick").kind == "router"


def test_router_rules() -> None:
    not_exact = _router(select="v=${{ tasks.src.output.v }}")
    assert codes(_routed(router=not_exact)) == {"invalid_template"}
    no_need = task("pick", "router", route=_router()["route"])
    assert codes(_routed(router=no_need)) == {"invalid_template"}
    assert codes(_routed(router=_router(cases=[]))) == {"schema_violation"}
    assert codes(_routed(router=_router(cases=[{"equals": 1, "tasks": []}]))) == {
        "schema_violation"
    }
    unknown = _router(default=["ghost"])
    assert codes(_routed(router=unknown)) == {"missing_reference"}
    twice = _router(default=["x"])
    assert codes(_routed(router=twice)) == {"schema_violation"}
    not_needing = _router(default=["z"])
    assert codes(_routed(task("z"), router=not_needing)) == {"schema_violation"}
    assert codes(workflow([task("r", route={"select": "x", "cases": []})])) == {"schema_violation"}


def test_a_routers_with_is_found_for_a_warning() -> None:
    # Nothing reads a router's `with` (its output is fixed): the workflow compiles, as the
    # original's would, and the key is found for a warning, never silently dropped; variables
    # stay plain, since `select` may read them.
    router = {**_router(), "with": {"verdict": "${{ tasks.src.output.v }}"}}
    doc = _routed(router=router)
    compile_ok(doc)
    [found] = unused_key_findings(doc)
    assert found.path.endswith(".with") and "router" in found.message
    plain = _routed(router={**_router(select="${{ vars.v }}"), "vars": {"v": 1}})
    compile_ok(plain)
    assert unused_key_findings(plain) == []


@pytest.mark.parametrize(
    ("first", "second", "duplicate"),
    [(1, "1", False), (True, 1, False), (1, 1.0, False), ("go", "go", True), (None, None, True)],
)
def test_router_duplicate_equals_uses_json_identity(
    first: Any, second: Any, duplicate: bool
) -> None:
    cases = [{"equals": first, "tasks": ["x"]}, {"equals": second, "tasks": ["y"]}]
    doc = _routed(task("y", needs=["pick"]), router=_router(cases=cases))
    if duplicate:
        assert codes(doc) == {"schema_violation"}
    else:
        compile_ok(doc)


def _memory(task_id: str, key: str, **fields: Any) -> dict[str, Any]:
    return task(task_id, "action:remember", with_={"key": key, "value": 1}, **fields)


def test_memory_write_inference_and_rules() -> None:
    plan = compile_ok(workflow([_memory("a", "k")]))
    assert plan.task("a").memory_writes == ("k",)
    assert codes(workflow([_memory("a", "k", memoryWrites=["other"])])) == {"schema_violation"}
    assert codes(workflow([_memory("a", "${{ inputs.k }}")])) == {"schema_violation"}
    templated = _memory("a", "${{ inputs.k }}", memoryWrites=["k2", "k1"])
    assert compile_ok(workflow([templated])).task("a").memory_writes == ("k1", "k2")
    assert codes(workflow([task("a", memoryWrites=["k"])])) == {"schema_violation"}


def test_parallel_memory_conflict_only_when_concurrent_and_unordered() -> None:
    both = [_memory("left", "k"), _memory("right", "k")]
    found = diagnostics(workflow(both, max_concurrency=2))
    assert len(found) == 1 and found[0][0] == "schema_violation"
    assert "left" in found[0][1] and "right" in found[0][1]
    compile_ok(workflow(both))
    ordered = [_memory("left", "k"), _memory("right", "k", needs=["left"])]
    compile_ok(workflow(ordered, max_concurrency=2))
    chained = [_memory("a", "k"), task("mid", needs=["a"]), _memory("b", "k", needs=["mid"])]
    compile_ok(workflow(chained, max_concurrency=2))


def test_foreach_children_inherit_full_write_set_quirk() -> None:
    fan = _memory(
        "fan",
        "k_${{ vars.env }}",
        memoryWrites=["k_dev", "k_prod"],
        foreach={"items": ["dev", "prod"], "as": "env", "maxItems": 2},
    )
    assert codes(workflow([fan], max_concurrency=3)) == {"schema_violation"}
    plan = compile_ok(workflow([fan]))
    assert plan.task(plan.task("fan").children[1]).memory_writes == ("k_dev", "k_prod")


def test_compensation_rules() -> None:
    undo = {"path": "p", "content": "undone"}
    inverse = {"uses": "action:save", "with": undo, "retry": {"maxAttempts": 2}}
    made = task("make", "action:save", with_={"path": "p", "content": "c"}, compensate=inverse)
    compensation = compile_ok(workflow([made])).task("make").compensate
    assert compensation is not None and compensation.retry.max_attempts == 2
    assert compensation.with_ == undo
    on_assign = task("a", compensate={"uses": "action:save", "with": undo})
    assert codes(workflow([on_assign])) == {"unsupported_capability"}
    pure_inverse = task("m", "action:save", with_=undo, compensate={"uses": "action:put"})
    assert codes(workflow([pure_inverse])) == {"unsupported_capability"}
    unknown = task("m", "action:save", with_=undo, compensate={"uses": "action:nope"})
    assert codes(workflow([unknown])) == {"missing_reference"}


def _agent_doc(agent: dict[str, Any], kind: str = "fake") -> dict[str, Any]:
    base = {"provider": "p", "model": "m", "instructions": "x", "tools": []}
    return workflow(
        [task("ask", "agent:w", with_={"prompt": "hi"})],
        providers={"p": {"kind": kind}},
        agents={"w": {**base, **agent}},
        tools={"peek": {"kind": "builtin.workspace.read", "effectClass": "observe"}},
    )


def test_agent_capability_negotiation() -> None:
    compile_ok(_agent_doc({"tools": ["peek"], "providerOptions": {"failFirst": 1}}))
    assert codes(_agent_doc({"reasoning": {"effort": "low"}})) == {"unsupported_capability"}
    compile_ok(_agent_doc({"reasoning": {"effort": "low"}}, kind="openai"))
    assert codes(_agent_doc({"usageLimit": {"maxCostUsd": 1}}, kind="openai")) == {
        "unsupported_capability"
    }
    assert codes(_agent_doc({"providerOptions": {"store": True}})) == {"unsupported_capability"}
    assert codes(_agent_doc({"stream": True}, kind="anthropic")) == {"unsupported_capability"}
    no_store = {"tools": ["peek"], "providerOptions": {"store": False}}
    assert codes(_agent_doc(no_store, kind="openai")) == {"unsupported_capability"}
    assert codes(_agent_doc({"providerOptions": {"failFirst": -1}})) == {"schema_violation"}


def test_agent_references() -> None:
    assert codes(_agent_doc({"provider": "ghost"})) == {"missing_reference"}
    assert codes(_agent_doc({"tools": ["ghost"]})) == {"missing_reference"}


def test_structural_budgets() -> None:
    two = [task("a"), task("b")]
    assert codes(workflow(two, budgets={"maxTasks": 1})) == {"schema_violation"}
    compile_ok(workflow(two, budgets={"maxTasks": 2}))
    fan = task("f", foreach={"items": [1, 2, 3], "as": "item", "maxItems": 8})
    assert codes(workflow([fan], budgets={"maxExpansionItems": 2})) == {"schema_violation"}
    loop = {"maxIterations": 4, "while": "${{ vars.loopIndex < 9 }}", "initial": None}
    assert codes(workflow([task("l", loop=loop)], budgets={"maxLoopIterations": 3})) == {
        "schema_violation"
    }


def test_merges_and_timeouts() -> None:
    write = {"path": "out.txt", "content": "x"}
    doc = workflow(
        [
            task("a", "action:tuned", with_={"b": 2, "c": 3}, vars={"v": "task"}),
            task("b", "action:save", with_=write, timeoutSeconds=9),
            task("c"),
            task("d", "action:slow", with_=write),
            task("e", "action:slow", with_=write, timeoutSeconds=5),
            task("f", "action:slow", with_=write, timeoutSeconds=60),
        ],
        vars={"v": "wf", "w": "wf"},
        actions={
            "tuned": {"kind": "builtin.assign", "with": {"a": 1, "b": 1}},
            "put": {"kind": "builtin.assign", "with": {}},
            "save": {"kind": "builtin.write", "with": {}},
            "slow": {"kind": "builtin.write", "with": {}, "timeoutSeconds": 30},
        },
    )
    plan = compile_ok(doc)
    first = plan.task("a")
    assert first.with_ == {"a": 1, "b": 2, "c": 3}
    assert first.vars == {"v": "task", "w": "wf"}
    assert first.action == "tuned" and plan.task("d").timeout_seconds == 30
    assert plan.task("b").timeout_seconds == 9 and plan.task("c").timeout_seconds == 120
    # The task's own replaces its action's, shorter or longer (docs/workflow-language.md).
    assert plan.task("e").timeout_seconds == 5 and plan.task("f").timeout_seconds == 60


def test_a_pure_tasks_timeout_is_found_as_having_no_effect() -> None:
    # assign, assert and memory.read are evaluated in place (the registry's pure placement):
    # a timeout there compiles, as the original accepts it, and is found for a warning.
    for kind in ("builtin.assign", "builtin.assert", "builtin.memory.read"):
        with_ = {"that": True} if kind == "builtin.assert" else {}
        with_ = {"key": "k"} if kind == "builtin.memory.read" else with_
        actions = {"pure": {"kind": kind, "with": {}}, "put": {"kind": "builtin.assign"}}
        doc = workflow([task("a", "action:pure", with_=with_, timeoutSeconds=5)], actions=actions)
        compile_ok(doc)
        [found] = unused_key_findings(doc)
        assert found.path == "spec.tasks.0.timeoutSeconds" and kind in found.message
        assert unused_key_findings(workflow([task("a", "action:pure")], actions=actions)) == []
    # An effectful kind's timeout bounds its work: nothing to report.
    actions = {"save": {"kind": "builtin.write"}}
    doc = workflow([task("w", "action:save", timeoutSeconds=5)], actions=actions)
    assert unused_key_findings(doc) == []


def test_agent_vars_layer_between_workflow_and_task() -> None:
    doc = _agent_doc({"vars": {"x": "agent", "y": "agent"}})
    doc["spec"]["vars"] = {"x": "wf", "y": "wf", "z": "wf"}
    doc["spec"]["tasks"][0]["vars"] = {"y": "task"}
    assert compile_ok(doc).task("ask").vars == {"x": "agent", "y": "task", "z": "wf"}


def test_output_schema_must_be_usable() -> None:
    assert codes(workflow([task("a", outputSchema={"type": "objekt"})])) == {"schema_violation"}
    compile_ok(workflow([task("a", outputSchema={"type": "object", "required": ["x"]})]))


def test_var_files_come_only_from_the_caller_capture() -> None:
    # The compiler is pure: a declared var file it was not handed is an error, never a read.
    doc = workflow([{**task("a"), "varsFiles": ["v.yaml"]}])
    doc["spec"]["varsFiles"] = ["w.yaml"]
    assert diagnostics(doc) == [
        ("schema_violation", "variable file 'w.yaml' was not read before compiling"),
        ("schema_violation", "variable file 'v.yaml' was not read before compiling"),
    ]
    captured = CapturedVars(files={"w.yaml": {"x": 1, "y": 1}, "v.yaml": {"y": 2}}, cli={})
    plan = compile_workflow(doc, variables=captured)
    assert plan.tasks[0].vars == {"x": 1, "y": 2}


def _var_read_paths(doc: dict[str, Any], captured: CapturedVars | None = None) -> list[object]:
    with pytest.raises(ValidationError) as info:
        compile_workflow(doc, variables=captured)
    found = info.value.diagnostics
    assert {d.code for d in found} == {"invalid_template"}, found
    assert all("variables cannot read variables" in d.message for d in found)
    return [d.path for d in found]


def test_a_variable_never_reads_another_variable() -> None:
    # Variables render against inputs, memory and task outputs only (spec §6.4): a var that
    # reads `vars.*` could only fail its task when it runs, so `check` refuses it, in every
    # layer, at the variable that reads.
    reader = {**task("a", with_={"v": "${{ vars.p }}"}), "vars": {"p": "${{ vars.q }}"}}
    doc = workflow([reader], vars={"q": 1, "r": "n=${{ vars.q }}"})
    assert _var_read_paths(doc) == ["spec.vars.r", "spec.tasks.0.vars.p"]
    doc = workflow([{**task("a"), "varsFiles": ["v.yaml"]}])
    files = {"v.yaml": {"p": {"deep": ["${{ vars.q }}"]}}}
    captured = CapturedVars(files=files, cli={"c": "${{ vars.p }}"})
    assert _var_read_paths(doc, captured) == ["spec.tasks.0.varsFiles.0", None]
    # Reading inputs, memory or a needed task's output is what variables are for.
    fine = {
        **task("b", needs=["a"]),
        "vars": {"p": "${{ tasks.a.output }}", "i": "${{ inputs.x }}"},
    }
    compile_ok(workflow([task("a"), fine], inputs={"x": 1}, vars={"m": "${{ memory.k }}"}))


def _located(doc: dict[str, Any]) -> list[tuple[str, str | None, str]]:
    """(code, path, message) of every diagnostic of a rejected document."""
    with pytest.raises(ValidationError) as info:
        compile_workflow(doc)
    return [(d.code, d.path, d.message) for d in info.value.diagnostics]


def test_a_policy_provider_no_provider_declares_is_found_for_a_warning() -> None:
    # A name no provider has allows no model call (a misspelt one leaves the provider meant
    # denied); a workflow written for the original may list more than it declares: it still
    # compiles, and the name is found for a warning at its entry.
    doc = _agent_doc({})
    doc["spec"]["policy"] = {"approval": "never", "providers": ["p", "ghost"]}
    compile_ok(doc)
    [found] = unused_key_findings(doc)
    assert (found.code, found.path) == ("missing_reference", "spec.policy.providers.1")
    assert "`ghost`" in found.message and found.help == "check the spelling (declared: p)"
    doc["spec"]["policy"]["providers"] = ["p"]
    assert unused_key_findings(doc) == []
    # A pack may declare it: a workflow that loads packs is not judged here.
    doc["spec"]["policy"]["providers"] = ["ghost"]
    doc["spec"]["packs"] = [{"name": "x", "version": "1.0.0", "path": "packs/x"}]
    assert unused_key_findings(doc) == []


def test_an_agents_retry_is_found_for_a_warning_naming_the_tasks_using_it() -> None:
    # spec/dsl.md §5: an agent's `retry` is parsed, but only the task's retry applies; the
    # workflow compiles (the original accepts it) and the key is found, never silently ignored.
    doc = _agent_doc({"retry": {"maxAttempts": 3}})
    doc["spec"]["tasks"].append(task("again", "agent:w", with_={"prompt": "more"}))
    plan = compile_ok(doc)
    assert plan.task("ask").retry.max_attempts == 1  # the agent's is not applied
    [found] = unused_key_findings(doc)
    assert (found.code, found.path, found.point) == (
        "schema_violation",
        "spec.agents.w.retry",
        "key",
    )
    assert "has no effect" in found.message
    assert found.help == "put `retry` on the tasks that use `agent:w` instead (`ask`, `again`)"
    # A default-valued retry says nothing, and an agent no task uses still gets the warning.
    for quiet in ({}, {"maxAttempts": 1}, {"maxAttempts": 1, "backoffMs": 0}):
        assert unused_key_findings(_agent_doc({"retry": quiet})) == []
    unused = _agent_doc({})
    unused["spec"]["agents"]["idle"] = {**unused["spec"]["agents"]["w"], "retry": {"backoffMs": 5}}
    [found] = unused_key_findings(unused)
    assert found.path == "spec.agents.idle.retry"
    assert found.help == "put `retry` on the tasks that use `agent:idle` instead"


def test_a_bad_template_in_action_defaults_is_reported_at_the_action() -> None:
    # Syntax: once, at the action's key, however many tasks use the action.
    broken = {"kind": "builtin.assign", "with": {"x": "${{ inputs.nope", "y": 1}}
    doc = workflow(
        [task("a", "action:broken"), task("b", "action:broken")], actions={"broken": broken}
    )
    assert _located(doc) == [
        (
            "invalid_template",
            "spec.actions.broken.with.x",
            "unclosed template expression in '${{ inputs.nope'",
        )
    ]
    # A task that replaces the key does not use the default: nothing to report for it.
    compile_ok(workflow([task("a", "action:broken", with_={"x": 1})], actions={"broken": broken}))
    # A read against needs is the task's: at the action's key, the task named in the message.
    actions = {"reads": {"kind": "builtin.assign", "with": {"x": "${{ tasks.src.output }}"}}}
    actions["put"] = {"kind": "builtin.assign", "with": {}}
    doc = workflow([task("src"), task("b", "action:reads")], actions=actions)
    assert _located(doc) == [
        (
            "invalid_template",
            "spec.actions.reads.with.x",
            "task `b` reads tasks.src.output (in action `reads`'s with defaults) "
            "without needing `src`",
        )
    ]
    compile_ok(workflow([task("src"), task("b", "action:reads", needs=["src"])], actions=actions))


def test_a_task_dropped_for_its_uses_is_not_reported_again() -> None:
    # `a` is reported once; the needs, reads, condition, route and run output naming it follow
    # from that report (no cascade), while an independent problem is still reported.
    route = {"select": "${{ tasks.b.output.x }}", "cases": [{"equals": 1, "tasks": ["a"]}]}
    doc = workflow(
        [
            task("a", "action:nope"),
            task("b", needs=["a"], with_={"x": "${{ tasks.a.output }}"}),
            task("r", "router", needs=["b"], route={**route, "default": []}),
            task("c", when="${{ tasks.a.output.ok }}", needs=["ghost"]),
        ],
        outputs={"o": "${{ tasks.a.output }}"},
    )
    assert [(code, path) for code, path, _ in _located(doc)] == [
        ("missing_reference", "spec.tasks.0.uses"),
        ("missing_reference", "spec.tasks.3.needs.0"),
    ]


def test_a_with_template_problem_is_located_at_its_value() -> None:
    nested = {"one": 1, "three": {"deep": ["ok", "${{ inputs.x"]}}
    with pytest.raises(ValidationError) as info:
        compile_workflow(workflow([task("t", with_=nested)]), file="wf.yaml")
    [diag] = info.value.diagnostics
    assert (diag.code, diag.path) == ("invalid_template", "spec.tasks.0.with.three.deep.1")


@pytest.mark.parametrize(
    ("name", "binder"),
    [
        ("foreachIndex", "foreach"),
        ("matrix", "matrix"),
        ("matrixIndex", "matrix"),
        ("loopIndex", "loop"),
        ("loopPrevious", "loop"),
    ],
)
def test_engine_variable_read_outside_its_expansion(name: str, binder: str) -> None:
    read = "${{ vars." + name + " }}"
    doc = workflow([task("a", with_={"x": read}), task("b", when=f"vars.{name} == 1")])
    with pytest.raises(ValidationError) as info:
        compile_workflow(doc)
    found = {(d.code, d.path) for d in info.value.diagnostics}
    assert found == {
        ("invalid_template", "spec.tasks.0.with.x"),
        ("invalid_template", "spec.tasks.1.when"),
    }
    assert all(f"only a {binder} expansion" in d.message for d in info.value.diagnostics)


def test_engine_variables_read_by_the_children_that_bind_them() -> None:
    loop = {"maxIterations": 2, "while": "${{ vars.loopIndex < 3 }}"}
    compile_ok(
        workflow(
            [
                task(
                    "l",
                    loop=loop,
                    with_={"i": "${{ vars.loopIndex }}", "p": "${{ vars.loopPrevious }}"},
                ),
                task(
                    "f", foreach={"items": [1], "as": "n"}, with_={"i": "${{ vars.foreachIndex }}"}
                ),
                task("m", matrix={"axes": {"os": ["l"]}}, with_={"m": "${{ vars.matrix.os }}"}),
            ]
        )
    )
    # A foreach child binds no loop variable; an action's args are rendered like `with`.
    doc = workflow(
        [task("f", "action:echo", foreach={"items": [1]})],
        actions={
            "echo": {
                "kind": "builtin.shell.exec",
                "command": "echo",
                "args": ["${{ vars.loopIndex }}"],
            }
        },
    )
    with pytest.raises(ValidationError) as info:
        compile_workflow(doc)
    assert [(d.code, d.path) for d in info.value.diagnostics] == [
        ("invalid_template", "spec.actions.echo.args.0")
    ]


def test_a_nested_output_text_is_reported_at_its_own_path() -> None:
    outputs = {"x": {"y": ["fine", "${{ tasks.ghost.output }}"]}, "z": "${{ tasks.a.output. }}"}
    with pytest.raises(ValidationError) as info:
        compile_workflow(workflow([task("a")], outputs=outputs))
    found = sorted((d.code, d.path) for d in info.value.diagnostics)
    assert found == [
        ("invalid_template", "spec.outputs.z"),
        ("missing_reference", "spec.outputs.x.y.1"),
    ]


def test_an_unknown_need_points_at_its_entry_and_suggests_the_near_id() -> None:
    doc = workflow([task("stash"), task("b", needs=["stash", "stahs"])])
    with pytest.raises(ValidationError) as info:
        compile_workflow(doc)
    [diag] = info.value.diagnostics
    assert (diag.code, diag.path) == ("missing_reference", "spec.tasks.1.needs.1")
    assert diag.help is not None and diag.help.startswith("did you mean `stash`?")
