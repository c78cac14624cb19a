"""Secret redaction for everything persisted, audited, traced or shown (spec/cli.md §12).

Invariants:
- Every occurrence of every resolved secret string, in any string value at any depth, becomes
  ``[REDACTED]``. Longer secrets are matched first, so a secret that contains another one is
  hidden whole. Secrets of any non-zero length are redacted, even one to three characters: a
  short secret may over-redact ordinary text, which is the safe failure (leaking is not).
  The empty string is ignored (it would match between every character). A secret is also
  matched as an error message may quote it escaped (``_spellings``): a value with a line
  break, quoted by an HTTP library that refuses it, is still hidden.
- The whole value of a sensitive key is replaced. A key is sensitive when its name, lowercased
  with ``_`` and ``-`` removed, *ends with* authorization, apikey, token, secret or password
  (``Authorization``, ``x-api-key``, ``accessToken``, ``client_secret``). A suffix, not a
  substring: usage and budget fields such as ``inputTokens`` or ``maxOutputTokens`` and policy
  keys such as ``secretFileRoots`` must survive redaction.
- Keys are kept as they are; redaction never changes a value's shape except for the sensitive
  keys' values. The input is never mutated.
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
        distinct = {form for s in secrets if s for form in _spellings(s)}
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
            return {
                key: REDACTED
                if isinstance(key, str) and is_sensitive_key(key)
                else self.redact(item)
                for key, item in value.items()
            }
        if isinstance(value, list | tuple):
            return [self.redact(item) for item in value]
        return value


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
