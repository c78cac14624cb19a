"""The fast YAML path: libyaml's events turned straight into JSON data, no node tree.

Job: for the common document — no anchors or aliases, no tags, nothing the loader must
refuse — build the value and the plain-scalar texts (``yamlload.ParsedYaml.plain_texts``)
directly from libyaml's parse events, in one pass. The composed node tree of the exact path
holds two source marks and a node object per value (~70 MB for a 10,000-task workflow);
here nothing is kept but the result. Source positions are not recorded: ``yamlload``
computes them from the source on demand, only when a diagnostic needs one.

Invariants:
- a document this path returns is one the exact path (``yamlload``) accepts, with an equal
  value and equal ``plain_texts``; scalars are typed by ``yamlscalars``, the rules the exact
  path's resolver uses;
- a key is its text whatever it looks like (``1``, ``true``, ``~``), as on the exact path;
- anything unusual — an anchor, alias or explicit tag, a duplicate key (``1`` and ``"1"``
  included), a collection as a key, a non-finite or overlong number, nesting near
  ``MAX_DEPTH``, several documents, an empty document, a root that is not a collection, or
  any libyaml error — returns None, and the exact path decides (with its diagnostics and
  positions); so this path reports nothing.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import yaml
from yaml.events import (
    DocumentEndEvent,
    DocumentStartEvent,
    MappingEndEvent,
    MappingStartEvent,
    ScalarEvent,
    SequenceEndEvent,
    SequenceStartEvent,
    StreamEndEvent,
    StreamStartEvent,
)

from agentctl.core.dsl.yamlscalars import MAX_INT_CHARS, TAG, implicit_tag, to_float, to_int

_CParser: Any
try:
    from yaml.cyaml import CParser as _CParser  # type: ignore[attr-defined]
except ImportError:  # PyYAML built without libyaml: the exact path serves alone
    _CParser = None

# The words BOOL_RE and NULL_RE take that start with a letter (yamlscalars).
_WORDS = frozenset({"true", "True", "TRUE", "false", "False", "FALSE", "null", "Null", "NULL"})

# Stricter than the exact path's depth limit, so a document near it goes there.
MAX_FAST_DEPTH = 124


class _Unusual(Exception):
    """Something this path leaves to the exact one."""


@dataclass
class FastParse:
    """The fast path's result: the document's value and its plain scalars' source texts."""

    value: Any
    plain_texts: dict[str, str] = field(default_factory=dict)


def parse_fast(text: str) -> FastParse | None:
    """The document's value and plain-scalar texts, or None when the exact path must decide."""
    if _CParser is None or "&" in text or "*" in text:
        return None
    try:
        parser = _CParser(text)
    except ValueError:  # text libyaml cannot take (a lone surrogate cannot be encoded)
        return None
    try:
        return _Events(parser.get_event).document()
    except (_Unusual, yaml.YAMLError, ValueError, TypeError):
        return None
    finally:
        parser.dispose()


def _plain_scalar(text: str) -> tuple[Any, bool]:
    """(value, typed) of a plain scalar; typed: it resolved to a boolean or a number."""
    # The two commonest kinds of text skip the patterns (~1 µs a distinct text; the 1,000-task
    # chain has 1,000 task ids and 1,000 numbers): a text starting with a letter is a boolean
    # or null only if it is one of ``_WORDS`` (or that word and a newline, which the patterns'
    # ``$`` takes too: a text with a newline goes to them); all ASCII digits is an integer.
    first = text[:1]
    if first.isascii() and first.isalpha() and text not in _WORDS and "\n" not in text:
        return text, False
    if text.isdigit() and text.isascii() and len(text) <= MAX_INT_CHARS and text[0] != "0":
        return int(text), True
    return _by_patterns(text)


def _by_patterns(text: str) -> tuple[Any, bool]:
    """``_plain_scalar`` by the resolver's patterns alone."""
    tag = implicit_tag(text)
    if tag == TAG + "str":
        return text, False
    if tag == TAG + "null":
        return None, False
    if tag == TAG + "bool":
        return text.lower() == "true", True
    if tag == TAG + "int":
        if len(text) > MAX_INT_CHARS:
            raise _Unusual
        return to_int(text), True
    number = to_float(text)
    if not math.isfinite(number):
        raise _Unusual
    return number, True


