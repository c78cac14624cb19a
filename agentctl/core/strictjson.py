"""Strict JSON for everything a user hands the command line (inputs, evidence, results).

Invariants:
- only RFC 8259 JSON with finite numbers is accepted: Python's ``json`` would also take
  ``NaN``, ``Infinity`` and ``-Infinity`` (and turn ``1e999`` into infinity), which no other
  JSON reader accepts and which would poison digests, the ledger and every later output; they
  are refused as a ``RefusedJsonError`` (exit 2);
- nesting is bounded (``MAX_DEPTH``): deeper documents are refused with a clear message instead
  of exhausting the interpreter's recursion limit somewhere downstream (parser, canonical
  digests, template rendering);
- strings are Unicode text: a lone surrogate escape (``"\\ud800"``), which Python's parser
  takes, is refused too — no database, digest or output could hold it;
- a refusal names what was being read, so the user knows which flag or file to fix.
"""

from __future__ import annotations

import json
import math
from typing import Literal

from agentctl.core.jsonvalue import JsonValue
from agentctl.errors import ValidationError

MAX_DEPTH = 128  # as a workflow document (``dsl.yamlload.MAX_DEPTH``): what one holds, one takes
_Problem = Literal["deep", "surrogate"]


class RefusedJsonError(ValidationError):
    """Text Python's parser would take but we refuse: a non-finite number, too deep nesting.

    Distinct from a plain syntax error so ``--var K=JSON`` can say why such text is refused
    (``--input K=V``, JSON else text, takes it as text like any other non-JSON value).
    """


class _NonFinite(Exception):
    pass


def _refuse_constant(name: str) -> JsonValue:
    raise _NonFinite(name)  # the literal itself; parse_strict words the message


def _finite_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):  # 1e999 is valid JSON syntax but overflows to infinity
        raise _NonFinite(f"{text} (beyond the range of a 64-bit float)")
    return value


def parse_strict(text: str | bytes, what: str) -> JsonValue:
    """Parse ``text`` as strict JSON; ``what`` names the source in error messages."""
    try:
        value: JsonValue = json.loads(
            text, parse_constant=_refuse_constant, parse_float=_finite_float
        )
    except _NonFinite as exc:
        raise RefusedJsonError(
            f"{what} contains {exc}, which is not valid JSON "
            "(NaN, Infinity and -Infinity are refused; use null or a string)"
        ) from None
    except RecursionError:
        raise RefusedJsonError(_too_deep(what)) from None
    except UnicodeDecodeError as exc:  # bytes: say where, not the codec's own words
        raise ValidationError(
            f"{what} is not valid UTF-8 text (byte offset {exc.start}); save it as UTF-8"
        ) from None
    except json.JSONDecodeError as exc:
        raise ValidationError(f"{what} is not valid JSON: {exc}") from None
    problem = _first_problem(value)
    if problem == "deep":
        raise RefusedJsonError(_too_deep(what))
    if problem == "surrogate":
        raise RefusedJsonError(
            f"{what} contains a lone surrogate escape (\\ud800-\\udfff), which is "
            "not Unicode text; escape whole pairs or write the character itself"
        )
    return value


def holds_lone_surrogate(value: object) -> bool:
    """Whether a string anywhere in ``value`` (mapping keys included) holds half of a
    surrogate pair, which no UTF-8 text can."""
    return _first_problem(value, depth_limit=None) == "surrogate"


def _first_problem(value: object, depth_limit: int | None = MAX_DEPTH) -> _Problem | None:
    """One pass over ``value`` (iterative: no recursion to exhaust): ``"deep"`` when arrays
    or objects nest deeper than ``depth_limit``, ``"surrogate"`` when a string (a key
    included) is not Unicode text, else None."""
    stack: list[tuple[object, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict | list):
            if depth_limit is not None and depth > depth_limit:
                return "deep"
            children = [*item.keys(), *item.values()] if isinstance(item, dict) else item
            stack.extend((child, depth + 1) for child in children)
        elif isinstance(item, str) and not item.isascii() and not _is_text(item):
            return "surrogate"
    return None


def _is_text(item: str) -> bool:
    try:
        item.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _too_deep(what: str) -> str:
    return f"{what} is nested more than {MAX_DEPTH} levels deep; flatten it"
