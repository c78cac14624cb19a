"""``plan_to_json`` / ``check_result_json`` shapes, predictability, requirements and plan
invariants."""

from __future__ import annotations

import copy
import json
import pickle

from compiler_docs import compile_ok, task, workflow
from test_compiler_properties import rich_doc

from agentctl.core.canonical import canonical_json, json_digest, v1_digest
from agentctl.core.compiler import check_result_json, compile_workflow, plan_to_json
from agentctl.core.compiler.digests import (
    DEFINITION_KEYS,
    _subworkflows_member,
    resolved_definition,
)
from agentctl.core.compiler.ir import Env, with_defaults
from agentctl.core.compiler.serialize import definition_json, task_json


def _doc() -> dict[str, object]:
    return workflow(
        [
            task("calc"),
            task("look", "action:peek", with_={"path": "a.txt"}),
            task("save", "action:save", needs=["calc"], with_={"path": "o", "content": "c"}),
            task("ask", "agent:w", needs=["look"], with_={"prompt": "hi"}),
            task("fan", foreach={"items": [1], "as": "item", "maxItems": 2}),
            task("run", "action:hello"),
        ],
        budgets={"maxTasks": 20},
        actions={
            "put": {"kind": "builtin.assign", "with": {}},
            "peek": {"kind": "builtin.read", "with": {}},
            "save": {"kind": "builtin.write", "with": {}},
            "hello": {"kind": "builtin.shell.exec", "command": "/bin/echo", "args": ["hi"]},
        },
        providers={"sim": {"kind": "fake"}},
        agents={"w": {"provider": "sim", "model": "m", "instructions": "x", "tools": ["t"]}},
        tools={"t": {"kind": "builtin.echo", "effectClass": "pure", "approval": "always"}},
    )


def test_plan_json_shape_and_predictability() -> None:
    plan = compile_ok(_doc())
    data = plan_to_json(plan)
    json.dumps(data)  # plain JSON
    assert data["name"] == "t" and data["order"] == list(plan.order)
    assert data["maxConcurrency"] == 1 and data["budget"] == {"maxTasks": 20}
    assert data["planDigest"] == plan.plan_digest
    by_id = data["tasks"]  # keyed by task id, in compiled order
    assert list(by_id) == data["order"]
    assert by_id["calc"]["predictability"] == "fully_predictable"
    assert by_id["look"]["predictability"] == "partially_predictable"
    assert by_id["save"]["predictability"] == "partially_predictable"
    assert by_id["ask"]["predictability"] == "requires_execution"
    assert by_id["run"]["predictability"] == "requires_execution"
    assert by_id["fan"]["predictability"] == "fully_predictable"
    assert data["predictability"] == "requires_execution"
    assert by_id["save"]["needs"] == ["calc"] and by_id["fan"]["kind"] == "aggregate"
    assert by_id["save"]["retry"] == {"maxAttempts": 1, "backoffMs": 0}
    assert by_id["save"]["definitionFingerprint"].startswith("sha256:v1:")


def test_requirements() -> None:
    requirements = plan_to_json(compile_ok(_doc()))["requirements"]
    assert set(requirements) == {"providers", "tools", "effects", "processes"}
    [provider] = requirements["providers"]
    assert provider["name"] == "sim" and provider["agents"] == ["w"]
    assert "function_tools" in provider["capabilities"]
    assert requirements["tools"][0]["name"] == "t"
    assert requirements["processes"] == [
        {
            "action": "hello",
            "kind": "builtin.shell.exec",
            "command": "/bin/echo",
            "args": ["hi"],
            "isolation": "process",
            "image": None,
        }
    ]
    effects = {(e["task"], e["operation"]): e for e in requirements["effects"]}
    assert effects[("save", "action:save")]["approvalPossible"] is True
    assert effects[("calc", "action:put")]["approvalPossible"] is False
    assert effects[("ask", "tool:t")]["approvalPossible"] is True  # tool approval: always


def test_a_pure_action_is_never_held_for_approval_even_under_always() -> None:
    """Pure kinds are computed, never put to the policy (dsl §3): under `approval: always`
    the plan says so, as the run does; an effectful action and a tool whose contract says
    `approval: always` may still be held."""
    doc = _doc()
    doc["spec"]["policy"] = {**doc["spec"].get("policy", {}), "approval": "always"}
    effects = plan_to_json(compile_ok(doc))["requirements"]["effects"]
    possible = {(e["task"], e["operation"]): e["approvalPossible"] for e in effects}
    assert possible[("calc", "action:put")] is False
    assert possible[("save", "action:save")] is True
    assert possible[("ask", "tool:t")] is True


def test_check_result() -> None:
    plan = compile_ok(_doc())
    assert check_result_json(plan) == {
        "valid": True,
        "workflow": "t",
        "workflowDigest": plan.workflow_digest,
        "planDigest": plan.plan_digest,
        "tasks": 7,
    }


def test_plan_invariants_and_input_untouched() -> None:
    doc = _doc()
    before = copy.deepcopy(doc)
    plan = compile_workflow(doc)
    assert doc == before
    assert [t.position for t in plan.tasks] == list(range(len(plan.tasks)))
    assert tuple(t.id for t in plan.tasks) == plan.order
    for planned in plan.tasks:
        assert all(need in plan.index for need in planned.needs)
        assert all(child in plan.index for child in planned.children)


