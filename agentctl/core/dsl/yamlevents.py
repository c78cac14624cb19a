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
- anything unusual — an anchor, alias or explicit tag, a duplicate or non-string key, a
  non-finite or overlong number, nesting near ``MAX_DEPTH``, several documents, an empty
  document, a root that is not a collection, or any libyaml error — returns None, and the
  exact path decides (with its diagnostics and positions); so this path reports nothing.
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

# Stricter than the exact path's depth limit, so a document near it goes there.
MAX_FAST_DEPTH = 60


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
    """One pass over the events of one document; containers open on ``stack``."""

    def __init__(self, get_event: Any) -> None:
        self.get = get_event
        self.texts: dict[str, str] = {}
        self.stack: list[Any] = []
        # Per open container: the key awaiting its value (mappings), or None.
        self.keys: list[str | None] = []
        # Per open container: its dotted path (the root is "").
        self.paths: list[str] = []
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
        root = self.collection(self.get(), "")
        self.run()
        self.expect(DocumentEndEvent)
        self.expect(StreamEndEvent)
        return FastParse(root, self.texts)

    def collection(self, event: Any, path: str) -> Any:
        """Open the container ``event`` starts at ``path``; returns it (still empty)."""
        kind = type(event)
        if kind not in (MappingStartEvent, SequenceStartEvent):
            raise _Unusual
        if event.anchor is not None or event.tag is not None:
            raise _Unusual
        if len(self.stack) >= MAX_FAST_DEPTH:
            raise _Unusual
        made: Any = {} if kind is MappingStartEvent else []
        self.stack.append(made)
        self.keys.append(None)
        self.paths.append(path)
        return made

    def run(self) -> None:
        """Consume events until the root container closes (a loop run once per event: the
        attribute look-ups are hoisted and a scalar value is placed without a call)."""
        get, stack, keys, paths = self.get, self.stack, self.keys, self.paths
        while stack:
            event = get()
            kind = type(event)
            if kind is MappingEndEvent or kind is SequenceEndEvent:
                stack.pop()
                keys.pop()
                paths.pop()
                continue
            top = stack[-1]
            if type(top) is not dict:
                top.append(self.value(event, paths[-1], str(len(top))))
                continue
            name = keys[-1]
            if name is None:
                keys[-1] = self.key(event, top)
                continue
            keys[-1] = None
            top[name] = self.value(event, paths[-1], name)

    def key(self, event: Any, mapping: dict[str, Any]) -> str:
        if type(event) is not ScalarEvent or event.anchor is not None or event.tag is not None:
            raise _Unusual
        text: str = event.value
        if text in mapping:
            raise _Unusual
        if event.implicit[0] and not event.style:
            made, typed = self.plain(text)
            if typed or made is None:
                raise _Unusual  # a plain key that is not a string (null, boolean, number)
        return text

    def value(self, event: Any, base: str, name: str) -> Any:
        """The value ``event`` starts, named ``name`` in the container at ``base``."""
        if type(event) is not ScalarEvent:
            return self.collection(event, f"{base}.{name}" if base else name)
        if event.anchor is not None or event.tag is not None:
            raise _Unusual
        text: str = event.value
        if not (event.implicit[0] and not event.style):
            return text
        made, typed = self.plain(text)
        if typed:  # the path is spelled only here: most scalars never need it
            self.texts[f"{base}.{name}" if base else name] = text
        return made

    def plain(self, text: str) -> tuple[Any, bool]:
        """``_plain_scalar(text)``, typed once per distinct text of the document."""
        known = self.typed.get(text)
        if known is None:
            known = self.typed[text] = _plain_scalar(text)
        return known
