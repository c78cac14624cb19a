"""Evaluation of a planned task against the durable runtime view: contexts, decisions, pure work.

Everything here is deterministic and side-effect free, so the coordinator runs it in-process
and recorded replay could recompute it. Effects are never executed here: for an effectful task
this module only renders the input that the coordinator records before dispatch.

Invariants:
- a task reads only the view it is handed (an immutable snapshot taken before its batch);
- skip records have exactly the shapes of spec/dsl.md §4 (``when``, route, dependency);
- every pure output is checked against the task's output contract before it is returned.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from functools import cached_property
from typing import TypeVar

from agentctl.core import jsonschema
from agentctl.core.actionconfig import render_config
from agentctl.core.canonical import canonical_json, in_canonical_order
from agentctl.core.conditions import ReadContext, decision, json_identical
from agentctl.core.frozen import direct_init
from agentctl.core.jsonvalue import JsonArray, JsonObject, JsonValue, as_list, as_object
from agentctl.core.plan import Plan, PlannedTask
from agentctl.core.templates import render
from agentctl.errors import RunFailedError

# A task's template context: inputs, memory, rendered vars and task outputs (spec/dsl.md §6.5).
Context = dict[str, Mapping[str, JsonValue]]
T = TypeVar("T")

DEFAULT_CONTRACT: JsonObject = {"type": "object"}
SUCCEEDED = "succeeded"
NOT_SUCCEEDED = frozenset({"failed", "skipped", "cancelled"})
AGGREGATE_KINDS = frozenset({"aggregate", "loop_aggregate", "subworkflow_output"})
ROUTE_NOT_SELECTED = "route not selected"  # a route skip record's reason


class TaskFailure(RunFailedError):
    """A task failed deterministically (assertion, template, contract, loop guard)."""


@direct_init
@dataclass(frozen=True)
class Encoded:
    """A JSON value and its canonical JSON text (``core.canonical.canonical_json``)."""

    value: JsonValue
    text: str


@dataclass(frozen=True)
class RuntimeView:
    """What a task may read: run inputs, a memory snapshot, finished tasks' states and outputs."""

    inputs: Mapping[str, JsonValue]
    memory: Mapping[str, JsonValue]
    outputs: Mapping[str, JsonValue] = field(default_factory=dict)
    states: Mapping[str, str] = field(default_factory=dict)
    errors: Mapping[str, str | None] = field(default_factory=dict)
    # Outputs' canonical JSON encoded already, by task; a text is used only for the very value
    # ``outputs`` holds (``core.inputdigest``).
    output_texts: Mapping[str, Encoded] = field(default_factory=dict)

    # A view is one snapshot (its inputs and memory are replaced, never mutated, while it is
    # used), so their texts are encoded once for every task it serves (``core.inputdigest``).
    @cached_property
    def inputs_text(self) -> str:
        return canonical_json(self.inputs)

    @cached_property
    def memory_text(self) -> str:
        return canonical_json(self.memory)


class TaskOutputs(Mapping[str, JsonObject]):
    """``tasks.ID.output`` over the finished outputs, without copying them per task."""

    def __init__(self, outputs: Mapping[str, JsonValue]) -> None:
        self._outputs = outputs

    def __getitem__(self, task_id: str) -> JsonObject:
        return {"output": self._outputs[task_id]}

    def __iter__(self) -> Iterator[str]:
        return iter(self._outputs)

    def __len__(self) -> int:
        return len(self._outputs)

    def __contains__(self, task_id: object) -> bool:
        return task_id in self._outputs


def base_context(view: RuntimeView) -> Context:
    tasks = TaskOutputs(view.outputs)
    return {"inputs": view.inputs, "memory": view.memory, "tasks": tasks, "vars": {}}


def task_context(task: PlannedTask, view: RuntimeView) -> Context:
    """The context of spec/dsl.md §6.5: vars are rendered against inputs/memory/tasks only."""
    ctx = base_context(view)
    if task.vars:  # most tasks have none: their rendering is the empty dict base_context set
        ctx["vars"] = _guard(lambda: render(task.vars, ctx), task)
    return ctx


def render_input(task: PlannedTask, ctx: ReadContext) -> JsonValue:
    rendered: JsonValue = _guard(lambda: render(task.with_, ctx), task)
    return rendered


def render_action_config(task: PlannedTask, ctx: ReadContext) -> JsonObject:
    """The task's action configuration with its ``args`` / ``env`` templates rendered."""
    return _guard(lambda: render_config(task.config(), ctx), task)


# The JSON type a rendered value has, for messages.
_JSON_TYPES = {
    dict: "object",
    list: "array",
    bool: "boolean",
    int: "number",
    float: "number",
    type(None): "null",
}


