"""``${{ EXPR }}`` templates: parsing, reference discovery and rendering (spec/dsl.md §6.1–§6.2).

Invariants:
- ``${{`` opens an expression and the first ``}}`` after it closes it; an unclosed or empty
  expression is a ``TemplateError``. There is no escape syntax.
- A template string that is exactly one expression (no text around it, not even spaces)
  renders to the raw JSON value; a condition there (a comparison, or ``not …``) renders a bool.
- Anywhere else an expression is interpolated as text: null → ``null``, booleans, numbers as
  the original's JSON writes them (``floattext``: ``0.00001``, ``1e16``), strings verbatim;
  objects and arrays are an error, and so is a condition (conditions only make sense as a
  whole value).
- Rendering walks values recursively and never keys; rendered text is never scanned again, so a
  value containing ``${{`` is inert data.
- The context is ``{"inputs": …, "vars": …, "memory": …, "tasks": {id: {"output": …}}}``.
"""

from __future__ import annotations

import copy
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import overload

from agentctl.core.conditions import (
    Condition,
    ReadContext,
    Reference,
    TemplateError,
    evaluate,
    is_condition_expression,
    parse_condition,
    parse_reference,
    resolve,
)
from agentctl.core.floattext import number_text
from agentctl.core.jsonvalue import JsonObject, JsonValue

__all__ = [
    "Expression",
    "Reference",
    "Template",
    "TemplateError",
    "as_text",
    "find_references",
    "is_exact_expression",
    "parse_template",
    "referenced_input_names",
    "referenced_task_ids",
    "render",
    "render_text",
    "scalar_text",
]

_OPEN = "${{"
_CLOSE = "}}"


@dataclass(frozen=True)
class Expression:
    """One ``${{ … }}`` occurrence: ``text`` is the trimmed inside, ``start:end`` its span."""

    text: str
    start: int
    end: int
    reference: Reference
    condition: Condition | None = None


@dataclass(frozen=True)
class Template:
    """A parsed template: its source text and the expressions found in it, in order."""

    source: str
    expressions: tuple[Expression, ...]

    @property
    def is_exact(self) -> bool:
        """True when the whole string is one expression."""
        only = self.expressions[0] if len(self.expressions) == 1 else None
        return only is not None and only.start == 0 and only.end == len(self.source)


def _scan(text: str) -> Iterator[tuple[int, int, str]]:
    cursor = 0
    while (start := text.find(_OPEN, cursor)) != -1:
        close = text.find(_CLOSE, start + len(_OPEN))
        if close == -1:
            raise TemplateError(f"unclosed template expression in {text!r}")
        inner = text[start + len(_OPEN) : close].strip()
        if not inner:
            raise TemplateError(f"empty template expression in {text!r}")
        cursor = close + len(_CLOSE)
        yield start, cursor, inner


def parse_template(text: str) -> Template:
    """Parse every expression of ``text``; raises ``TemplateError`` on any malformed one."""
    spans = list(_scan(text))
    exact = len(spans) == 1 and spans[0][0] == 0 and spans[0][1] == len(text)
    expressions = []
    for start, end, inner in spans:
        if is_condition_expression(inner):
            if not exact:
                raise TemplateError(
                    f"condition `{inner}` must be the whole value, not part of a text"
                )
            cond = parse_condition(inner)
            expressions.append(Expression(inner, start, end, cond.reference, cond))
        else:
            expressions.append(Expression(inner, start, end, parse_reference(inner)))
    return Template(text, tuple(expressions))


def is_exact_expression(text: str) -> bool:
    """True when ``text`` is exactly one well-formed expression; malformed text is not."""
    try:
        return parse_template(text).is_exact
    except TemplateError:
        return False


def _walk_strings(value: object) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, list | tuple):
        for item in value:
            yield from _walk_strings(item)
    elif isinstance(value, Mapping):
        for item in value.values():
            yield from _walk_strings(item)


def find_references(value: object) -> list[Reference]:
    """Every path read by the templates inside ``value`` (values only, in document order)."""
    found: list[Reference] = []
    for text in _walk_strings(value):
        found.extend(expr.reference for expr in parse_template(text).expressions)
    return found


def referenced_input_names(value: object) -> set[str]:
    """The run input names (``inputs.NAME…``) the templates inside ``value`` read. Text that
    is not a well-formed template is skipped: this only answers "is NAME read anywhere"."""
    return referenced_keys(value, "inputs")


def referenced_keys(value: object, root: str) -> set[str]:
    """The keys of ``root`` (``inputs``, ``memory``: ``root.KEY…``) the templates inside
    ``value`` read; malformed text is skipped, as in ``referenced_input_names``."""
    names: set[str] = set()
    for text in _walk_strings(value):
        if _OPEN not in text:
            continue
        try:
            expressions = parse_template(text).expressions
        except TemplateError:
            continue
        names.update(
            e.reference.segments[0]
            for e in expressions
            if e.reference.root == root and e.reference.segments
        )
    return names


def referenced_task_ids(value: object) -> list[str]:
    """The distinct task ids read via ``tasks.ID.output`` inside ``value``, first-seen order."""
    ids = (ref.task_id for ref in find_references(value) if ref.task_id is not None)
    return list(dict.fromkeys(ids))


def scalar_text(value: JsonValue) -> str | None:
    """A JSON scalar as an expression inside a longer text renders it (module docstring);
    ``None`` for an object or array, which has no such text."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return number_text(value)
    if isinstance(value, str):
        return value
    return None


def as_text(expr: Expression, value: JsonValue) -> str:
    """``value`` as ``expr`` inside a longer text renders it (module docstring)."""
    text = scalar_text(value)
    if text is None:
        raise TemplateError(f"embedded object or array `{expr.text}` cannot be rendered into text")
    return text


def _render_parsed(template: Template, context: ReadContext) -> JsonValue:
    if template.is_exact:
        expr = template.expressions[0]
        if expr.condition is not None:
            return evaluate(expr.condition, context)
        # A copy, so a caller mutating the rendered value cannot corrupt the context.
        return copy.deepcopy(resolve(expr.reference, context))
    pieces: list[str] = []
    cursor = 0
    for expr in template.expressions:
        pieces.append(template.source[cursor : expr.start])
        pieces.append(as_text(expr, resolve(expr.reference, context)))
        cursor = expr.end
    pieces.append(template.source[cursor:])
    return "".join(pieces)


def render_text(text: str, context: ReadContext) -> JsonValue:
    """Render one string: a raw JSON value when exact, else the interpolated text."""
    if _OPEN not in text:
        return text
    return _render_parsed(parse_template(text), context)


@overload
def render(value: Mapping[str, JsonValue], context: ReadContext) -> JsonObject: ...
@overload
def render(value: JsonValue, context: ReadContext) -> JsonValue: ...
def render(value: JsonValue | Mapping[str, JsonValue], context: ReadContext) -> JsonValue:
    """Render every string inside ``value``; keys and non-string scalars pass unchanged."""
    if isinstance(value, str):
        return render_text(value, context)
    if isinstance(value, list | tuple):
        return [render(item, context) for item in value]
    if isinstance(value, dict | Mapping):  # a dict without the ABC's Python-level check
        return {key: render(item, context) for key, item in value.items()}
    return value
