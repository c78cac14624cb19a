"""Places of the language that take only literals, or whose keys can have no effect here, are
judged by ``check`` instead of failing, or silently doing nothing, at run time: a router case's
``equals``, a process action's ``cwd``, ``policy.workspaceRoot``, the width of budget limits,
the nesting depth, a pure task's ``retry``, ``spec.output``, and where a command-line
variable's problem is said to come from.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from compiler_docs import task, workflow
from test_dsl_examples import EXAMPLES, HEAD

from agentctl.core.compiler import CapturedVars, compile_workflow
from agentctl.core.dsl import load_workflow
from agentctl.core.strictjson import parse_strict
from agentctl.errors import Diagnostic, ValidationError


def refusals(source: str) -> list[Diagnostic]:
    with pytest.raises(ValidationError) as info:
        load_workflow(source, "wf.yaml")
    return list(info.value.diagnostics)


def compile_refusals(doc: dict[str, Any], **kwargs: Any) -> list[Diagnostic]:
    with pytest.raises(ValidationError) as info:
        compile_workflow(doc, **kwargs)
    return list(info.value.diagnostics)


# --- a router case's `equals` is literal JSON (spec/dsl.md §4.11) ---------------------------


def _routed(equals: Any) -> dict[str, Any]:
    route = {
        "select": "${{ tasks.src.output.v }}",
        "cases": [{"equals": "go", "tasks": ["x"]}, {"equals": equals, "tasks": ["y"]}],
        "default": [],
    }
    router = task("pick", "router", needs=["src"], route=route)
    return workflow([task("src"), router, task("x", needs=["pick"]), task("y", needs=["pick"])])


@pytest.mark.parametrize(
    ("equals", "path"),
    [
        ("${{ tasks.src.output.v }}", "spec.tasks.1.route.cases.1.equals"),
        ("v-${{ inputs.k }}", "spec.tasks.1.route.cases.1.equals"),
        ({"a": [1, "${{ inputs.k }}"]}, "spec.tasks.1.route.cases.1.equals.a.1"),
    ],
)
def test_a_template_in_a_routers_equals_is_refused(equals: Any, path: str) -> None:
    # It would be compared as text with the selected value, and the router would silently
    # take another branch than the one written.
    [diag] = compile_refusals(_routed(equals))
    assert (diag.code, diag.path) == ("schema_violation", path)
    assert "template" in diag.message and "literal" in diag.message


@pytest.mark.parametrize("equals", ["stop", {"a": ["b", 1]}, "a }} b", None])
def test_a_literal_equals_still_compiles(equals: Any) -> None:
    compile_workflow(_routed(equals))


# --- a pure task's `retry` has no effect (spec/dsl.md §4.5) ---------------------------------


@pytest.mark.parametrize("kind", ["builtin.assign", "builtin.assert", "builtin.memory.read"])
def test_retry_on_a_pure_task_is_a_warning(kind: str) -> None:
    source = HEAD + (
        "metadata: { name: w }\nspec:\n"
        f"  actions: {{ p: {{ kind: {kind} }} }}\n"
        '  tasks: [ { id: gate, uses: "action:p", retry: { maxAttempts: 5 }, '
        "with: { that: true, key: k } } ]\n"
    )
    [warning] = load_workflow(source, "wf.yaml").warnings
    assert (warning.severity, warning.path) == ("warning", "spec.tasks.0.retry")
    assert kind in warning.message and "never retried" in warning.message
    # A default retry says nothing; an effectful kind's retry has an effect.
    plain = source.replace("maxAttempts: 5", "maxAttempts: 1")
    assert load_workflow(plain, "wf.yaml").warnings == []
    effectful = source.replace(f"kind: {kind}", "kind: builtin.memory.write")
    assert load_workflow(effectful, "wf.yaml").warnings == []


# --- spec.output: showDiff and verbose are not read by this implementation ------------------


def test_output_keys_asking_for_something_are_warnings() -> None:
    source = EXAMPLES["e1"].replace(
        "spec:\n", "spec:\n  output: { showDiff: true, verbose: true }\n", 1
    )
    warnings = load_workflow(source, "wf.yaml").warnings
    assert [(w.severity, w.path) for w in warnings] == [
        ("warning", "spec.output.showDiff"),
        ("warning", "spec.output.verbose"),
    ]
    assert "--diff" in warnings[0].message and "--verbose" in warnings[1].message
    # False asks for what happens anyway; an absent block says nothing.
    quiet = source.replace("showDiff: true, verbose: true", "showDiff: false, verbose: false")
    assert load_workflow(quiet, "wf.yaml").warnings == []
    assert load_workflow(EXAMPLES["e1"], "wf.yaml").warnings == []


# --- a literal process `cwd` and `policy.workspaceRoot` a run could never use ---------------


@pytest.mark.parametrize(
    ("cwd", "needle"),
    [
        ("../", "`..`"),
        ("a/../b", "`..`"),
        ("/", "absolute"),
        ("/tmp", "absolute"),
        ("''", "empty"),
        ("' '", "empty"),
        ("./..", "`..`"),
    ],
)
def test_a_literal_cwd_every_run_would_deny_is_refused(cwd: str, needle: str) -> None:
    source = EXAMPLES["e9"].replace("timeoutSeconds: 5,", f"timeoutSeconds: 5, cwd: {cwd},")
    [diag] = refusals(source)
    assert (diag.code, diag.path) == ("schema_violation", "spec.actions.hello.cwd")
    assert needle in diag.message


# `./` and the other spellings made of `.` and `/` name the workspace itself, as `.` does.
@pytest.mark.parametrize(
    "cwd", [".", "./", "'./'", ".//.", "sub", "./sub/", "sub/dir", "'${{ inputs.dir }}'"]
)
def test_a_cwd_inside_the_workspace_or_templated_is_accepted(cwd: str) -> None:
    source = EXAMPLES["e9"].replace("timeoutSeconds: 5,", f"timeoutSeconds: 5, cwd: {cwd},")
    load_workflow(source.replace("spec:\n", "spec:\n  inputs: { dir: sub }\n", 1), "wf.yaml")


@pytest.mark.parametrize("root", ["''", "' '"])
def test_an_empty_workspace_root_is_refused(root: str) -> None:
    source = EXAMPLES["e9"].replace("policy: {", f"policy: {{ workspaceRoot: {root},")
    [diag] = refusals(source)
    assert (diag.code, diag.path) == ("schema_violation", "spec.policy.workspaceRoot")
    assert "empty" in diag.message


# --- integer limits are as wide as the original's u64 / u32 ---------------------------------


_PRICING = (
    "pricing: { version: v, models: { p/m: { inputMicrousdPerMillionTokens: %s, "
    "outputMicrousdPerMillionTokens: 1 } } }"
)


@pytest.mark.parametrize(
    ("block", "key"),
    [
        ("runtime: { budgets: { maxToolCalls: N } }", "maxToolCalls"),
        ("runtime: { budgets: { maxCostMicrousd: N }, " + _PRICING % 1 + " }", "maxCostMicrousd"),
        ("runtime: { " + _PRICING % "N" + " }", "inputMicrousdPerMillionTokens"),
    ],
)
def test_a_limit_beyond_u64_is_refused(block: str, key: str) -> None:
    # The original reads these as u64: a wider number is no limit any other reader could hold.
    providers = "providers: { p: { kind: fake } }"
    source = EXAMPLES["e1"].replace("spec:\n", f"spec:\n  {block}\n  {providers}\n", 1)
    widest = load_workflow(source.replace("N", str(2**64 - 1)), "wf.yaml").document
    assert str(2**64 - 1) in json.dumps(widest)  # kept exactly
    [diag] = refusals(source.replace("N", str(2**64)))
    assert diag.code == "schema_violation"
    assert diag.path is not None and diag.path.endswith(key)


def test_an_agents_token_limits_are_u32_and_u64() -> None:
    source = EXAMPLES["e2"].replace("maxTurns: 2,", "maxTurns: 2, maxOutputTokens: N,")
    load_workflow(source.replace("N", str(2**32 - 1)), "wf.yaml")
    [diag] = refusals(source.replace("N", str(2**32)))
    assert diag.path == "spec.agents.scout.maxOutputTokens"
    usage = EXAMPLES["e2"].replace(
        "maxTurns: 2,", "maxTurns: 2, usageLimit: { maxInputTokens: N },"
    )
    load_workflow(usage.replace("N", str(2**64 - 1)), "wf.yaml")
    [diag] = refusals(usage.replace("N", str(2**64)))
    assert diag.path == "spec.agents.scout.usageLimit.maxInputTokens"


# --- nesting: 128 levels, as the original's YAML reader allows -----------------------------


def _nested(levels: int) -> Any:
    value: Any = "leaf"
    for index in range(levels):
        value = {"a": value} if index % 2 else [value]
    return value


def _deep_workflow(levels: int) -> str:
    """A workflow of ``levels`` containers nested in one another: the root, spec, tasks, the
    task and its ``with`` are five, the value of ``with.v`` holds the rest."""
    doc = json.loads(json.dumps(load_workflow(EXAMPLES["e1"]).raw))
    doc["spec"]["tasks"][0]["with"]["v"] = _nested(levels - 5)
    return json.dumps(doc)


def test_a_document_nested_128_levels_loads_and_129_is_refused() -> None:
    loaded = load_workflow(_deep_workflow(128), "wf.yaml")
    compile_workflow(loaded.document, file="wf.yaml")
    [diag] = refusals(_deep_workflow(129))
    assert diag.code == "yaml_syntax" and "128 levels" in diag.message


def test_command_line_json_nested_128_levels_is_taken_and_129_is_refused() -> None:
    parse_strict(json.dumps({"k": _nested(127)}), "--inputs")
    with pytest.raises(ValidationError, match="nested more than 128 levels"):
        parse_strict(json.dumps({"k": _nested(128)}), "--inputs")


# --- a command-line variable's problem comes from no file ----------------------------------


def test_a_reserved_command_line_variable_names_no_file() -> None:
    doc = workflow([task("a")])
    vars_ = CapturedVars(cli={"foreachIndex": 3, "z": "${{ vars.q }}"})
    found = compile_refusals(doc, file="wf.yaml", variables=vars_)
    assert sorted((d.code, d.file, d.path, d.line) for d in found) == [
        ("invalid_template", None, None, None),
        ("schema_violation", None, None, None),
    ]
    assert all("command line" in d.message for d in found)
