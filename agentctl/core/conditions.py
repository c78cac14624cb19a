"""The expression language shared by templates and conditions (spec/dsl.md §6.1, §6.3).

An expression is a *path* (``inputs.P``, ``vars.P``, ``memory.P``, ``tasks.ID.output[.P]``) or a
*condition*: ``[not ]PATH`` (truthiness) or ``[not ]PATH OP LIT``. This module owns paths,
their resolution against a runtime context, conditions and condition decisions; the
``${{ … }}`` syntax and value rendering live in ``core.templates``, which builds on this
module (that is why ``TemplateError`` is defined here and re-exported there).

Invariants:
- Parsing is total and static: a text either parses or raises ``TemplateError``; nothing here
  evaluates code, indexes arrays, calls functions or compares a path with a path.
- Operators are tried in the fixed order ``==, !=, <=, >=, <, >``; the first one found splits the
  text at its first occurrence (so ``a > "x==y"`` splits at ``==`` and is rejected — the
  original's behaviour, kept on purpose).
- Equality is JSON identity *including the number type*: ``true != 1`` and ``1 != 1.0`` (the
  original compares serde_json values, whose integer and float numbers never compare equal).
- An unquoted literal that is itself a valid path is refused (no path-vs-path comparison);
  ``"inputs.b"`` in JSON quotes stays an ordinary string literal.
- ``and``/``or``/``&&``/``||`` (words any case) outside a quoted or JSON literal are refused:
  the split at the first operator would take ``1 or inputs.b == 2`` as one string literal.
  ``"rock and roll"`` (JSON) and ``'rock and roll'`` (one pair of quotes) stay literals.
- Ordering needs a numeric literal (checked at parse time) and a numeric, non-boolean value
  (checked at evaluation time).
- A condition decision's ``contextDigest`` covers exactly the value the condition read, as
  ``{"<dotted path>": value}``, so unrelated context changes never change the digest.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal, NoReturn, TypeAlias, TypeGuard

from agentctl.core.canonical import v1_digest
from agentctl.core.jsonvalue import JsonObject, JsonValue
from agentctl.errors import RunFailedError

Root = Literal["inputs", "vars", "memory", "tasks"]
Operator = Literal["==", "!=", "<=", ">=", "<", ">"]

OPERATORS: tuple[Operator, ...] = ("==", "!=", "<=", ">=", "<", ">")
ORDERING: frozenset[str] = frozenset({"<=", ">=", "<", ">"})
_SEGMENT = re.compile(r"[A-Za-z0-9_-]+")
_NOT = "not "
_AND_OR = re.compile(r"&&|\|\||(?:^|\s)(?:and|or)(?:\s|$)", re.IGNORECASE)

# What expressions read: each root (inputs, vars, memory, tasks) a mapping of JSON values.
ReadContext: TypeAlias = Mapping[str, Mapping[str, JsonValue]]


class TemplateError(RunFailedError):
    """A template or condition that is malformed, or that cannot be evaluated in a context.

    At run time this fails the task (exit 4); the compiler wraps it into a ``ValidationError``
    with the diagnostic code ``invalid_template`` when it is found at check time.
    """


@dataclass(frozen=True)
class Reference:
    """One path read by an expression.

    ``segments`` follow the root: for ``tasks.build.output.a`` they are
    ``("build", "output", "a")``; ``expression`` is the whole expression text it came from.
    """

    root: Root
    segments: tuple[str, ...]
    expression: str

    @property
    def path(self) -> str:
        return ".".join((self.root, *self.segments))

    @property
    def task_id(self) -> str | None:
        """The task read by a ``tasks.ID.output`` reference, else ``None``."""
        return self.segments[0] if self.root == "tasks" else None


@dataclass(frozen=True)
class Condition:
    """A parsed condition; ``literal`` is meaningful only when ``operator`` is set."""

    text: str
    negated: bool
    reference: Reference
    operator: Operator | None = None
    literal: JsonValue = None


def is_segment(name: str) -> bool:
    """Whether ``name`` is one path segment (spec/dsl.md §6.1: ``[A-Za-z0-9_-]+``): the names
    a template can read, so the only input names a run can use."""
    return _SEGMENT.fullmatch(name) is not None


def _bad_segment(part: str) -> str:
    """Why ``part`` is no path segment, in the words of the mistake that usually made it."""
    if not part:
        return "empty path segment (a leading, trailing or doubled `.`)"
    if "[" in part:
        return f"bad path segment {part!r}: indexing is not supported, only `.NAME` segments"
    return f"bad path segment {part!r}: a segment holds letters, digits, `_` and `-`"


def parse_reference(text: str, expression: str | None = None) -> Reference:
    """Parse a path; raises ``TemplateError`` for an unknown root or a malformed segment."""
    path = text.strip()
    source = path if expression is None else expression
    parts = path.split(".")
    for part in parts:
        if not _SEGMENT.fullmatch(part):
            raise TemplateError(f"unsupported expression `{source}`: {_bad_segment(part)}")
    root, rest = parts[0], tuple(parts[1:])
    if root in ("inputs", "vars", "memory"):
        if not rest:
            raise TemplateError(f"unsupported expression `{source}`: `{root}` needs a key")
    elif root == "tasks":
        if len(rest) < 2 or rest[1] != "output":
            raise TemplateError(
                f"unsupported expression `{source}`: task reads are `tasks.ID.output[.PATH]`"
            )
    else:
        raise TemplateError(
            f"unsupported expression `{source}`: roots are inputs, vars, memory and tasks"
        )
    return Reference(root=root, segments=rest, expression=source)  # type: ignore[arg-type]


def resolve(reference: Reference, context: ReadContext) -> JsonValue:
    """The value at ``reference`` in ``context``; a missing key or a non-object step raises.

    A parsed reference always has a segment after its root (``parse_reference``): the first
    step reads the root's mapping, every further one a JSON object.
    """
    scope = context.get(reference.root)
    segments = reference.segments
    if not isinstance(scope, Mapping) or not segments or segments[0] not in scope:
        raise _undefined(reference)
    node = scope[segments[0]]
    for segment in segments[1:]:
        if not isinstance(node, Mapping) or segment not in node:
            raise _undefined(reference)
        node = node[segment]
    return node


def _undefined(reference: Reference) -> TemplateError:
    return TemplateError(f"undefined value `{reference.path}`")


def strip_exact_template(text: str) -> str:
    """The inner expression of ``${{ X }}`` when ``text`` is one, else ``text`` trimmed."""
    trimmed = text.strip()
    if trimmed.startswith("${{") and trimmed.endswith("}}") and "${{" not in trimmed[3:]:
        return trimmed[3:-2].strip()
    return trimmed


def is_condition_expression(expression: str) -> bool:
    """True when an expression is a condition rather than a plain path (it renders a bool)."""
    inner = expression.strip()
    return inner.startswith(_NOT) or any(op in inner for op in OPERATORS)


def parse_condition(text: str) -> Condition:
    """Parse a bare condition or one exact template holding one; raises ``TemplateError``."""
    inner = strip_exact_template(text)
    if not inner:
        raise TemplateError("empty condition")
    if "${{" in inner or "}}" in inner:
        raise TemplateError(f"condition `{text}` must be one expression")
    negated = inner.startswith(_NOT)
    body = inner[len(_NOT) :].strip() if negated else inner
    for op in OPERATORS:
        if op in body:
            left, right = body.split(op, 1)
            literal, whole = _literal(right)
            _refuse_and_or(inner, left if whole else body)
            if isinstance(literal, float) and not math.isfinite(literal):
                # `1e400` parses as infinity: no JSON value compares as one, and a reader
                # who wrote a number would not expect a text comparison, so refuse it.
                raise TemplateError(f"condition `{inner}`: `{right.strip()}` is out of range")
            if _looks_like_path(right):
                raise TemplateError(
                    f"condition `{inner}`: comparing two paths is not supported "
                    "(quote the literal if it is a string)"
                )
            if op in ORDERING and not is_number(literal):
                raise TemplateError(f"condition `{inner}`: `{op}` needs a numeric literal")
            ref = parse_reference(left, inner)
            return Condition(inner, negated, ref, op, literal)
    _refuse_and_or(inner, body)
    return Condition(inner, negated, parse_reference(body, inner))


def _refuse_and_or(inner: str, text: str) -> None:
    if _AND_OR.search(text):
        raise TemplateError(
            f"condition `{inner}`: `and`, `or`, `&&` and `||` are not supported: a condition "
            "is one path or one path compared with one literal (quote a literal that holds them)"
        )


def _looks_like_path(text: str) -> bool:
    # An unquoted literal that parses as a path is almost surely a path-vs-path comparison,
    # which the original silently compared against the literal string; we refuse it instead.
    try:
        parse_reference(text)
    except TemplateError:
        return False
    return True


def check_condition(text: str) -> list[Reference]:
    """Compile-time check of a condition; returns the references it reads."""
    return [parse_condition(text).reference]


def parse_literal(text: str) -> JsonValue:
    """A literal is JSON when it parses as JSON, else the trimmed, quote-stripped string."""
    return _literal(text)[0]


def _literal(text: str) -> tuple[JsonValue, bool]:
    """``parse_literal``'s value, and whether ``text`` is one literal as written: JSON, or one
    pair of quotes around text (an ``and``/``or`` inside it is the literal's own)."""
    raw = text.strip()
    try:
        literal: JsonValue = json.loads(raw, parse_constant=_reject_constant)
        return literal, True
    except ValueError:
        quote = raw[:1]
        whole = len(raw) >= 2 and quote in "'\"" and raw.endswith(quote) and raw.count(quote) == 2
        return raw.strip("'\""), whole


def _reject_constant(name: str) -> NoReturn:
    # NaN and Infinity are not JSON; Python's parser would accept them otherwise.
    raise ValueError(name)


def is_number(value: object) -> TypeGuard[int | float]:
    return isinstance(value, int | float) and not isinstance(value, bool)


def json_identical(left: JsonValue, right: JsonValue) -> bool:
    """Exact JSON identity: same type at every level (``true != 1``, ``1 != 1.0``)."""
    if type(left) is not type(right):
        return False
    # Both sides have one type now; each check on ``right`` only tells mypy so.
    if isinstance(left, list) and isinstance(right, list):
        return len(left) == len(right) and all(map(json_identical, left, right))
    if isinstance(left, dict) and isinstance(right, dict):
        return left.keys() == right.keys() and all(
            json_identical(v, right[k]) for k, v in left.items()
        )
    return bool(left == right)


def truthy(value: JsonValue) -> bool:
    """null false; bool itself; number != 0; non-empty string, array or object."""
    if value is None:
        return False
    if isinstance(value, bool):
        return value
    if is_number(value):
        return bool(value != 0)
    if isinstance(value, str | list | dict):
        return len(value) > 0
    raise TemplateError(f"value of type {type(value).__name__} is not JSON")


def _compare(cond: Condition, value: JsonValue) -> bool:
    op, literal = cond.operator, cond.literal
    if op == "==":
        return json_identical(value, literal)
    if op == "!=":
        return not json_identical(value, literal)
    if not is_number(value):
        raise TemplateError(f"condition `{cond.text}`: `{cond.reference.path}` is not a number")
    if not isinstance(literal, int | float):  # ``parse_condition`` refused it: a hand-built one
        raise TemplateError(f"condition `{cond.text}`: `{op}` needs a numeric literal")
    if op == "<=":
        return value <= literal
    if op == ">=":
        return value >= literal
    if op == "<":
        return value < literal
    return value > literal


def evaluate_read(cond: Condition, context: ReadContext) -> tuple[bool, JsonValue]:
    """Evaluate ``cond``; returns the result and the one value it read."""
    value = resolve(cond.reference, context)
    result = truthy(value) if cond.operator is None else _compare(cond, value)
    return (not result if cond.negated else result), value


def evaluate(cond: Condition | str, context: ReadContext) -> bool:
    """Evaluate a condition (parsed, or text parsed on the fly) against a runtime context."""
    parsed = parse_condition(cond) if isinstance(cond, str) else cond
    return evaluate_read(parsed, context)[0]


def decision(text: str, context: ReadContext) -> JsonObject:
    """The audited decision record: expression, boolean result, digest of what was read."""
    cond = parse_condition(text)
    result, value = evaluate_read(cond, context)
    return {
        "expression": text,
        "result": result,
        "contextDigest": v1_digest({cond.reference.path: value}),
    }