def test_workflow_digest_is_canonical_document_digest() -> None:
    doc = workflow([task("a", with_={"x": "é"})])
    plan = compile_ok(doc)
    flattened = copy.deepcopy(doc)
    del flattened["spec"]["subworkflows"]
    assert plan.workflow_digest == json_digest(flattened)


def test_plan_digest_and_fingerprints_are_digests_of_their_json() -> None:
    """The compiler joins each task's texts from runs of one encoding (``TaskTexts``); they
    must be exactly the canonical JSON of ``task_json`` and of ``{task, uses}``."""
    # An inverse whose ``with`` spells keys the joins cut at, nested where a text search for
    # them would find them first.
    # (A memory write's ``value`` takes any JSON; a file write's ``content`` is text.)
    value = {"failure": "x", "position": 1, "retry": None}
    inverse = {"uses": "action:remember", "with": {"key": "k", "value": value}}
    made = task("make", "action:save", with_={"path": "p", "content": "c"}, compensate=inverse)
    for doc in (_doc(), rich_doc(), workflow([made])):
        plan = compile_ok(doc)
        env = Env.of(doc)
        for planned in plan.tasks:
            assert sorted(definition_json(planned)) == list(DEFINITION_KEYS)
            uses = resolved_definition(planned, env)
            expected = v1_digest({"task": definition_json(planned), "uses": uses})
            assert planned.definition_fingerprint == expected
        whole = {
            "name": plan.name,
            "workflowDigest": plan.workflow_digest,
            "order": list(plan.order),
            "maxConcurrency": plan.max_concurrency,
            "tasks": [task_json(planned) for planned in plan.tasks],
            "requirements": plan.requirements,
        }
        assert plan.plan_digest == json_digest(whole)


def _subworkflow_defined_not_used() -> dict[str, object]:
    """A sub-workflow declared (its member sorts between the spec's others) but never invoked,
    a non-ASCII string, and a top-level key sorting after ``spec``."""
    inner = {"version": "1.0.0", "tasks": [task("x")], "inputs": {}, "outputs": {}}
    doc = workflow([task("a", with_={"x": "é"})], subworkflows={"unused": inner})
    doc["zzz"] = {"after": "spec"}
    return doc


def test_compile_carries_the_documents_canonical_json_to_creation() -> None:
    """The workflow digest's text is made once and given to the run's creation: it must be
    exactly the document's canonical JSON (``spec.subworkflows`` included), and the digest
    exactly that of the document without it."""
    few = workflow([task("a")])
    few["spec"] = {key: few["spec"][key] for key in ("actions", "subworkflows", "tasks")}
    for doc in (_doc(), _subworkflow_defined_not_used(), few):
        plan = compile_ok(doc)
        flattened = copy.deepcopy(doc)
        del flattened["spec"]["subworkflows"]  # type: ignore[attr-defined]
        assert plan.workflow_digest == json_digest(flattened)
        assert plan.take_document_text(doc) == canonical_json(doc)
        assert plan.take_document_text(doc) is None  # given once, then let go


def test_no_document_text_unless_the_tasks_are_the_documents_own() -> None:
    """A task the compile fills defaults into, or a sub-workflow inlined, makes the digest's
    text differ from the document's: none is carried, and the digest is still right."""
    sparse = workflow([{"id": "a", "uses": "action:put", "with": {"k": 1}}])
    inner = {"version": "1.0.0", "tasks": [task("x")], "inputs": {}, "outputs": {}}
    nested = workflow([task("call", "workflow:sub")], subworkflows={"sub": inner})
    for doc in (sparse, nested):
        plan = compile_ok(doc)
        assert plan.take_document_text(doc) is None
    plan = compile_ok(sparse)
    flattened = copy.deepcopy(sparse)
    del flattened["spec"]["subworkflows"]  # type: ignore[attr-defined]
    flattened["spec"]["tasks"] = [with_defaults(t) for t in sparse["spec"]["tasks"]]  # type: ignore[index]
    assert plan.workflow_digest == json_digest(flattened)


def test_document_text_is_given_only_for_the_compiled_object() -> None:
    doc = _doc()
    plan = compile_ok(doc)
    assert plan.take_document_text(copy.deepcopy(doc)) is None  # equal, not the same object
    assert plan.take_document_text(doc) is None  # let go by the first take
    assert compile_ok(doc) == plan  # the carried text is outside the fields


def test_a_copy_or_pickle_of_the_plan_does_not_carry_the_document_text() -> None:
    """Only the compiled object hands the text over: a copy (shallow or deep) or a pickle is
    an equal plan without it, and taking from them leaves the original's text in place."""
    doc = _doc()
    plan = compile_ok(doc)
    for other in (copy.copy(plan), copy.deepcopy(plan), pickle.loads(pickle.dumps(plan))):
        assert other == plan
        assert other.take_document_text(doc) is None
    assert plan.take_document_text(doc) == canonical_json(doc)


def test_a_text_spelled_otherwise_is_not_cut_but_streamed() -> None:
    """The ``spec.subworkflows`` member is located by spelling what precedes it, then checked:
    a text that does not match there gives no span (the digest is streamed instead), rather
    than a digest of the wrong characters."""
    doc = _subworkflow_defined_not_used()
    text = canonical_json(doc)
    assert _subworkflows_member(doc, text) is not None
    assert _subworkflows_member(doc, text.replace('"spec":{', '"spec": {', 1)) is None
    assert _subworkflows_member(doc, text.replace('"subworkflows"', '"subworkflowz"', 1)) is None
