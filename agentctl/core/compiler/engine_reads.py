"""Reads of engine variables (spec/dsl.md §4.8) by tasks that have no such binding.

The engine binds ``vars.foreachIndex`` (and the ``as`` name) in a foreach child,
``vars.matrix`` / ``vars.matrixIndex`` in a matrix child and ``vars.loopIndex`` /
``vars.loopPrevious`` in a loop child — nowhere else. No variable layer may set one of the
reserved names (``variables.RESERVED``), so a template reading one in any other task could only
fail the task when it renders ("undefined value"), with nothing an operator could pass to
satisfy it: ``check`` reports it as ``invalid_template`` at the string that reads it.

A foreach ``as`` name other than the reserved ones is an ordinary variable name outside that
task's children (a ``vars`` layer or ``--var`` may set it), so it is not judged here.

Invariants: pure and total (a template that does not parse is reported elsewhere and skipped
here); a node's ``bindings`` are the whole truth of what the engine binds for it — including
the ones a compensation compile hands over from the source child.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from agentctl.core.actionconfig import templated_strings
from agentctl.core.compiler.diagnostics import Collector
from agentctl.core.compiler.ir import Node
from agentctl.core.compiler.templating import OPEN, templated_strings_at
from agentctl.core.compiler.variables import RESERVED
from agentctl.core.conditions import parse_condition
from agentctl.core.templates import TemplateError, find_references

_BINDERS = {
    "foreachIndex": "foreach",
    "matrix": "matrix",
    "matrixIndex": "matrix",
    "loopIndex": "loop",
    "loopPrevious": "loop",
}


def check_engine_reads(
    node: Node,
    action: tuple[str, Mapping[str, Any]] | None,
    agent: tuple[str, Mapping[str, Any]] | None,
    with_path: str,
    diags: Collector,
) -> None:
    """Every template the task renders (its ``with`` at ``with_path``, the ``with`` defaults
    of its ``action`` it does not replace, that action's ``args``/``env``, its ``when``, its
    ``compensate.with`` and its ``agent``'s instructions) reads only engine variables the
    task's expansion binds. ``action`` / ``agent``: (name, definition) or None."""
    for where, text in _rendered(node, action, agent, with_path):
        for name in _unbound(node, text, condition=where == f"{node.path}.when"):
            diags.add(
                "invalid_template",
                f"task `{node.task['id']}` reads `vars.{name}`, which only a "
                f"{_BINDERS[name]} expansion binds for its own children",
                where,
                help=f"declare the {_BINDERS[name]} on this task, or pass the value "
                "through `with` or another variable name",
            )


def _rendered(
    node: Node,
    action: tuple[str, Mapping[str, Any]] | None,
    agent: tuple[str, Mapping[str, Any]] | None,
    with_path: str,
) -> Iterator[tuple[str, str]]:
    """``(dotted path, text)`` of every templated string the task renders."""
    task = node.task
    yield from templated_strings_at(task.get("with"), with_path)
    if action is not None:
        name, definition = action
        given = task.get("with")
        own = given if isinstance(given, dict) else {}
        defaults = definition.get("with")
        for key, value in defaults.items() if isinstance(defaults, dict) else ():
            if key not in own:
                yield from templated_strings_at(value, f"spec.actions.{name}.with.{key}")
        for sub, text in templated_strings(definition):
            yield f"spec.actions.{name}.{sub}", text
    if isinstance(node.when, str) and node.expansion != "loop":  # (a loop's guard: bound)
        yield f"{node.path}.when", node.when
    compensate = task.get("compensate")
    if isinstance(compensate, dict):
        yield from templated_strings_at(compensate.get("with"), f"{node.path}.compensate.with")
    if agent is not None and isinstance(agent[1].get("instructions"), str):
        name, definition = agent
        key = "instructions" if definition.get("instructionsFile") is None else "instructionsFile"
        yield f"spec.agents.{name}.{key}", definition["instructions"]


def _unbound(node: Node, text: str, *, condition: bool = False) -> list[str]:
    """The reserved engine names ``text`` (a template, or a ``condition``, which may be bare)
    reads that ``node`` has no binding for."""
    if "vars." not in text or (OPEN not in text and not condition):
        return []  # (nearly every string: no parse)
    try:
        references = [parse_condition(text).reference] if condition else find_references(text)
    except TemplateError:
        return []
    names = (
        ref.segments[0]
        for ref in references
        if ref.root == "vars" and ref.segments and ref.segments[0] in RESERVED
    )
    return [name for name in dict.fromkeys(names) if name not in node.bindings]
