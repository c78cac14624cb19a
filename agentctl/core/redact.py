"""Secret redaction for everything persisted, audited, traced or shown (spec/cli.md §12).

Invariants:
- Every occurrence of every resolved secret string, in any string at any depth — a value or
  an object's key — becomes ``[REDACTED]``. Longer secrets are matched first, so a secret that
  contains another one is hidden whole. Secrets of any non-zero length are redacted, even one
  to three characters: a short secret may over-redact ordinary text, which is the safe failure
  (leaking is not). A secret that is empty or only whitespace is ignored: it would match
  between every character, or every space of every message, and garble all of them (no such
  value is a usable credential or header: ``coordinator.secrets`` refuses it before use). A
  secret is also matched as an error message may quote it escaped (``_spellings``): a value
  with a line break, quoted by an HTTP library that refuses it, is still hidden.
- The whole value of a sensitive key is replaced. A key is sensitive when its name, lowercased
  with ``_`` and ``-`` removed, *ends with* authorization, apikey, token, secret or password
  (``Authorization``, ``x-api-key``, ``accessToken``, ``client_secret``). A suffix, not a
  substring: usage and budget fields such as ``inputTokens`` or ``maxOutputTokens`` and policy
  keys such as ``secretFileRoots`` must survive redaction. Sensitivity is judged on the key as
  given, before its own redaction.
- A key is redacted as a value is; a key no secret occurs in is kept as it is. When a redacted
  key comes out equal to another key of the same object (``{"a-<s1>": 1, "a-<s2>": 2}``, or
  ``{"<s>": 1, "[REDACTED]": 2}``), no value is dropped: the keys no secret occurred in keep
  their names, and each redacted key, in the object's order, takes the first free name of
  ``K``, ``K#2``, ``K#3``, … (``a-[REDACTED]``, ``a-[REDACTED]#2``). Deterministic: the same
  object with the same secrets always gives the same keys.
- Redaction never changes a value's shape except for the sensitive keys' values and the
  redacted keys. The input is never mutated.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from typing import overload

from agentctl.core.jsonvalue import JsonObject, JsonValue

REDACTED = "[REDACTED]"
SENSITIVE_KEY_SUFFIXES = ("authorization", "apikey", "token", "secret", "password")


def is_sensitive_key(key: str) -> bool:
    normalized = key.lower().replace("_", "").replace("-", "")
    return normalized.endswith(SENSITIVE_KEY_SUFFIXES)


class Redactor:
    """Redacts a fixed set of resolved secret values (and sensitive keys) from values."""

    def __init__(self, secrets: Iterable[str] = ()) -> None:
        distinct = {form for s in secrets if s.strip() for form in _spellings(s)}
        ordered = sorted(distinct, key=lambda s: (-len(s), s))
        self._spelled = tuple(ordered)
        self._pattern = re.compile("|".join(map(re.escape, ordered))) if ordered else None

    def held_back(self, text: str) -> int:
        """How many characters at the end of ``text`` may be the start of a secret (the
        longest suffix that is a proper prefix of one): what a text arriving in pieces must
        keep back until the next piece says whether a secret follows."""
        longest = 0
        for secret in self._spelled:
            for size in range(min(len(secret) - 1, len(text)), longest, -1):
                if text.endswith(secret[:size]):
                    longest = size
                    break
        return longest

    def redact_text(self, text: str) -> str:
        """``text`` with every secret occurrence replaced."""
        if self._pattern is None:
            return text
        return self._pattern.sub(REDACTED, text)

    @overload
    def redact(self, value: str) -> str: ...
    @overload
    def redact(self, value: None) -> None: ...
    @overload
    def redact(self, value: Mapping[str, JsonValue]) -> JsonObject: ...
    @overload
    def redact(self, value: JsonValue) -> JsonValue: ...
    def redact(self, value: object) -> object:
        """A redacted copy of a JSON-like value (tuples become lists, other values pass)."""
        if isinstance(value, str):
            return self.redact_text(value)
        if isinstance(value, Mapping):
            return self._redact_object(value)
        if isinstance(value, list | tuple):
            return [self.redact(item) for item in value]
        return value

    def _redact_object(self, value: Mapping[str, JsonValue]) -> JsonObject:
        """``value`` with its keys and values redacted; equal redacted keys disambiguated
        (module invariants), so no member is lost."""
        if self._pattern is None:  # no secret (most runs): no key can change
            renamed = [(key, key) for key in value]
        else:  # a non-text key (a mapping built in code, not JSON) is kept, as ever
            renamed = [(k, self.redact_text(k) if isinstance(k, str) else k) for k in value]
            if any(new != key for key, new in renamed):
                renamed = _apart(renamed)
        return {
            new: REDACTED if isinstance(key, str) and is_sensitive_key(key) else self.redact(item)
            for (key, new), item in zip(renamed, value.values(), strict=True)
        }


def _apart(renamed: list[tuple[str, str]]) -> list[tuple[str, str]]:
    """``renamed`` (key, redacted key) with each redacted key made distinct from every other
    key: those no secret occurred in keep their names (module invariants)."""
    taken = {new for key, new in renamed if new == key}
    kept = []
    for key, new in renamed:
        if new != key:
            new = _free_name(new, taken)
            taken.add(new)
        kept.append((key, new))
    return kept


def _free_name(name: str, taken: set[str]) -> str:
    """``name``, or the first of ``name#2``, ``name#3``, … no other key has."""
    found, count = name, 1
    while found in taken:
        count += 1
        found = f"{name}#{count}"
    return found


def _spellings(secret: str) -> set[str]:
    """``secret`` and the escaped forms an error message may quote it in: Python's ``repr``
    of the text or of its UTF-8 bytes (an HTTP library naming a header it refuses) and JSON's
    escapes (``\\r``, ``\\n``, ``\\u00e9``) — the same for a plain ASCII secret."""
    forms = {secret, secret.encode("unicode_escape").decode("ascii")}
    forms.add(repr(secret.encode("utf-8"))[2:-1])
    forms.add(json.dumps(secret)[1:-1])
    return forms


class PieceRedaction:
    """Redaction of texts that arrive in pieces (a model's streamed deltas), one text per
    ``key``: a secret split across pieces is hidden whole. Each piece gives its redacted text
    less the tail that may begin a secret (``Redactor.held_back``), which goes in front of
    the next piece of that key; ``flush`` gives what is still held when the pieces end."""

    def __init__(self, redactor: Redactor) -> None:
        self._redactor = redactor
        self._held: dict[str, str] = {}

    def piece(self, key: str, text: str) -> str:
        shown = self._redactor.redact_text(self._held.pop(key, "") + text)
        keep = self._redactor.held_back(shown)
        if keep:
            self._held[key] = shown[-keep:]
            shown = shown[:-keep]
        return shown

    def flush(self) -> dict[str, str]:
        """What is held, by key (no secret: a whole one was redacted), and forget it."""
        held, self._held = self._held, {}
        return held


@overload
def redact(value: str, secrets: Iterable[str] = ()) -> str: ...
@overload
def redact(value: Mapping[str, JsonValue], secrets: Iterable[str] = ()) -> JsonObject: ...
@overload
def redact(value: JsonValue, secrets: Iterable[str] = ()) -> JsonValue: ...
def redact(value: JsonValue | Mapping[str, JsonValue], secrets: Iterable[str] = ()) -> JsonValue:
    """One-shot form of ``Redactor(secrets).redact(value)``."""
    return Redactor(secrets).redact(value)
