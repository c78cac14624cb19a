"""The compiled form of the regular expressions modules compile when imported, kept between
CLI processes.

Python's ``re`` turns a pattern into the regex engine's code (a list of integers) in Python
(``re._compiler``): parsing it and generating the code took ~12 ms of a one-task ``agentctl
run`` (~80 patterns compiled by the modules on the way: PyYAML's reader and resolver, the
standard library's platform, tokenize and textwrap, attrs, idna, our own), and the work is
the same in every process. The result depends on nothing but the pattern, its flags and the
interpreter, so this module keeps it, as ``dataclass_codes`` keeps dataclass methods.

Invariants:
- ``install`` replaces ``re._compiler.compile`` only on the interpreter it was written
  against (CPython 3.11, the function's parameters as expected); anywhere else it does
  nothing and patterns compile as usual;
- a stored entry is what 3.11's ``compile`` hands ``_sre.compile`` for the pattern (the flags
  the pattern ends with, the code, the group count and names), so the pattern object made
  from it is the one compiling makes; ``_sre.compile`` checks the code it is given, and an
  entry it refuses, or one of the wrong shape (a damaged store), is compiled afresh;
- only patterns compiled while a module is being imported are recorded (the program's own
  literal patterns), never one compiled while a command works: those may be made from user
  data — ``core.redact`` builds one from secret values — which must never reach a file;
- recorded only in the main thread (the one ``install`` ran in), whose warnings filters the
  recording swaps for a moment (below), and where the CLI imports;
- a pattern whose compiling warns (``FutureWarning`` for a possible nested set, …) is not
  recorded, so the warning is given every time, as without the store; so are str and bytes
  subclasses and ``re.DEBUG`` (it prints the code);
- a pattern is kept from the second process that compiles it on, the first one keeping only
  a digest of it (a "sighting"): some modules build a pattern's text from a set, so it differs
  with every process's hash seed (tokenize's token pattern, ~10 kB of code) — kept at first
  sight, every process added one that no later process could use, and the store grew to
  megabytes that every command loaded (+9 MB of memory and its load time on a one-task run,
  measured on a store of 645 entries, ~500 of them such variants). Sightings are capped
  (``_MAX_SIGHTED``): past the cap only this process's are kept;
- the store is keyed by the interpreter's version (the engine's code format and the Unicode
  tables the case-insensitive code is made from) and lives in the user's cache
  (``usercache``: private files only); it is read once at start-up and rewritten at exit only
  when this process recorded a pattern it did not have.
"""

from __future__ import annotations

import _thread
import atexit
import hashlib
import re
import sys
import warnings
from typing import Any

from agentctl.usercache import read_entries, write_entries, written_against

FILE_NAME = "regex-codes.marshal"
_INTERPRETER = f"{sys.implementation.cache_tag} {sys.version}".replace("\n", " ")
# Format 2: entries are kept from their second sighting on (format 1 files are replaced).
KEY = f"agentctl-regex-codes-2 {_INTERPRETER}\n".encode()
_MAX_ENTRIES = 2_000  # ~80 on a run; past it only what this process used is kept
_MAX_SIGHTED = 1_000  # 16 bytes each
# The store's one key that is not a pattern: the digests of patterns seen once.
_SIGHTED = "sighted"
_PARAMETERS = ("p", "flags")
# Frames of the import system: a compile below one runs on behalf of a module being imported.
_IMPORT_FILE = "<frozen importlib._bootstrap>"

Key = tuple[str | bytes, int]


class _Store:
    """Patterns with their flags, and what ``_sre.compile`` is given for them."""

    def __init__(self, known: dict[Key, tuple[Any, ...]], sighted: set[bytes]) -> None:
        self.known = known
        self.used: dict[Key, tuple[Any, ...]] = {}
        self.added = False
        self.sighted = sighted  # seen once before this process (read from the file)
        self.fresh: set[bytes] = set()  # seen for the first time here

    def keep(self, key: Key, entry: tuple[Any, ...]) -> None:
        """Keep ``entry`` if an earlier process compiled the same pattern, else sight it. A
        pattern with a stored entry was sighted before: its entry is replaced at once (it was
        refused, e.g. damaged, or it would not be compiled here)."""
        digest = _digest(key)
        if digest in self.sighted or key in self.known:
            self.sighted.discard(digest)
            self.known[key] = self.used[key] = entry
        else:
            self.fresh.add(digest)
        self.added = True

    def save(self) -> None:
        if not self.added:
            return
        sighted = self.sighted | self.fresh
        if len(sighted) > _MAX_SIGHTED:
            sighted = self.fresh
        known: dict[Any, Any] = {**self.known, _SIGHTED: sorted(sighted)}
        used: dict[Any, Any] = {**self.used, _SIGHTED: sorted(self.fresh)}
        write_entries(FILE_NAME, KEY, known, used, _MAX_ENTRIES)


