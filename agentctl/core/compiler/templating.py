"""The compiler's view of templates: static checks over ``agentctl.core.templates`` plus the
textual helpers sub-workflow flattening needs.

Invariant: functions here are total — problems come back as strings, never as exceptions —
and the grammar is exactly the runtime's (``core.templates`` / ``core.conditions``), so a
plan that compiles never fails later on template syntax.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

from agentctl.core.conditions import TemplateError, parse_condition
from agentctl.core.templates import is_exact_expression, parse_template, referenced_task_ids

OPEN = "${{"
CLOSE = "}}"


def is_exact_template(text: str) -> bool:
    """True when ``text`` is one whole well-formed ``${{ ... }}`` expression."""
    return is_exact_expression(text)


def template_problem(text: str) -> str | None:
    """The syntax or expression problem of a string value, or None."""
    try:
        parse_template(text)
    except TemplateError as exc:
        return str(exc)
    return None


def task_references(text: str) -> list[str]:
    """Task ids read by the expressions of ``text`` (empty when it does not parse)."""
    try:
        return referenced_task_ids(text)
    except TemplateError:
        return []


def condition_problem(text: str) -> str | None:
    """The problem of a condition (bare or one exact template), or None."""
    try:
        parse_condition(text)
    except TemplateError as exc:
        return str(exc)
    return None


def condition_tasks(text: str) -> list[str]:
    try:
        task_id = parse_condition(text).reference.task_id
    except TemplateError:
        return []
    return [] if task_id is None else [task_id]


def iter_strings(value: Any) -> Iterator[str]:
    """Every string *value* (never a key) nested in a JSON value."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, list | dict):
        for item in value.values() if isinstance(value, dict) else value:
            if isinstance(item, str):  # no nested generator per scalar: most items are
                yield item
            elif isinstance(item, list | dict):
                yield from iter_strings(item)


def templated_strings_at(value: Any, path: str) -> Iterator[tuple[str, str]]:
    """Every string *value* nested in a JSON value that holds template syntax (``${{`` or
    ``}}``), with its dotted path below ``path`` (list items by index), so a diagnostic points
    at the value itself. A path is spelled only for such a string and the containers on the
    way to one (the compile walks every task's ``with``)."""
    if isinstance(value, str):
        if OPEN in value or "}}" in value:
            yield path, value
        return
    if not isinstance(value, list | dict):
        return
    items = value.items() if isinstance(value, dict) else enumerate(value)
    for key, item in items:
        if isinstance(item, str):
            if OPEN in item or "}}" in item:
                yield f"{path}.{key}", item
        elif isinstance(item, list | dict):
            yield from templated_strings_at(item, f"{path}.{key}")


def map_strings(value: Any, change: Callable[[str], str]) -> Any:
    """A copy of a JSON value with ``change`` applied to every string value."""
    if isinstance(value, str):
        return change(value)
    if isinstance(value, list):
        return [map_strings(item, change) for item in value]
    if isinstance(value, dict):
        return {key: map_strings(item, change) for key, item in value.items()}
    return value


def map_expressions(text: str, change: Callable[[str], str]) -> str:
    """``text`` with ``change`` applied to the inside of every ``${{ }}`` span."""
    out: list[str] = []
    cursor = 0
    start = text.find(OPEN)
    while start != -1:
        end = text.find(CLOSE, start + len(OPEN))
        if end == -1:
            break
        out.append(text[cursor : start + len(OPEN)])
        out.append(change(text[start + len(OPEN) : end]))
        cursor = end
        start = text.find(OPEN, end + len(CLOSE))
    out.append(text[cursor:])
    return "".join(out)