def render_instructions(task: PlannedTask, ctx: ReadContext) -> str:
    """The agent task's instructions, rendered against its context: they must come out as text
    (an exact template of an object, say, fails the task instead of reaching a provider)."""
    agent = task.agent_config.agent if task.agent_config is not None else {}
    text = agent.get("instructions")
    if not isinstance(text, str):
        return ""
    rendered: JsonValue = _guard(lambda: render(text, ctx), task)
    if not isinstance(rendered, str):
        raise TaskFailure(
            f"task {task.id}: agent instructions must render to text; the exact template "
            f"{text!r} gave a JSON {_JSON_TYPES.get(type(rendered), 'value')}"
        )
    return rendered


def _guard(fn: Callable[[], T], task: PlannedTask) -> T:
    try:
        return fn()
    except RunFailedError as exc:
        raise TaskFailure(f"task {task.id}: {exc.message}") from exc


# ----------------------------------------------------------------------------- skipping


def dependency_skip(task: PlannedTask, view: RuntimeView) -> JsonObject | None:
    """The skip record when a dependency did not succeed (aggregates still run)."""
    if task.kind in AGGREGATE_KINDS:
        return None
    for need in task.needs:
        if view.states.get(need) in NOT_SUCCEEDED:
            return {"reason": "dependency did not succeed", "dependency": need}
    return None


def route_skip(task: PlannedTask, plan: Plan, view: RuntimeView) -> JsonObject | None:
    """The skip record when a router this task needs did not select it."""
    for need in task.needs:
        router = plan.task(need)
        if router.kind != "router" or router.route is None:
            continue
        out = view.outputs.get(need)
        if not isinstance(out, Mapping):
            continue
        routed = {d for case in router.route.cases for d in case.tasks} | set(router.route.default)
        # A router's output is ``_route``'s: its destinations are always an array.
        if task.id in routed and task.id not in as_list(out.get("destinations")):
            return {
                "reason": ROUTE_NOT_SELECTED,
                "route": {
                    "router": need,
                    "selected": out.get("selected"),
                    "matched": out.get("matched"),
                },
            }
    return None


def when_decision(task: PlannedTask, ctx: ReadContext) -> JsonObject | None:
    """The audited condition decision, or None for a task without ``when``."""
    if task.when is None:
        return None
    return dict(_guard(lambda: decision(task.when or "", ctx), task))


def when_skip_record(record: Mapping[str, JsonValue]) -> JsonObject:
    return {"reason": "when condition was false", "condition": dict(record)}


# ----------------------------------------------------------------------------- pure work


def evaluate_pure(
    task: PlannedTask,
    action_kind: str | None,
    ctx: ReadContext,
    plan: Plan,
    view: RuntimeView,
) -> JsonValue:
    """Compute a pure task's output; raises TaskFailure on a deterministic failure."""
    output: JsonValue
    if task.kind == "router":
        output = _route(task, ctx)
    elif task.kind == "aggregate":
        output = {"items": _items(task, view)}
    elif task.kind == "loop_aggregate":
        output = _loop_aggregate(task, ctx, plan, view)
    elif task.kind == "subworkflow_output":
        output = _subworkflow_outputs(task, ctx, view)
    elif task.kind == "subworkflow_input":
        output = render_input(task, ctx)
    elif action_kind in PURE_ACTIONS:
        output = PURE_ACTIONS[action_kind](task, render_input(task, ctx), ctx)
    else:
        raise TaskFailure(f"task {task.id}: {action_kind or task.kind} is not pure")
    check_contract(task, output)
    return output


def _subworkflow_outputs(task: PlannedTask, ctx: ReadContext, view: RuntimeView) -> JsonValue:
    """A sub-workflow's ``outputs``, rendered (as every aggregate, it runs whatever its tasks
    ended as: spec/dsl.md §4.3). One that reads a task that did not succeed fails, saying so."""
    try:
        return render_input(task, ctx)
    except TaskFailure as exc:
        members = task.children or task.needs
        # Skipped counts: a child skipped behind a failure (or by its `when`) carries only
        # its skip record, so a read of its output is what broke the render.
        broken = [c for c in members if view.states.get(c) in NOT_SUCCEEDED]
        if not broken:
            raise
        raise TaskFailure(
            f"{exc.message} ({len(broken)} of its tasks did not succeed: {', '.join(broken[:5])})"
        ) from exc


def _assign(task: PlannedTask, given: JsonValue, ctx: ReadContext) -> JsonObject:
    return {
        "status": "unchanged",
        "changed": False,
        "before": None,
        "after": given,
        "diff": None,
        "output": given,
        "predictability": "fully_predictable",
    }


def _assert(task: PlannedTask, given: JsonValue, ctx: ReadContext) -> JsonObject:
    args = as_object(given)
    that = args.get("that")
    if not isinstance(that, bool):
        # Named as JSON (null, 1, "yes"), not as Python would print it (None, 'yes').
        got = canonical_json(that)
        raise TaskFailure(f"task {task.id}: assert `that` must be a boolean, got {got}")
    if not that:
        raise TaskFailure(f"task {task.id}: {args.get('message') or 'assertion failed'}")
    return {"status": "unchanged", "changed": False, "passed": True}


