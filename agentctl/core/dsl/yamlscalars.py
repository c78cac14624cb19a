"""The implicit typing of plain YAML scalars, shared by both YAML loader paths.

Job: the one statement of which plain (unquoted) scalar texts are null, booleans, integers
or floats — a YAML 1.2 "core"-like schema: ``2024-01-01`` and ``yes``/``no``/``on``/``off``
stay strings, only ``true``/``false`` (and their ``True``/``TRUE``/``False``/``FALSE``
spellings) are booleans. ``yamlload`` registers these patterns with PyYAML's resolver (the
exact path); ``yamlevents`` applies them itself (the fast path). Pure: no I/O.

Numbers are read as the original's YAML reader (serde_yaml) reads them, where it departs
from the core schema: digits with a redundant leading zero (``007``, ``-01``, ``00``) are
text, not the integer 7 — a zip code or an id keeps its zeros; ``0b101`` is binary, and the
radix forms take a sign (``-0x1F``, ``+0o17``).
"""

from __future__ import annotations

import re
from typing import Any

TAG = "tag:yaml.org,2002:"
NULL_RE = re.compile(r"^(?:~|null|Null|NULL|)$")
BOOL_RE = re.compile(r"^(?:true|True|TRUE|false|False|FALSE)$")
# ``[-+]?0[0-9]+`` (a redundant leading zero) is no number at all: see the module docstring.
INT_RE = re.compile(r"^[-+]?(?:0|[1-9][0-9]*|0o[0-7]+|0x[0-9a-fA-F]+|0b[01]+)$")
FLOAT_RE = re.compile(
    r"^(?![-+]?0[0-9]+$)(?:[-+]?(?:\.[0-9]+|[0-9]+(?:\.[0-9]*)?)(?:[eE][-+]?[0-9]+)?"
    r"|[-+]?\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN))$"
)
# PyYAML keys implicit resolvers by first character (None: any first character).
BOOL_FIRST = "tTfF"
INT_FIRST = "-+0123456789"
FLOAT_FIRST = "-+0123456789."

# Longer integer literals are refused: Python refuses to convert enormous digit strings, and
# no key of the language takes a number anywhere near this size.
MAX_INT_CHARS = 40


def add_implicit_resolvers(resolver: Any) -> None:
    """Register these patterns on a PyYAML resolver class (a loader's or a dumper's), after its
    own: the loader types plain scalars by them, the dumper quotes a string they would type."""
    resolver.add_implicit_resolver(TAG + "null", NULL_RE, None)
    resolver.add_implicit_resolver(TAG + "bool", BOOL_RE, list(BOOL_FIRST))
    resolver.add_implicit_resolver(TAG + "int", INT_RE, list(INT_FIRST))
    resolver.add_implicit_resolver(TAG + "float", FLOAT_RE, list(FLOAT_FIRST))


def to_int(text: str) -> int:
    """The value of an ``INT_RE`` text (decimal, ``0o`` octal, ``0x`` hex or ``0b`` binary,
    each with an optional sign)."""
    sign = -1 if text.startswith("-") else 1
    body = text.lstrip("+-")
    radix = {"0x": 16, "0o": 8, "0b": 2}.get(body[:2])
    if radix is not None:
        return sign * int(body[2:], radix)
    return sign * int(body, 10)


def to_float(text: str) -> float:
    """The value of a ``FLOAT_RE`` text; YAML spells the specials .inf/.nan (any case)."""
    return float(text.lower().replace(".inf", "inf").replace(".nan", "nan"))


def implicit_tag(text: str) -> str:
    """The tag PyYAML's resolver (with ``yamlload``'s registrations) gives a plain ``text``:
    first-character resolvers in registration order, then the any-character one (null)."""
    first = text[:1]
    if first and first in BOOL_FIRST and BOOL_RE.match(text):
        return TAG + "bool"
    if first and first in INT_FIRST and INT_RE.match(text):
        return TAG + "int"
    if first and first in FLOAT_FIRST and FLOAT_RE.match(text):
        return TAG + "float"
    if NULL_RE.match(text):
        return TAG + "null"
    return TAG + "str"
