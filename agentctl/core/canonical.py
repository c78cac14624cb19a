"""Canonical JSON and the digests built on it.

Invariant: the same JSON value always yields the same bytes, whatever the key order of the
source; non-ASCII stays as UTF-8 (``ensure_ascii=False``) and a float is spelled as serde_json
spells it (``floattext``: ``0.00001``, ``1e16``, never ``1e-05``, ``1e+16``), so identifiers
and digests match the original's.
``streamed_json_digest`` hashes exactly the bytes ``json_digest`` would, without holding the
whole text (or the whole value) at once, and ``streamed_canonical_json`` is ``canonical_json``
without the whole value: arrays given as ``Items`` are encoded one item at a time.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from json.encoder import (  # type: ignore[attr-defined]  # private names typeshed omits
    c_make_encoder,
    encode_basestring,
)
from typing import TypeAlias

from agentctl.core.floattext import respell_json_floats
from agentctl.core.jsonvalue import JsonValue

# One encoder for every call: ``json.dumps`` with non-default options builds a new encoder
# each time, a fixed cost paid several times per task (digests, fingerprints, rows).
_ENCODER = json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=False)
# The C encoder that ``_ENCODER.encode`` makes afresh on every call (same options, so the same
# text), made once: about half the cost of a small value's encoding, paid ~14 times per effect
# step. No circular-reference markers: a dict shared by two threads' calls would look
# circular, and JSON values are trees (a cycle still fails, with RecursionError).
_C_ENCODE = (
    None
    if c_make_encoder is None
    else c_make_encoder(
        None, _ENCODER.default, encode_basestring, None, ":", ",", True, False, True
    )
)


def canonical_json(value: object) -> str:
    """Compact, sorted-key JSON text of ``value``: anything the ``json`` encoder takes (the
    ledger hands it rows as ``object``; a value it cannot encode raises ``TypeError``)."""
    if _C_ENCODE is None:  # an interpreter without the _json accelerator
        return respell_json_floats(_ENCODER.encode(value))
    # The encoder writes a float as ``repr`` does, which differs from the original only in
    # exponent form: one scan of the text, a rewrite only where such a number is.
    return respell_json_floats("".join(_C_ENCODE(value, 0)))


def in_canonical_order(value: JsonValue) -> JsonValue:
    """``value`` with every object's members in canonical (sorted-key) order, as a value read
    back from its canonical text has them: what a caller shows live then matches what any later
    reader of the stored text shows."""
    if isinstance(value, dict):
        return {key: in_canonical_order(value[key]) for key in sorted(value)}
    if isinstance(value, list):
        return [in_canonical_order(item) for item in value]
    return value


def sha256_hex(data: str | bytes) -> str:
    raw = data.encode("utf-8") if isinstance(data, str) else data
    return hashlib.sha256(raw).hexdigest()


def json_digest(value: object) -> str:
    """Bare SHA-256 hex of the canonical JSON of ``value``."""
    return sha256_hex(canonical_json(value))


def v1_digest(value: object) -> str:
    """Runtime fingerprints and condition digests: ``sha256:v1:<hex>``."""
    return "sha256:v1:" + json_digest(value)


@dataclass(frozen=True)
class Items:
    """A JSON array given as an iterable (e.g. a generator) of plain JSON values, for
    ``streamed_json_digest`` and ``streamed_canonical_json``; ``encoded``: the items are
    given as their canonical JSON texts already (taken as they are, never checked)."""

    source: Iterable[JsonValue]
    encoded: bool = False


# What the streamed encoders take: a JSON value in which objects may hold ``Items`` arrays
# (``Mapping`` so a caller's dict literal of narrower values fits; only dicts are encoded).
Streamable: TypeAlias = "Items | JsonValue | Mapping[str, Streamable]"


def streamed_json_digest(value: Streamable) -> str:
    """``json_digest`` of ``value`` with every ``Items`` expanded, item by item.

    Only the dicts on the way to an ``Items`` are spelled here (keys sorted, as the encoder
    sorts them); everything else goes through the one encoder, so the bytes are the same.
    """
    digest = hashlib.sha256()
    for chunk in _chunks(value):
        digest.update(chunk.encode("utf-8"))
    return digest.hexdigest()


def streamed_canonical_json(value: Streamable) -> str:
    """``canonical_json`` of ``value`` with every ``Items`` expanded, item by item."""
    return "".join(_chunks(value))


def streamed_canonical_pieces(value: Streamable) -> Iterator[str]:
    """``streamed_canonical_json`` as the pieces it joins, each a run of whole JSON tokens (a
    string never spans two pieces): a writer can store the text without ever holding it."""
    return _chunks(value)


def _holds_items(value: Streamable) -> bool:
    return isinstance(value, Items) or (
        isinstance(value, dict) and any(_holds_items(v) for v in value.values())
    )


def _chunks(value: Streamable) -> Iterator[str]:
    if isinstance(value, Items):
        yield "["
        encode = str if value.encoded else canonical_json
        for index, item in enumerate(value.source):
            # Items are plain JSON values (never hold an Items): encoded whole, unscanned,
            # by the one C encoder (``_ENCODER.encode`` builds a new one per call: per task).
            yield ("," if index else "") + encode(item)
        yield "]"
    elif isinstance(value, dict) and _holds_items(value):
        yield "{"
        for index, key in enumerate(sorted(value)):
            yield ("," if index else "") + canonical_json(key) + ":"
            yield from _chunks(value[key])
        yield "}"
    else:
        yield canonical_json(value)