def _memory_read(task: PlannedTask, given: JsonValue, ctx: ReadContext) -> JsonObject:
    args = as_object(given)
    key = args.get("key")
    memory = ctx["memory"]
    if not isinstance(key, str) or key not in memory:
        raise TaskFailure(f"task {task.id}: working-memory key {key!r} does not exist")
    return {"status": "unchanged", "changed": False, "value": memory[key]}


# The implementation of each pure action kind of the registry (a test checks they agree).
PURE_ACTIONS: dict[str, Callable[[PlannedTask, JsonValue, ReadContext], JsonObject]] = {
    "builtin.assign": _assign,
    "builtin.assert": _assert,
    "builtin.memory.read": _memory_read,
}


def _route(task: PlannedTask, ctx: ReadContext) -> JsonObject:
    assert task.route is not None
    route = task.route
    selected: JsonValue = _guard(lambda: render(route.select, ctx), task)
    for case in route.cases:
        if json_identical(case.equals, selected):
            return {"selected": selected, "matched": True, "destinations": list(case.tasks)}
    return {"selected": selected, "matched": False, "destinations": list(route.default)}


def _items(task: PlannedTask, view: RuntimeView) -> JsonArray:
    return [
        {
            "index": i,
            "taskId": child,
            "state": view.states.get(child),
            "output": view.outputs.get(child),
            "error": view.errors.get(child),
        }
        for i, child in enumerate(task.children)
    ]


def _loop_aggregate(
    task: PlannedTask, ctx: ReadContext, plan: Plan, view: RuntimeView
) -> JsonObject:
    # The items' states and last output, read where ``_items`` reads them.
    states = [view.states.get(child) for child in task.children]
    ran = [state for state in states if state != "skipped"]
    last = task.children[-1] if task.children else None
    if last is not None and states[-1] == SUCCEEDED and task.guard:
        guard_ctx = dict(ctx)
        guard_ctx["vars"] = _next_iteration_vars(plan.task(last), len(states), view)
        if decision(task.guard, guard_ctx)["result"]:
            raise TaskFailure(
                f"task {task.id}: loop guard is still true after maxIterations "
                f"({task.max_iterations}); failing closed"
            )
    return {"iterations": len(ran), "items": _items(task, view)}


def _next_iteration_vars(last: PlannedTask, index: int, view: RuntimeView) -> JsonObject:
    """The vars an iteration after ``last`` would see: the same workflow and task variables
    (rendered now, as its guard would render them), ``loopIndex`` = ``index`` and
    ``loopPrevious`` = ``last``'s output — so the fail-closed check reads what every
    iteration's guard reads."""
    engine = ("loopIndex", "loopPrevious")
    own = {name: value for name, value in last.vars.items() if name not in engine}
    rendered = dict(_guard(lambda: render(own, base_context(view)), last)) if own else {}
    return {**rendered, "loopIndex": index, "loopPrevious": view.outputs.get(last.id)}


def check_contract(task: PlannedTask, output: JsonValue) -> None:
    """Validate an output against the task's contract (default: a JSON object)."""
    if task.output_schema is None and isinstance(output, dict):
        return  # the default contract, a JSON object, met: no schema walk on every task
    schema = task.output_schema if task.output_schema is not None else DEFAULT_CONTRACT
    problems = jsonschema.validate(output, schema)
    if problems:
        raise TaskFailure(f"task {task.id}: {_contract_name(task)}: {'; '.join(problems[:3])}")


def _contract_name(task: PlannedTask) -> str:
    """What the output broke, as the author wrote it: a sub-workflow boundary's contract is
    the definition's ``inputSchema`` / ``outputSchema``, not an "output contract"."""
    workflow = task.subworkflow or "the sub-workflow"  # plans stored before carry no name
    if task.kind == "subworkflow_input":
        return f"the inputs of {workflow} do not match its inputSchema"
    if task.kind == "subworkflow_output":
        return f"the outputs of {workflow} do not match its outputSchema"
    return "output does not match its output contract"


def render_run_outputs(
    outputs_spec: Mapping[str, JsonValue], variables: JsonObject, view: RuntimeView
) -> JsonObject:
    """The run output: rendered ``spec.outputs``, or a map task id → output when empty.
    ``variables`` are the run-level ones (``RunConfig.vars``), rendered first against inputs,
    memory and task outputs as a task's are (spec/dsl.md §6.4).
    Members come in canonical order, as the stored output (canonical JSON) gives them back to
    ``inspect``, replay and fork: the order of a fresh plan's mappings is the document's, a
    stored plan's is sorted, and the run's own outcome must not depend on which it had."""
    if not outputs_spec:
        return {task: view.outputs[task] for task in sorted(view.outputs)}
    ctx = base_context(view)
    try:
        if variables:
            ctx["vars"] = render(variables, ctx)
        rendered = render(dict(outputs_spec), ctx)
    except RunFailedError as exc:
        raise TaskFailure(exc.message) from exc  # the caller names it: "outputs: …"
    return as_object(in_canonical_order(rendered))
