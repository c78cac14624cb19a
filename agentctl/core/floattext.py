"""Numbers as text the way the original writes them (serde_json, which formats an f64 with the
``ryu`` crate's "pretty" layout).

Python's ``repr`` and ryu choose the same digits (the shortest that read back as the same
float); only the layout differs. With the digits d1..dn and the decimal point position kk
(value = 0.d1..dn × 10^kk), ryu writes:

- ``n <= kk <= 16`` (an integer): the digits, ``kk - n`` zeros, then ``.0`` (``1e15`` →
  ``1000000000000000.0``);
- ``0 < kk <= 16``: the digits with the point inside (``12.34``);
- ``-5 < kk <= 0``: ``0.``, ``-kk`` zeros, the digits (``0.00001``; Python: ``1e-05``);
- otherwise exponent form, ``d1[.d2..dn]e<kk-1>`` with no ``+`` and no leading zeros in the
  exponent (``1e16``, ``1.5e-7``; Python: ``1e+16``, ``1.5e-07``).

Invariants: every float Python writes in plain decimal form is written byte for byte as
``repr`` writes it (the two layouts agree there), so only exponent-form numbers change;
``float(float_text(x)) == x``; ints, bools and null are never touched; text inside JSON
strings is never rewritten. A non-finite float, which no JSON value of the original holds,
keeps the ``json`` module's spelling (``NaN``, ``Infinity``, ``-Infinity``).
"""

from __future__ import annotations

import math
import re

__all__ = ["float_text", "number_text", "respell_json_floats"]

# The layout switches to exponent form past 16 integer digits or 4 leading fractional zeros.
_MOST_INTEGER_DIGITS = 16
_MOST_LEADING_ZEROS = 4

# A number the ``json`` encoder wrote in exponent form (``repr``: the exponent always has a
# sign), followed by what can follow a number in JSON text. A UUID's ``…711e-7209-…`` in a
# string does not match, so a plain text is rarely scanned twice.
_MAYBE_EXPONENT = re.compile(r"e[-+][0-9]+(?:[],}\s]|\Z)")
# A whole JSON string (skipped: its text is data), or a number token in exponent form.
_TOKEN = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"|(-?[0-9]+(?:\.[0-9]+)?e[-+][0-9]+)', re.DOTALL)


def float_text(value: float) -> str:
    """``value`` as the original writes it (module docstring)."""
    if not math.isfinite(value):
        return "NaN" if math.isnan(value) else ("Infinity" if value > 0 else "-Infinity")
    shortest = float.__repr__(value)  # shortest round-trip digits, as ryu's
    if value == 0:
        return shortest  # "0.0" or "-0.0", as ryu writes them
    sign = "-" if shortest[0] == "-" else ""
    mantissa, _, exponent = shortest.lstrip("-").partition("e")
    whole, _, fraction = mantissa.partition(".")
    run = whole + fraction
    digits = run.lstrip("0")
    point = len(whole) + int(exponent or 0) - (len(run) - len(digits))
    return sign + _layout(digits.rstrip("0"), point)


def _layout(digits: str, point: int) -> str:
    """ryu's layout of 0.DIGITS × 10^point (DIGITS: no leading or trailing zero)."""
    count = len(digits)
    if count <= point <= _MOST_INTEGER_DIGITS:
        return digits + "0" * (point - count) + ".0"
    if 0 < point <= _MOST_INTEGER_DIGITS:
        return f"{digits[:point]}.{digits[point:]}"
    if -_MOST_LEADING_ZEROS <= point <= 0:
        return "0." + "0" * -point + digits
    mantissa = digits if count == 1 else f"{digits[0]}.{digits[1:]}"
    return f"{mantissa}e{point - 1}"


def number_text(value: int | float) -> str:
    """A JSON number as text: an int as the ``json`` encoder writes it, a float by
    ``float_text``. (A bool is the caller's: it is an int to Python, ``true`` to JSON.)"""
    if isinstance(value, float):
        return float_text(value)
    return int.__repr__(value)


def respell_json_floats(text: str) -> str:
    """``text``, JSON as the ``json`` encoder wrote it (compact or indented), with every
    exponent-form number spelled by ``float_text``; strings are left exactly as they are.

    The common text has no such number: one scan finds that, and the text comes back as is.
    """
    if _MAYBE_EXPONENT.search(text) is None:
        return text
    return _TOKEN.sub(_respelled, text)


def _respelled(match: re.Match[str]) -> str:
    number = match[1]
    return match[0] if number is None else float_text(float(number))
