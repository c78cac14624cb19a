"""Parse YAML source text into plain JSON data plus a table of source positions.

Invariants:
- The result is pure JSON data: dict (string keys only), list, str, int, float (finite), bool,
  None. Nothing YAML 1.1 would turn into a date, timestamp, set, binary or Python object
  survives: scalars are resolved with a YAML 1.2 "core"-like resolver of our own, so
  ``2024-01-01`` stays a string and ``yes``/``no``/``on``/``off`` stay strings. Only
  ``true``/``false`` (and their ``True``/``TRUE``/``False``/``FALSE`` spellings) are booleans.
- Sources over ``MAX_SOURCE_BYTES`` are refused before any parsing; bytes must be UTF-8.
- Anchors and aliases are expanded (an alias is a copy of its anchored value), but the copies
  may add at most ``MAX_ALIAS_NODES`` nodes in all: a "billion laughs" document fails as soon
  as it passes the bound, before it costs memory or time. A repeated anchor name redefines
  the anchor (YAML 1.2). Merge keys (``<<``) are YAML 1.1
  only and stay ordinary keys (which the schema then rejects as unknown).
- Every mapping key is a string: a plain (unquoted) key the resolver types as a number, a
  boolean or null is its source text exactly as written (``1``, ``true``, ``0x10``, ``~``), as
  the original's string-keyed maps take it. A mapping or a sequence as a key, a key with a
  custom tag, and a quoted key tagged other than ``!!str`` (``!!int "1"``) are refused.
- Duplicate mapping keys (after that: ``1`` and ``"1"`` are the same key), collection keys,
  undefined aliases, explicit tags other than the standard str/int/float/bool/null/map/seq
  ones, multiple documents and non-finite numbers are all rejected as ``yaml_syntax``, each
  with the dotted path where it was met (the enclosing mapping's, for a key).
- ``ParsedYaml.plain_texts`` keeps the source text of every plain (unquoted) scalar that
  resolved to a boolean or a number, so a caller whose schema wants a string there can take
  the text as written (``true`` the program name, ``1.10`` the version). Keys follow the same
  rule (``_written_text``) at once, since a key is always wanted as a string.
- Every failure is a ``Diagnostic`` (1-based line and column); no other exception escapes
  ``parse_yaml`` besides ``agentctl.errors.ValidationError``.
- Positions are keyed by dotted path (list indices as decimal numbers; the root is ``""``).
"""

from __future__ import annotations

import dataclasses
import math
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import yaml
import yaml.reader
from yaml.composer import Composer
from yaml.events import AliasEvent
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode
from yaml.parser import Parser
from yaml.reader import Reader
from yaml.resolver import BaseResolver
from yaml.scanner import Scanner

from agentctl.core.dsl.yamlevents import parse_fast
from agentctl.core.dsl.yamlproblems import plain_words
from agentctl.core.dsl.yamlscalars import (
    BOOL_RE,
    FLOAT_RE,
    INT_RE,
    MAX_INT_CHARS,
    NULL_RE,
    TAG,
    add_implicit_resolvers,
    to_float,
    to_int,
)
from agentctl.core.strictjson import holds_lone_surrogate
from agentctl.errors import Diagnostic, ValidationError

MAX_SOURCE_BYTES = 1_048_576
# Deeper documents are refused: they only ever come from garbage or attacks, and both the
# recursive composer and our validators would otherwise hit Python's recursion limit. 128 is
# the original's (serde_yaml's) limit, so a document it reads is read here too.
MAX_DEPTH = 128

# Nodes that alias expansion may add to a document. Real workflows reuse a few blocks; an
# exponential "billion laughs" document passes this bound within a few levels.
MAX_ALIAS_NODES = 10_000

Position = tuple[int, int]

# Implicitly typed plain scalars whose text a string-typed key takes as written.
_PLAIN_TYPED = frozenset({TAG + "bool", TAG + "int", TAG + "float"})
# A mapping key is always wanted as a string, so a plain null (``~``, ``null``) is its text too;
# a null value is not (it stays JSON null where the schema allows one).
_PLAIN_KEY_TYPED = _PLAIN_TYPED | {TAG + "null"}


