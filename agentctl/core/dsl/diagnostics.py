"""Turn pydantic validation errors and rule findings into located ``Diagnostic`` objects.

Invariants:
- Every diagnostic has a code from ``agentctl.errors.DIAGNOSTIC_CODES``: a rule's own code
  (raised with ``base.rule_error``) or ``schema_violation`` for plain schema errors.
- ``path`` is the dotted path of the offending value in the *source* document: pydantic's
  synthetic location parts (union tags, validator names) are dropped by walking the raw data.
- Position: an unknown key points at the key itself, a missing key at the enclosing mapping,
  everything else at the deepest known prefix of the path (see ``Locator``).
"""

from __future__ import annotations

import types
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Annotated, Any, Literal, Protocol, Union, get_args, get_origin

from pydantic import BaseModel
from pydantic import ValidationError as PydanticValidationError

from agentctl.core.floattext import number_text
from agentctl.errors import DIAGNOSTIC_CODES, Diagnostic

Position = tuple[int, int]
Point = Literal["value", "key", "enclosing"]

_EXPECTED = {
    "int_type": "an integer",
    "int_parsing": "an integer",
    "string_type": "a string",
    "bool_type": "true or false",
    "float_type": "a number",
    "dict_type": "a mapping",
    "model_type": "a mapping",
    "model_attributes_type": "a mapping",
    "list_type": "a list",
}


class PositionSource(Protocol):
    """Position tables as the YAML loader computes them (``yamlload.PositionTables``)."""

    positions: dict[str, Position]
    key_positions: dict[str, Position]


@dataclass
class Locator:
    """Positions of a document's dotted paths (see ``yamlload.ParsedYaml``).

    ``pending``, when set, computes the tables on first use (``Locator.later``): a document
    without problems is never located, so its positions are never computed.
    """

    positions: dict[str, Position] = field(default_factory=dict)
    key_positions: dict[str, Position] = field(default_factory=dict)
    pending: Callable[[], PositionSource] | None = field(default=None, repr=False, compare=False)

    @classmethod
    def later(cls, tables: Callable[[], PositionSource]) -> Locator:
        return cls(pending=tables)

    def filled(self) -> Locator:
        """This locator with its tables computed (once)."""
        if self.pending is not None:
            source, self.pending = self.pending(), None
            self.positions, self.key_positions = source.positions, source.key_positions
        return self

    def locate(self, path: str) -> Position | None:
        """Position of the deepest known prefix of ``path`` (the root counts as a prefix)."""
        self.filled()
        parts = path.split(".") if path else []
        while True:
            found = self.positions.get(".".join(parts))
            if found is not None or not parts:
                return found
            parts.pop()

    def point(self, path: str, how: Point) -> Position | None:
        self.filled()
        if how == "key" and path in self.key_positions:
            return self.key_positions[path]
        if how == "enclosing":
            return self.locate(parent_path(path))
        return self.locate(path)


@dataclass(frozen=True)
class Finding:
    """A rule failure before it is located."""

    code: str
    path: str
    message: str
    help: str | None = None
    point: Point = "value"


def parent_path(path: str) -> str:
    return path.rpartition(".")[0]


def to_diagnostic(finding: Finding, locator: Locator, file: str | None) -> Diagnostic:
    pos = locator.point(finding.path, finding.point)
    line, column = pos if pos is not None else (None, None)
    code = finding.code if finding.code in DIAGNOSTIC_CODES else "schema_violation"
    return Diagnostic(
        code=code,
        message=finding.message,
        file=file,
        line=line,
        column=column,
        path=finding.path or None,
        help=finding.help,
    )


def source_path(loc: tuple[int | str, ...], raw: Any, keep_last: bool) -> list[str]:
    """The parts of ``loc`` that exist in ``raw`` (plus the last one when ``keep_last``).

    A synthetic part can coincide with a real key: the union tag ``env`` of ``{env: X, envv: y}``
    names the reference's own ``env`` key. When following it loses the last part (an unknown
    key, which does exist in ``raw``), the walk is redone skipping it, latest such part first.
    """
    parts, found_last = _walk(loc, raw, None)
    if keep_last and not found_last:
        for skipped in reversed(range(len(loc) - 1)):
            retry, retry_found = _walk(loc, raw, skipped)
            if retry_found and len(retry) == len(parts):
                return retry
        parts.append(str(loc[-1]))
    return parts


