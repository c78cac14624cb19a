"""Which run inputs a compiled plan reads: the names ``inputs.NAME`` its templates and
conditions resolve against the run's inputs; and which working-memory keys a task reads.

Two callers need one answer: the ``--input`` typo guard (a name neither declared nor read is
refused) and the repair rule that blocks reusing a task whose read inputs or memory changed
(``core.recovery.inputs``).

Invariants:
- exactly the texts the runtime renders or evaluates with the run's inputs in scope
  (``core.evaluate``, ``core.actionconfig``): a task's ``with``, its ``vars`` (engine
  bindings — foreach items, matrix values, a loop's ``initial`` — included), its ``when`` and
  loop ``guard`` (bare or braced), a router's ``select``, its compensation's ``with``, the
  ``args``/``env`` of its action configuration, its agent's instructions (an
  ``instructionsFile``'s text is compiled into them), and the plan's ``spec.outputs``;
- the plan is the compiled one, so a sub-workflow definition's own ``inputs.X`` no longer
  appears: flattening rewrote it to its input boundary's output (its inputs are the
  invocation's, never the run's);
- a text that does not parse reads nothing (the compiler has reported it already); pure;
- memory is read the same ways (``memory.KEY``), and by a ``builtin.memory.read`` task's
  ``key``: when that key is itself a template, which key is read is known only at run time.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping

from agentctl.core.actionconfig import templated_strings
from agentctl.core.conditions import TemplateError, parse_condition
from agentctl.core.jsonvalue import JsonValue
from agentctl.core.plan import Plan, PlannedTask
from agentctl.core.templates import referenced_input_names, referenced_keys


def plan_input_names(plan: Plan) -> set[str]:
    """The run input names any task of ``plan`` or its ``spec.outputs`` reads."""
    names = referenced_input_names(plan.run.outputs)
    for task in plan.tasks:
        names |= task_input_names(task)
    return names


def task_input_names(task: PlannedTask) -> set[str]:
    """The run input names ``task`` reads (module docstring): its templates, and its
    conditions, which evaluate without braces too (``when: inputs.flag``)."""
    return _task_keys(task, "inputs")


def task_memory_keys(task: PlannedTask) -> set[str] | None:
    """The working-memory keys ``task`` reads, as ``task_input_names`` finds input names, and
    a ``builtin.memory.read``'s ``key``; None when that key is a template (any key may be
    read)."""
    keys = _task_keys(task, "memory")
    if task.operation == "builtin.memory.read":
        key = task.with_.get("key") if isinstance(task.with_, Mapping) else None
        if not isinstance(key, str) or "${{" in key:
            return None
        keys.add(key)
    return keys


def _task_keys(task: PlannedTask, root: str) -> set[str]:
    names = referenced_keys(list(_templates(task)), root)
    for text in (task.when, task.guard):
        if text:
            names |= _condition_key(text, root)
    return names


def _condition_input(text: str) -> set[str]:
    """The run input a condition reads, bare or braced (one path at most)."""
    return _condition_key(text, "inputs")


def _condition_key(text: str, root: str) -> set[str]:
    """The key of ``root`` a condition reads, bare or braced (one path at most)."""
    try:
        reference = parse_condition(text).reference
    except TemplateError:
        return set()
    return {reference.segments[0]} if reference.root == root and reference.segments else set()


def _templates(task: PlannedTask) -> Iterator[JsonValue]:
    """Every value of ``task`` rendered with the run's inputs in scope (conditions aside)."""
    yield task.with_
    yield task.vars
    if task.route is not None:
        yield task.route.select
    if task.compensate is not None:
        yield task.compensate.with_  # an inverse renders with its run's inputs
    yield [text for _, text in templated_strings(task.config())]
    if task.agent_config is not None:
        yield task.agent_config.agent.get("instructions")


def subworkflows_reading(subworkflows: Mapping[str, object], name: str) -> list[str]:
    """The sub-workflow definitions (``spec.subworkflows``, by name) whose own templates or
    ``when`` conditions read ``inputs.NAME`` — an input of their invocation, which a run input
    never reaches: what a user setting ``--input NAME`` most likely meant."""
    return [
        sub for sub, definition in subworkflows.items() if name in _definition_reads(definition)
    ]


def _definition_reads(definition: object) -> set[str]:
    names = referenced_input_names(definition)
    tasks = definition.get("tasks") if isinstance(definition, Mapping) else None
    for task in tasks if isinstance(tasks, list) else []:
        when = task.get("when") if isinstance(task, Mapping) else None
        if isinstance(when, str):
            names |= _condition_input(when)
    return names
