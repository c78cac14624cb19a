"""The ``local_hash`` embedding: a deterministic, credential-free lexical vector of a text.

It needs no model, no network and no randomness, so the same text gives the same vector on
every machine and in every process, and tests and offline runs can use vector search. It is
lexical, not semantic: texts are close when they share words or word fragments, not meaning.

Algorithm (version ``local-hash-v1``; the identity's ``model`` salts every hash, so a different
model name gives an unrelated vector space):

1. Normalise the text with Unicode NFKC and case folding; its *tokens* are the maximal runs of
   word characters (``\\w+``: letters, digits, underscore, in any script).
2. Each token contributes two kinds of *features*: the whole token (weight 1.0) and every
   character trigram of the token wrapped in ``<`` and ``>`` (weight 0.5 each), so ``deploy``
   and ``deployment`` share most trigrams and land close together.
3. Each feature is hashed with SHA-256 over ``model NUL kind NUL feature`` (UTF-8). The first
   four bytes, big-endian, modulo ``dimensions`` pick a component; the lowest bit of the fifth
   byte picks the sign (0: +, 1: -). The feature's weight is added there with that sign.
4. The vector is scaled to unit length (L2) and each component rounded to 8 decimals. A text
   without tokens gives the zero vector, which is close to nothing.

Similarity is the cosine of two vectors (their dot product over the product of their lengths);
the zero vector's similarity to anything is 0.

Invariant: pure — the vector depends only on the text and the identity.
"""

from __future__ import annotations

import hashlib
import math
import re
import unicodedata
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from agentctl.core.jsonvalue import JsonObject, JsonValue

LOCAL_HASH = "local_hash"
DEFAULT_MODEL = "local-hash-v1"
DEFAULT_DIMENSIONS = 64
MIN_DIMENSIONS, MAX_DIMENSIONS = 8, 4096
_TOKEN = re.compile(r"\w+")
_WORD_WEIGHT, _TRIGRAM_WEIGHT = 1.0, 0.5


@dataclass(frozen=True)
class EmbeddingIdentity:
    """Which embedding produced a vector; vectors of different identities never compare."""

    provider: str = LOCAL_HASH
    model: str = DEFAULT_MODEL
    dimensions: int = DEFAULT_DIMENSIONS

    @classmethod
    def from_settings(cls, settings: Mapping[str, JsonValue] | None) -> EmbeddingIdentity:
        """The identity of ``spec.memory.longTerm.embedding`` (defaults where absent)."""
        given = settings or {}
        model, dimensions = given.get("model"), given.get("dimensions")
        return cls(
            provider=str(given.get("provider") or LOCAL_HASH),
            model=model if isinstance(model, str) and model else DEFAULT_MODEL,
            dimensions=dimensions if isinstance(dimensions, int) else DEFAULT_DIMENSIONS,
        )

    def to_json(self) -> JsonObject:
        return {"provider": self.provider, "model": self.model, "dimensions": self.dimensions}

    def label(self) -> str:
        return f"{self.provider}/{self.model}/{self.dimensions}"


def tokens(text: str) -> list[str]:
    """The tokens of ``text``: word-character runs of its NFKC, case-folded form."""
    return _TOKEN.findall(unicodedata.normalize("NFKC", text).casefold())


def _features(text: str) -> list[tuple[str, str, float]]:
    found: list[tuple[str, str, float]] = []
    for token in tokens(text):
        found.append(("w", token, _WORD_WEIGHT))
        wrapped = f"<{token}>"
        found.extend(("t", wrapped[i : i + 3], _TRIGRAM_WEIGHT) for i in range(len(wrapped) - 2))
    return found


def local_hash(text: str, identity: EmbeddingIdentity) -> tuple[float, ...]:
    """The ``local_hash`` vector of ``text`` (see the module docstring for the algorithm)."""
    if identity.provider != LOCAL_HASH:
        raise ValueError(f"embedding provider {identity.provider!r} is not local_hash")
    if not MIN_DIMENSIONS <= identity.dimensions <= MAX_DIMENSIONS:
        raise ValueError(f"dimensions must be {MIN_DIMENSIONS}..{MAX_DIMENSIONS}")
    vector = [0.0] * identity.dimensions
    salt = identity.model.encode("utf-8") + b"\x00"
    for kind, feature, weight in _features(text):
        digest = hashlib.sha256(salt + kind.encode() + b"\x00" + feature.encode("utf-8")).digest()
        index = int.from_bytes(digest[:4], "big") % identity.dimensions
        vector[index] += -weight if digest[4] & 1 else weight
    length = math.sqrt(sum(x * x for x in vector))
    if length == 0.0:
        return tuple(vector)
    return tuple(round(x / length, 8) for x in vector)


def cosine(left: Sequence[float], right: Sequence[float]) -> float:
    """The cosine similarity of two vectors of one identity (0 when either is zero)."""
    dot = sum(a * b for a, b in zip(left, right, strict=True))
    norms = math.sqrt(sum(a * a for a in left)) * math.sqrt(sum(b * b for b in right))
    return dot / norms if norms else 0.0