def _walk(loc: tuple[int | str, ...], raw: Any, skipped: int | None) -> tuple[list[str], bool]:
    """The parts of ``loc`` found in ``raw`` (never ``loc[skipped]``), and whether the last was."""
    parts: list[str] = []
    current, found = raw, False
    for index, part in enumerate(loc):
        if index == skipped:
            found = False
            continue
        found = _holds(current, part)
        if found:
            current = current[part]
            parts.append(str(part))
    return parts, found


def _holds(node: Any, part: int | str) -> bool:
    if isinstance(node, dict):
        return isinstance(part, str) and part in node
    return isinstance(node, list) and isinstance(part, int) and 0 <= part < len(node)


def findings_from_pydantic(
    exc: PydanticValidationError, raw: Any, root: type[BaseModel]
) -> list[Finding]:
    findings: list[Finding] = []
    for error in exc.errors():
        kind = str(error["type"])
        ctx: dict[str, Any] = dict(error.get("ctx") or {})
        parts = source_path(
            tuple(error["loc"]), raw, keep_last=kind in {"missing", "extra_forbidden"}
        )
        if "at" in ctx:
            parts.extend(str(ctx["at"]).split("."))
        path = ".".join(parts)
        if kind in DIAGNOSTIC_CODES:
            point: Point = "key" if ctx.get("point") == "key" else "value"
            message = str(ctx.get("msg", error["msg"]))
            findings.append(Finding(kind, path, message, ctx.get("help"), point))
        elif kind == "extra_forbidden":
            findings.append(_unknown_key(path, parts, root))
        elif kind == "missing":
            findings.append(_missing_key(path))
        else:
            findings.append(_plain(kind, path, error))
    return findings


def _where(path: str) -> str:
    return _named(parent_path(path))


def _named(parent: str) -> str:
    return f"`{parent}`" if parent else "the document root"


def _unknown_key(path: str, parts: list[str], root: type[BaseModel]) -> Finding:
    # The key as written (``parts``' last), which may itself hold dots: ``path`` joins with them.
    key, parent = (parts[-1], ".".join(parts[:-1])) if parts else ("", "")
    allowed = allowed_keys(root, parent)
    help_text = None
    if allowed:
        import difflib  # here, not at the top: only a document with an unknown key needs it

        close = difflib.get_close_matches(key, allowed, n=1)
        hint = f"did you mean `{close[0]}`? " if close else ""
        help_text = f"{hint}allowed keys here: {', '.join(allowed)}"
    message = f"unknown key `{key}` in {_named(parent)}"
    return Finding("schema_violation", path, message, help_text, "key")


def _missing_key(path: str) -> Finding:
    key = path.rpartition(".")[2]
    return Finding(
        "schema_violation",
        path,
        f"missing required key `{key}` in {_where(path)}",
        f"add `{key}`",
        "enclosing",
    )


def _plain(kind: str, path: str, error: Any) -> Finding:
    shown = f"`{path}`" if path else "the document"
    value = error.get("input")
    if kind in _EXPECTED:
        expected = _EXPECTED[kind]
        message = f"{shown} must be {expected}, got {describe(value)}"
        return Finding("schema_violation", path, message, _type_help(kind, value))
    if kind == "literal_error":
        message = (
            f"{shown}: {error['msg'].replace('Input should be', 'expected')}, got {describe(value)}"
        )
        return Finding("schema_violation", path, message)
    bound = _bound_message(kind, dict(error.get("ctx") or {}), value)
    if bound is not None:
        return Finding("schema_violation", path, f"{shown} {bound}")
    message = f"{shown}: {error['msg']}"
    if not isinstance(value, (dict, list)):
        message += f" (got {describe(value)})"
    return Finding("schema_violation", path, message)


