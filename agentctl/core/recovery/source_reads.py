"""The task outputs a compensation step reads, taken from the source run (spec/dsl.md §4.10).

A compensation runs as a run of its own whose tasks are the inverses alone, so a template in
``compensate.with`` (or in the inverse action's ``with`` defaults, or in a variable of the
task) that reads ``tasks.X.output`` has no task ``X`` to read there. It reads what ``X``
left in the source run: each such expression is replaced, when the step is planned, by the
source output's value — the whole value for a template that is one expression, its text
inside a longer one. Expressions reading anything else (inputs, vars, memory) stay templates
and are rendered by the compensation run as usual.

Invariants:
- pure: values in, values out; the source run's outputs are never modified (copies go out);
- a read the source cannot answer (the task left no output, or no such key) raises
  ``TemplateError``: the step is blocked, never run with a guessed value;
- a value put into the step must not open an expression itself (``${{``): the compensation
  run renders the step's ``with``, and would take the source's data for a template (a
  rendered value is never scanned again; this would make it so) — such a read raises too.
"""

from __future__ import annotations

import copy
from collections.abc import Iterator, Mapping

from agentctl.core.conditions import ReadContext, evaluate, resolve
from agentctl.core.jsonvalue import JsonValue
from agentctl.core.recovery.model import SourceTask
from agentctl.core.templates import Expression, TemplateError, as_text, parse_template

_OPEN = "${{"


def source_context(tasks: Mapping[str, SourceTask]) -> ReadContext:
    """The ``tasks`` scope of the source run's outputs, as templates read it."""
    return {"tasks": {task_id: {"output": task.output} for task_id, task in tasks.items()}}


def with_source_reads(value: JsonValue, context: ReadContext) -> JsonValue:
    """``value`` with every ``tasks.X.output`` read resolved from ``context``; strings without
    such a read, keys and other scalars unchanged."""
    if isinstance(value, str):
        return _text(value, context) if _OPEN in value else value
    if isinstance(value, list):
        return [with_source_reads(item, context) for item in value]
    if isinstance(value, dict):
        return {key: with_source_reads(item, context) for key, item in value.items()}
    return value


def _reads_tasks(expr: Expression) -> bool:
    return expr.reference.root == "tasks"


def _text(text: str, context: ReadContext) -> JsonValue:
    template = parse_template(text)
    if not any(_reads_tasks(expr) for expr in template.expressions):
        return text
    if template.is_exact:
        expr = template.expressions[0]
        if expr.condition is not None:
            return evaluate(expr.condition, context)
        return _inert(expr, copy.deepcopy(resolve(expr.reference, context)))
    pieces: list[str] = []
    cursor = 0
    for expr in template.expressions:
        pieces.append(text[cursor : expr.start])
        original = text[expr.start : expr.end]
        pieces.append(_inlined(expr, context) if _reads_tasks(expr) else original)
        cursor = expr.end
    pieces.append(text[cursor:])
    return "".join(pieces)


def _inlined(expr: Expression, context: ReadContext) -> str:
    """One ``${{ tasks… }}`` inside a longer text, as the text it renders to."""
    text = as_text(expr, resolve(expr.reference, context))
    _inert(expr, text)
    return text


def _strings(value: JsonValue) -> Iterator[str]:
    """Every string value inside ``value`` (keys are never rendered, so they are left out)."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, list):
        for item in value:
            yield from _strings(item)
    elif isinstance(value, dict):
        for item in value.values():
            yield from _strings(item)


def _inert(expr: Expression, value: JsonValue) -> JsonValue:
    """``value``, which the compensation run will render as part of its ``with``: no string
    in it may open an expression, or the source's data would be read as a template there."""
    if any(_OPEN in text for text in _strings(value)):
        raise TemplateError(
            f"`{expr.text}` reads a value holding `${{{{`, which the compensation run would "
            "take for a template of its own"
        )
    return value