class _Events:
    """One pass over the events of one document."""

    def __init__(self, get_event: Any) -> None:
        self.get = get_event
        self.texts: dict[str, str] = {}
        # Plain scalar texts already typed in this document: (value, typed). A workflow
        # repeats most of its texts (every task's keys, ``uses``, ``needs``), and typing one
        # is up to four regular expressions; the values are immutable, so sharing is safe.
        self.typed: dict[str, tuple[Any, bool]] = {}

    def expect(self, kind: type) -> None:
        if type(self.get()) is not kind:
            raise _Unusual

    def document(self) -> FastParse:
        self.expect(StreamStartEvent)
        self.expect(DocumentStartEvent)
        root = _opened(self.get(), 0)
        self.run(root)
        self.expect(DocumentEndEvent)
        self.expect(StreamEndEvent)
        return FastParse(root, self.texts)

    def run(self, root: Any) -> None:
        """Consume events until ``root`` closes. Run once per event, so it is one loop with
        its state in locals: the open container (``top``, its dotted ``path``, whether it is
        a mapping, the key awaiting its value) and the enclosing ones on ``outer``; a key or a
        scalar value costs no call once its text was seen (parse_yaml of the 1,000-task
        chain: 16.6 -> 12.4 ms with ``_plain_scalar``'s shortcuts, min of 30 interleaved)."""
        get, texts, typed = self.get, self.texts, self.typed
        outer: list[tuple[Any, str, bool]] = []
        top, path, is_map, name = root, "", type(root) is dict, None
        while True:
            event = get()
            kind = type(event)
            if kind is ScalarEvent:
                if event.tag is not None:  # and no anchor: parse_fast saw no "&"
                    raise _Unusual
                text: str = event.value
                if is_map and name is None:  # a key: its text, typed or not (yamlload._key)
                    if text in top:
                        raise _Unusual  # a duplicate: the exact path reports it
                    name = text
                    continue
                value: Any = text
                if not event.style:  # plain (and untagged: libyaml's plain_implicit)
                    value, is_typed = typed.get(text) or self.plain(text)
                    if is_typed:  # the path is spelled only here: most scalars never need it
                        at = str(len(top)) if name is None else name  # None: a sequence
                        texts[f"{path}.{at}" if path else at] = text
                if is_map:
                    top[name] = value
                    name = None
                else:
                    top.append(value)
            elif kind is MappingEndEvent or kind is SequenceEndEvent:
                if not outer:
                    return
                top, path, is_map = outer.pop()
            else:
                outer.append((top, path, is_map))
                top, path, is_map = _nested(event, top, path, name, len(outer))
                name = None

    def plain(self, text: str) -> tuple[Any, bool]:
        """``_plain_scalar(text)``, remembered for the rest of the document."""
        known = self.typed[text] = _plain_scalar(text)
        return known


def _opened(event: Any, depth: int) -> Any:
    """The empty container ``event`` opens ``depth`` containers deep (the root is 0)."""
    kind = type(event)
    if kind is not MappingStartEvent and kind is not SequenceStartEvent:
        raise _Unusual  # a scalar root, an alias
    if event.tag is not None or depth >= MAX_FAST_DEPTH:
        raise _Unusual
    return {} if kind is MappingStartEvent else []


def _nested(event: Any, top: Any, path: str, name: str | None, depth: int) -> tuple[Any, str, bool]:
    """Open the container ``event`` starts inside ``top`` (at ``path``), as the value of
    ``name`` (a mapping) or as the next item (a sequence): (container, path, is a mapping)."""
    made = _opened(event, depth)
    if type(top) is dict:
        if name is None:
            raise _Unusual  # a collection as a key
        top[name] = made
        at = name
    else:
        at = str(len(top))
        top.append(made)
    return made, f"{path}.{at}" if path else at, type(made) is dict