# Range and size errors, said plainly ("must be at least 1") rather than in pydantic's words
# ("Input should be greater than or equal to 1"): (context key, wording).
_BOUNDS = {
    "greater_than_equal": ("ge", "must be at least {}"),
    "less_than_equal": ("le", "must be at most {}"),
    "greater_than": ("gt", "must be greater than {}"),
    "less_than": ("lt", "must be less than {}"),
}


def _bound_message(kind: str, ctx: dict[str, Any], value: Any) -> str | None:
    if kind in _BOUNDS:
        key, wording = _BOUNDS[kind]
        if not isinstance(ctx.get(key), (int, float)):
            return None
        return f"{wording.format(number_text(ctx[key]))}, got {describe(value)}"
    if kind in {"too_short", "too_long"} and isinstance(value, (list, dict)):
        noun = "entry" if isinstance(value, dict) else "item"
        if kind == "too_short":
            limit, side = ctx.get("min_length"), "at least"
        else:
            limit, side = ctx.get("max_length"), "at most"
        if not isinstance(limit, int):
            return None
        count = len(value)
        return f"must hold {side} {_count(limit, noun)}, got {count or 'none'}"
    if kind == "string_too_short" and ctx.get("min_length") == 1:
        return "must not be empty"
    return None


def _count(number: int, noun: str) -> str:
    plural = noun if number == 1 else ("entries" if noun == "entry" else f"{noun}s")
    return f"{number} {plural}"


def _type_help(kind: str, value: Any) -> str | None:
    if isinstance(value, str) and "${{" in value:
        return "write the value itself: a template is not expanded here"
    if kind in {"int_type", "float_type"} and isinstance(value, str):
        return "write the number without quotes"
    if kind == "bool_type":
        return "write true or false (yes/no/on/off and numbers are not booleans)"
    if kind == "string_type" and value is not None:
        return "quote the value to make it a string"
    return None


def describe(value: Any) -> str:
    """A short human description of a JSON value for error messages."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return f"the boolean {str(value).lower()}"
    if isinstance(value, (int, float)):
        return f"the number {number_text(value)}"
    if isinstance(value, str):
        text = value if len(value) <= 40 else value[:37] + "..."
        return f"the string {text!r}"
    if isinstance(value, dict):
        return "a mapping"
    if isinstance(value, list):
        return "a list"
    return type(value).__name__


def allowed_keys(root: type[BaseModel], path: str) -> list[str]:
    """The YAML keys of the model found at ``path`` below ``root`` ([] when not a model)."""
    annotation: Any = root
    for part in path.split(".") if path else []:
        annotation = _unwrap(annotation)
        if isinstance(annotation, type) and issubclass(annotation, BaseModel):
            fields = annotation.model_fields
            match = [f for n, f in fields.items() if (f.alias or n) == part]
            if not match:
                return []
            annotation = match[0].annotation
        elif get_origin(annotation) is dict:
            annotation = get_args(annotation)[1]
        elif get_origin(annotation) is list:
            annotation = get_args(annotation)[0]
        else:
            return []
    annotation = _unwrap(annotation)
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [f.alias or n for n, f in annotation.model_fields.items()]
    if get_origin(annotation) in (Union, types.UnionType):  # a secret reference: any shape's keys
        shapes = [_unwrap(a) for a in get_args(annotation)]
        models = [a for a in shapes if isinstance(a, type) and issubclass(a, BaseModel)]
        return [f.alias or n for m in models for n, f in m.model_fields.items()]
    return []


def _unwrap(annotation: Any) -> Any:
    """Strip ``Annotated`` and ``X | None``; a union of several models stays as it is."""
    while True:
        origin = get_origin(annotation)
        if origin is Annotated:
            annotation = get_args(annotation)[0]
        elif origin in (Union, types.UnionType):
            options = [a for a in get_args(annotation) if a is not type(None)]
            if len(options) != 1:
                return annotation
            annotation = options[0]
        else:
            return annotation