class _Resolver(BaseResolver):
    """Implicit typing of plain scalars: null, bool, int, float; everything else is a string."""


add_implicit_resolvers(_Resolver)


class _AliasBoundError(Exception):
    """Alias expansion passed ``MAX_ALIAS_NODES``; carries the node being copied."""

    def __init__(self, node: Node) -> None:
        super().__init__("alias expansion bound")
        self.node = node


class _Loader(Reader, Scanner, Parser, Composer, _Resolver):
    def __init__(self, stream: str) -> None:
        Reader.__init__(self, stream)
        Scanner.__init__(self)
        Parser.__init__(self)
        Composer.__init__(self)
        _Resolver.__init__(self)

    def compose_node(self, parent: Node | None, index: Any) -> Node | None:
        # YAML 1.2: a repeated anchor name redefines it; later aliases see the latest value.
        event = self.peek_event()  # type: ignore[no-untyped-call]
        if not isinstance(event, AliasEvent) and getattr(event, "anchor", None) is not None:
            self.anchors.pop(event.anchor, None)
        node: Node | None = super().compose_node(parent, index)
        return node


@dataclass
class PositionTables:
    """Where each dotted path of a document appears in its source."""

    # Best position of each path: the value for scalars and flow collections, the key for
    # block collections (whose value node starts on a later line).
    positions: dict[str, Position] = field(default_factory=dict)
    # Position of the mapping key that introduces a path (absent for list items and the root).
    key_positions: dict[str, Position] = field(default_factory=dict)


@dataclass
class ParsedYaml:
    """The JSON value of a document and where each dotted path appears in the source.

    The fast path records no positions (``tables`` is None): they are computed from the
    source by the exact path the first time they are asked for — which only a diagnostic
    does — so a valid document never pays for them.
    """

    value: Any
    # Source text of plain scalars resolved to a boolean or a number, by path.
    plain_texts: dict[str, str] = field(default_factory=dict)
    tables: PositionTables | None = None
    text: str = field(default="", repr=False)
    file: str | None = None

    def position_tables(self) -> PositionTables:
        if self.tables is None:
            self.tables = _parse_exact(self.text, self.file).position_tables()
        return self.tables

    def tables_later(self) -> Callable[[], PositionTables]:
        """``position_tables`` as a call that holds the source text only, not the value."""
        known, text, file = self.tables, self.text, self.file

        def tables() -> PositionTables:
            return known if known is not None else _parse_exact(text, file).position_tables()

        return tables

    @property
    def positions(self) -> dict[str, Position]:
        return self.position_tables().positions

    @property
    def key_positions(self) -> dict[str, Position]:
        return self.position_tables().key_positions


def _diag(
    message: str, file: str | None, pos: Position | None, help: str | None = None
) -> Diagnostic:
    line, column = pos if pos is not None else (None, None)
    return Diagnostic(
        code="yaml_syntax",
        message=message,
        file=file,
        line=line,
        column=column,
        path=None,
        help=help,
    )


def _fail(diagnostics: list[Diagnostic]) -> ValidationError:
    first = diagnostics[0].message
    return ValidationError(f"invalid YAML: {first}", diagnostics=diagnostics)


def decode_source(source: str | bytes, file: str | None) -> str:
    """Size-check and decode ``source``; raises ValidationError on oversize or non-UTF-8."""
    size = len(source.encode("utf-8", "surrogatepass")) if isinstance(source, str) else len(source)
    if size > MAX_SOURCE_BYTES:
        msg = f"workflow source is {size} bytes; the limit is {MAX_SOURCE_BYTES} bytes"
        raise ValidationError(
            msg,
            diagnostics=[
                Diagnostic(
                    code="schema_violation",
                    message=msg,
                    file=file,
                    line=1,
                    column=1,
                    help="split large data into input files or shrink the document",
                )
            ],
        )
    if isinstance(source, str):
        text = source
    else:
        try:
            text = source.decode("utf-8")
        except UnicodeDecodeError as exc:
            # The same loader reads workflows, var files, pack manifests and locks: name none.
            msg = f"the file is not valid UTF-8 (byte offset {exc.start})"
            prefix = source[: exc.start].decode("utf-8", "replace")
            pos = _offset_pos(prefix, len(prefix))
            raise _fail([_diag(msg, file, pos, "save the file as UTF-8")]) from exc
    return text.removeprefix("\ufeff")