def install() -> _Store | None:
    """Serve the compiled form of imported modules' patterns from the store (module
    docstring); returns the store, or None where this interpreter is not the one this was
    written against."""
    compiler: Any = getattr(re, "_compiler", None)
    if not written_against(getattr(compiler, "compile", None), _PARAMETERS):
        return None
    stored = read_entries(FILE_NAME, KEY)
    store = _Store(_load(stored), _load_sighted(stored.get(_SIGHTED)))
    compiler.compile = _compiler_for(store, compiler)
    atexit.register(store.save)
    return store


def _load(known: dict[Any, Any]) -> dict[Key, tuple[Any, ...]]:
    # A damaged store may hold anything: only entries of the right shape are kept.
    return {k: v for k, v in known.items() if _is_key(k) and isinstance(v, tuple) and len(v) == 5}


def _load_sighted(sighted: object) -> set[bytes]:
    if not isinstance(sighted, list):
        return set()
    return {d for d in sighted if type(d) is bytes and len(d) == _DIGEST_SIZE}


_DIGEST_SIZE = 16


def _digest(key: Key) -> bytes:
    pattern, flags = key
    text = pattern.encode("utf-8", "surrogatepass") if isinstance(pattern, str) else pattern
    kind = b"s" if isinstance(pattern, str) else b"b"
    data = b"%s%d\0%s" % (kind, flags, text)
    return hashlib.blake2b(data, digest_size=_DIGEST_SIZE).digest()


def _is_key(key: object) -> bool:
    return (
        type(key) is tuple
        and len(key) == 2
        and type(key[0]) in (str, bytes)
        and type(key[1]) is int
    )


def _compiler_for(store: _Store, compiler: Any) -> Any:
    original = compiler.compile
    sre = compiler._sre
    main_thread = _thread.get_ident()  # ``install`` runs in the main thread

    def compile(p: Any, flags: int = 0) -> Any:
        if type(p) not in (str, bytes) or flags & re.DEBUG:
            return original(p, flags)
        key = (p, int(flags))
        entry = store.known.get(key)
        if entry is not None:
            try:
                pattern = sre.compile(p, *entry)
            except Exception:  # a damaged entry: compiled afresh below
                pass
            else:
                store.used[key] = entry
                return pattern
        if _thread.get_ident() != main_thread or not _importing():
            return original(p, flags)
        return _record(store, compiler, original, key)

    return compile


def _importing() -> bool:
    """Whether a module is being imported below this call (module docstring)."""
    frame = sys._getframe(1)
    while frame is not None:
        if frame.f_code.co_filename == _IMPORT_FILE:
            return True
        frame = frame.f_back  # type: ignore[assignment]  # None ends the loop
    return False


def _record(store: _Store, compiler: Any, original: Any, key: Key) -> Any:
    """Compile ``key``'s pattern as CPython 3.11's ``re._compiler.compile`` does, keeping what
    it hands ``_sre.compile``; a pattern that warns is compiled again, warnings shown.
    ``catch_warnings`` swaps the process-wide warning filters: a warning another thread
    raises during these few microseconds is caught here and not shown (it makes this pattern
    look like one that warns, so it is compiled again and not stored). Recording happens
    only while a module is imported, in the main thread, when agentctl runs no other
    thread that warns."""
    pattern, flags = key
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        parsed = compiler._parser.parse(pattern, flags)
        code = compiler._code(parsed, flags)
    if seen:
        return original(pattern, flags)
    groupindex = parsed.state.groupdict
    indexgroup: list[str | None] = [None] * parsed.state.groups
    for name, index in groupindex.items():
        indexgroup[index] = name
    # Plain ints: the opcodes are an int subclass, which marshal does not take.
    code = [int(op) for op in code]
    final_flags = int(flags | parsed.state.flags)
    entry = (final_flags, code, parsed.state.groups - 1, dict(groupindex), tuple(indexgroup))
    made = compiler._sre.compile(pattern, *entry)
    store.keep(key, entry)
    return made
