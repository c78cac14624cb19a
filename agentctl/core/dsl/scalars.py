"""Plain scalars where the schema wants a string: take the text as written.

Job: a user writes ``processAllowlist: [true, agentctl]`` or ``version: 1.10`` and means the
program named ``true`` and the version ``"1.10"``. The YAML resolver has already typed those
plain scalars as a boolean and a number; where validation then asks for a string, the value
is replaced by its source text and the document is validated again.

Invariants:
- Only plain (unquoted) scalars that resolved to a boolean or a number are ever replaced
  (``yamlload.ParsedYaml.plain_texts``); nulls, quoted values and collections never are.
- Only at a path where validation reported ``string_type``: keys that take any JSON value
  (``with``, ``inputs``, ``vars``) keep the typed value, and every other diagnostic is
  reported exactly as before.
- The input document is never mutated; a changed copy is returned.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from pydantic import BaseModel
from pydantic import ValidationError as PydanticValidationError

from agentctl.core.dsl.diagnostics import source_path

M = TypeVar("M", bound=BaseModel)

# Each round can only uncover string-typed keys nested below a replaced one; a document is
# never deeper than the YAML loader allows, so a few rounds reach a fixed point.
_MAX_ROUNDS = 8


def _string_paths(exc: PydanticValidationError, raw: Any) -> set[str]:
    found: set[str] = set()
    for error in exc.errors():
        if error["type"] == "string_type":
            found.add(".".join(source_path(tuple(error["loc"]), raw, keep_last=False)))
    return found


def _replace(raw: Any, path: str, text: str) -> None:
    *parents, last = path.split(".")
    node = raw
    for part in parents:
        node = node[int(part)] if isinstance(node, list) else node[part]
    if isinstance(node, list):
        node[int(last)] = text
    else:
        node[last] = text


@dataclass(frozen=True)
class Validated(Generic[M]):
    """The model (or the last validation error) and the document it was validated from."""

    model: M | None
    raw: Any
    error: PydanticValidationError | None


def validate_as_written(model: type[M], raw: dict[str, Any], texts: dict[str, str]) -> Validated[M]:
    """Validate ``raw``, taking plain scalars as their text where ``model`` wants a string.

    A valid document costs one validation, as before; only a failing one is retried.
    """
    current: Any = raw
    for attempt in range(1, _MAX_ROUNDS + 1):
        try:
            found = model.model_validate(current, by_alias=True, by_name=False)
        except PydanticValidationError as exc:
            fixable = sorted(p for p in _string_paths(exc, current) if p in texts)
            if attempt == _MAX_ROUNDS:
                fixable = []
            if not fixable:
                return Validated(None, current, exc)
            current = copy.deepcopy(current) if current is raw else current
            for path in fixable:
                _replace(current, path, texts[path])
            continue
        return Validated(found, current, None)
    raise AssertionError("unreachable: the last round always returns")