def _offset_pos(text: str, offset: int) -> Position:
    """1-based (line, column) of the character at ``offset`` of ``text``."""
    line = text.count("\n", 0, offset) + 1
    return (line, offset - (text.rfind("\n", 0, offset) + 1) + 1)


def _mark_pos(mark: Any) -> Position | None:
    if mark is None:
        return None
    return (int(mark.line) + 1, int(mark.column) + 1)


_CParser: Any
try:
    from yaml.cyaml import CParser as _CParser  # type: ignore[attr-defined]
except ImportError:  # PyYAML built without libyaml: the pure-Python path serves alone
    _CParser = None


def _fast_loader(text: str) -> Any:
    """libyaml's parser with our resolver: the same node tree, an order of magnitude faster."""

    class _FastLoader(_CParser, _Resolver):  # type: ignore[misc]
        def __init__(self, stream: str) -> None:
            _CParser.__init__(self, stream)
            _Resolver.__init__(self)

    return _FastLoader(text)


def _compose_fast(text: str) -> Node | None:
    """The node tree via libyaml, or None when the exact pure-Python path must decide.

    Sources that could hold anchors or aliases ("&", "*"), and any source libyaml rejects,
    go through the pure-Python composer, whose diagnostics (undefined aliases included)
    carry exact positions.
    """
    if _CParser is None or "&" in text or "*" in text:
        return None
    try:
        loader = _fast_loader(text)
        try:
            node: Node | None = loader.get_single_node()
        finally:
            loader.dispose()
    except (yaml.YAMLError, ValueError, TypeError):
        return None
    return node


def compose_yaml(text: str, file: str | None) -> Node:
    """Compose exactly one YAML document into a node tree (the one PyYAML boundary)."""
    node = _compose_fast(text)
    if node is None:
        node = _compose_exact(text, file)
    if node is None or _is_empty(node):
        raise _fail([_diag("the document is empty; expected a mapping", file, (1, 1))])
    return node


def _compose_exact(text: str, file: str | None) -> Node | None:
    """The pure-Python composer: exact positions for every problem it meets."""
    try:
        loader = _Loader(text)
        try:
            node = loader.get_single_node()
        finally:
            loader.dispose()
    except yaml.MarkedYAMLError as exc:
        raise _fail([_marked_diag(exc, file)]) from exc
    except yaml.reader.ReaderError as exc:
        # Control characters and other code points YAML does not allow in a stream.
        char: Any = exc.character
        # PyYAML reports the code point as an int for text streams, a str/bytes otherwise.
        code = char if isinstance(char, int) else ord(char[:1] or "\0")
        msg = f"character #x{code:04x} is not allowed in YAML"
        pos = _offset_pos(text, min(int(exc.position), len(text)))
        raise _fail([_diag(msg, file, pos, "remove control characters")]) from exc
    except yaml.YAMLError as exc:
        raise _fail([_diag(f"unreadable YAML: {exc}", file, (1, 1))]) from exc
    except RecursionError as exc:
        raise _fail([_diag("document is nested too deeply", file, (1, 1))]) from exc
    return node


def _is_empty(node: Node) -> bool:
    """A document that is only a ``---`` marker (comments aside) has no content at all, like
    an empty file. An explicit ``null`` or ``~`` is content, and fails later as "not a mapping"."""
    return isinstance(node, ScalarNode) and node.tag == TAG + "null" and node.value == ""


