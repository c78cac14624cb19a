"""Static template checks the compiler needs: syntax, exactness and task references.

This module only inspects template *text*; rendering belongs to ``agentctl.core.templates``.
Grammar checked (spec/dsl.md §6): ``${{ EXPR }}`` where EXPR is ``[not ]PATH [OP LITERAL]``;
roots ``inputs.P``, ``vars.P``, ``memory.P`` (at least one segment) and ``tasks.ID.output[.P]``;
segments ``[A-Za-z0-9_-]+``; OP tried in the order ``== != <= >= < >`` (first split wins);
ordering operators need a numeric literal.

Invariant: functions here are total — they report problems as strings, never raise.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator
from typing import Any

OPEN = "${{"
CLOSE = "}}"
_SEGMENT = re.compile(r"[A-Za-z0-9_-]+")
_OPERATORS = ("==", "!=", "<=", ">=", "<", ">")
_ORDERING = frozenset({"<=", ">=", "<", ">"})
_ROOTS = frozenset({"inputs", "vars", "memory", "tasks"})


def split_template(text: str) -> tuple[list[str], str | None]:
    """The expressions inside ``text`` and the first syntax problem, if any."""
    expressions: list[str] = []
    start = text.find(OPEN)
    while start != -1:
        end = text.find(CLOSE, start + len(OPEN))
        if end == -1:
            return expressions, f"unclosed template expression in {text!r}"
        inner = text[start + len(OPEN) : end].strip()
        if not inner:
            return expressions, f"empty template expression in {text!r}"
        expressions.append(inner)
        start = text.find(OPEN, end + len(CLOSE))
    return expressions, None


def is_exact_template(text: str) -> bool:
    """True when ``text`` is one whole ``${{ ... }}`` expression and nothing else."""
    stripped = text.strip()
    if not (stripped.startswith(OPEN) and stripped.endswith(CLOSE)):
        return False
    inner = stripped[len(OPEN) : -len(CLOSE)]
    return OPEN not in inner and CLOSE not in inner and bool(inner.strip())


def check_expression(expression: str) -> str | None:
    """The problem with one expression (the text between the braces), or None."""
    body = expression.strip()
    if body.startswith("not "):
        body = body[4:].strip()
    for operator in _OPERATORS:
        if operator in body:
            left, _, right = body.partition(operator)
            problem = check_path(left.strip())
            if problem is None and operator in _ORDERING and not _is_number(right.strip()):
                problem = f"operator {operator} needs a numeric literal, got {right.strip()!r}"
            return problem
    return check_path(body)


def check_path(path: str) -> str | None:
    parts = path.split(".")
    root = parts[0]
    if root not in _ROOTS:
        return f"unknown template root {root!r} in {path!r}"
    if any(not _SEGMENT.fullmatch(part) for part in parts[1:]):
        return f"invalid path segment in {path!r}"
    if root == "tasks" and (len(parts) < 3 or parts[2] != "output"):
        return f"task references must read tasks.ID.output, got {path!r}"
    if len(parts) < 2:
        return f"{root} references need at least one segment, got {path!r}"
    return None


def _is_number(literal: str) -> bool:
    try:
        value = json.loads(literal)
    except ValueError:
        return False
    return isinstance(value, int | float) and not isinstance(value, bool)


def template_problem(text: str) -> str | None:
    """The first syntax or expression problem in a string value, or None."""
    expressions, problem = split_template(text)
    if problem is not None:
        return problem
    for expression in expressions:
        problem = check_expression(expression)
        if problem is not None:
            return problem
    return None


def expression_tasks(expression: str) -> list[str]:
    """Task ids an expression reads (``tasks.ID.output...``)."""
    return [match.group(1) for match in _TASK_REF.finditer(expression)]


_TASK_REF = re.compile(r"(?<![A-Za-z0-9_.-])tasks\.([A-Za-z0-9_-]+)")


def task_references(text: str) -> list[str]:
    """Task ids read by the expressions of ``text`` (syntax problems ignored)."""
    expressions, _ = split_template(text)
    found: list[str] = []
    for expression in expressions:
        found.extend(expression_tasks(expression))
    return found


def iter_strings(value: Any) -> Iterator[str]:
    """Every string *value* (never a key) nested in a JSON value."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, list):
        for item in value:
            yield from iter_strings(item)
    elif isinstance(value, dict):
        for item in value.values():
            yield from iter_strings(item)


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