def _marked_diag(exc: yaml.MarkedYAMLError, file: str | None) -> Diagnostic:
    problem = exc.problem or exc.context or "malformed YAML"
    if exc.problem and exc.context:
        problem = f"{exc.problem} ({exc.context})"
    message, help = plain_words(exc.problem)
    return _diag(
        message or str(problem), file, _mark_pos(exc.problem_mark or exc.context_mark), help
    )


class _Builder:
    """Turns a composed node tree into JSON data, collecting every problem it finds."""

    def __init__(self, file: str | None) -> None:
        self.file = file
        self.out = ParsedYaml(value=None, tables=PositionTables())
        self.tables = self.out.position_tables()
        self.problems: list[Diagnostic] = []
        # Nodes built once already: meeting one again means an alias is being copied.
        self.built: set[int] = set()
        self.copied = 0

    def problem(
        self, message: str, node: Node, help: str | None = None, path: str | None = None
    ) -> None:
        found = _diag(message, self.file, _mark_pos(node.start_mark), help)
        self.problems.append(dataclasses.replace(found, path=path or None))

    def build(self, node: Node, path: str, depth: int) -> Any:
        if depth > MAX_DEPTH:
            self.problem(f"the document is nested deeper than {MAX_DEPTH} levels", node, path=path)
            return None
        self._count(node)
        if isinstance(node, MappingNode):
            return self._mapping(node, path, depth)
        if isinstance(node, SequenceNode):
            return self._sequence(node, path, depth)
        if isinstance(node, ScalarNode):
            return self._scalar(node, path)
        self.problem("unsupported YAML node", node)  # pragma: no cover - composer never does this
        return None

    def _count(self, node: Node) -> None:
        """Count the nodes alias expansion copies; stop at once past the bound."""
        if id(node) not in self.built:
            self.built.add(id(node))
            return
        self.copied += 1
        if self.copied > MAX_ALIAS_NODES:
            raise _AliasBoundError(node)

    def _record(self, path: str, node: Node, key_node: Node | None) -> None:
        value_pos = _mark_pos(node.start_mark)
        assert value_pos is not None
        best = value_pos
        if key_node is not None:
            key_pos = _mark_pos(key_node.start_mark)
            assert key_pos is not None
            self.tables.key_positions[path] = key_pos
            if isinstance(node, (MappingNode, SequenceNode)) and not node.flow_style:
                best = key_pos
        self.tables.positions[path] = best

    def _mapping(self, node: MappingNode, path: str, depth: int) -> dict[str, Any]:
        if node.tag != TAG + "map":
            self.problem(f"unsupported tag {node.tag!r} on a mapping", node, path=path)
        result: dict[str, Any] = {}
        for key_node, value_node in node.value:
            key = self._key(key_node, path)
            if key is None:
                continue
            child = f"{path}.{key}" if path else key
            if key in result:
                self.problem(
                    f"duplicate key {key!r}", key_node, "each key may appear only once", child
                )
                continue
            self._record(child, value_node, key_node)
            result[key] = self.build(value_node, child, depth + 1)
        return result

    def _key(self, key_node: Node, path: str) -> str | None:
        """The text of a mapping key, or None (a problem recorded at the mapping's ``path``)."""
        if not isinstance(key_node, ScalarNode):
            kind = "mapping" if isinstance(key_node, MappingNode) else "sequence"
            message = f"a mapping key must be a scalar, not a {kind}"
            self.problem(message, key_node, "write the key as text, e.g. `name: value`", path)
            return None
        if key_node.tag == TAG + "str":
            return str(key_node.value)
        written = _written_text(key_node, _PLAIN_KEY_TYPED)
        if written is None:  # an explicit tag: a custom one, or a standard one on a quoted key
            message = f"unsupported tag {key_node.tag!r} on mapping key {key_node.value!r}"
            self.problem(message, key_node, "remove the tag", path)
        return written

    def _sequence(self, node: SequenceNode, path: str, depth: int) -> list[Any]:
        if node.tag != TAG + "seq":
            self.problem(f"unsupported tag {node.tag!r} on a sequence", node, path=path)
        items: list[Any] = []
        for index, item in enumerate(node.value):
            child = f"{path}.{index}" if path else str(index)
            self._record(child, item, None)
            items.append(self.build(item, child, depth + 1))
        return items

    def _scalar(self, node: ScalarNode, path: str) -> Any:
        text: str = node.value
        tag = node.tag
        if tag == TAG + "str":
            return text
        written = _written_text(node, _PLAIN_TYPED)
        if written is not None:
            self.out.plain_texts[path] = written
        if tag == TAG + "null" and NULL_RE.match(text):
            return None
        if tag == TAG + "bool" and BOOL_RE.match(text):
            return text.lower() == "true"
        if tag == TAG + "int" and INT_RE.match(text):
            if len(text) > MAX_INT_CHARS:
                self.problem(f"integer {text[:20]}... is too large", node, path=path)
                return None
            return to_int(text)
        if tag == TAG + "float" and FLOAT_RE.match(text):
            number = to_float(text)
            if math.isfinite(number):
                return number
            message = f"{text!r} is not a finite number; JSON cannot represent it"
            self.problem(message, node, path=path)
            return None
        self.problem(f"unsupported tag {tag!r} for scalar {text!r}", node, "remove the tag", path)
        return None


def _written_text(node: ScalarNode, typed: frozenset[str]) -> str | None:
    """The source text of a plain (unquoted) scalar the resolver typed as one of ``typed``,
    else None: the text a user meant where a string is wanted (a key, a name)."""
    if node.style or node.tag not in typed:  # plain: style None (PyYAML) or '' (libyaml)
        return None
    return str(node.value)


def parse_yaml(source: str | bytes, file: str | None = None) -> ParsedYaml:
    """Decode, compose and convert ``source``; raises ValidationError with yaml_syntax codes.

    A common document takes the fast path (``yamlevents``: no node tree, positions on
    demand); anything else, and every document with a problem, the exact one.
    """
    text = decode_source(source, file)
    fast = parse_fast(text)
    parsed = (
        ParsedYaml(fast.value, fast.plain_texts, None, text, file)
        if fast is not None
        else _parse_exact(text, file)
    )
    if "\\u" in text or "\\U" in text:  # only an escape can make half a surrogate pair
        _refuse_lone_surrogates(parsed.value, text, file)
    return parsed


# A double-quoted scalar's escape of half a surrogate pair (YAML never pairs them up).
_SURROGATE_ESCAPE = re.compile(r"\\(?:u[dD][89a-fA-F]|U0000[dD][89a-fA-F])")


def _refuse_lone_surrogates(value: Any, text: str, file: str | None) -> None:
    """A string holding a lone surrogate is no Unicode text: nothing could store, hash or
    print it, so it is a ``yaml_syntax`` problem, located at the first such escape."""
    if holds_lone_surrogate(value):
        found = _SURROGATE_ESCAPE.search(text)
        pos = _offset_pos(text, found.start()) if found else (1, 1)
        message = "a double-quoted scalar escapes half of a surrogate pair"
        help = "write the character itself, or \\U0001F600 for one beyond U+FFFF"
        raise _fail([_diag(message, file, pos, help)])


def _parse_exact(text: str, file: str | None) -> ParsedYaml:
    """The node tree, then the value with every path's position and every problem."""
    node = compose_yaml(text, file)
    builder = _Builder(file)
    builder.tables.positions[""] = _mark_pos(node.start_mark) or (1, 1)
    try:
        builder.out.value = builder.build(node, "", 0)
    except _AliasBoundError as exc:
        message = f"aliases expand this document by more than {MAX_ALIAS_NODES} nodes"
        help = "repeat fewer or smaller anchored values (is this a 'billion laughs' document?)"
        raise _fail([_diag(message, file, _mark_pos(exc.node.start_mark), help)]) from None
    if builder.problems:
        raise _fail(builder.problems)
    return builder.out
