"""The compiled methods of ``@dataclass`` (and attrs) classes, kept between CLI processes.

Python 3.11's ``dataclasses`` writes each generated method (``__init__``, ``__repr__``,
``__eq__``, ``__hash__``, ``__setattr__``, …) as source text and compiles it with ``exec``,
every time a class is defined. agentctl defines ~200 dataclasses on the way to a run (the
ledger's rows, the plan, the coordinator's state); parsing and compiling their ~1,100 method
texts was a third of the instructions of ``agentctl run`` on a one-task workflow (callgrind).
The compiled code depends on nothing but the text and the interpreter, so this module keeps
it: the same text, the same interpreter, the same code object, as ``.pyc`` files do for
modules. attrs does the same for its classes (``attr._make._compile_and_eval``): trio defines
~70 with it when imported, the largest part of trio's import on a run; those are kept too. So
is the code of the forward references ``typing`` compiles (``_serve_typing``).

Invariants:
- ``install`` replaces ``dataclasses._create_fn`` only on the interpreter it was written
  against (CPython 3.11, the function's parameters as expected); anywhere else it does
  nothing and dataclasses compile as usual;
- the replacement builds the method text exactly as the original does, then runs the code
  compiled from that text — taken from the store when the text's digest is there, else
  compiled the way ``exec`` compiles a string (no inherited ``__future__`` flags) — so a
  class gets the same methods either way;
- attrs is not imported by ``install`` (``check`` never needs it): an entry at the front of
  ``sys.meta_path`` waits for ``attr._make``'s first import, replaces its
  ``_compile_and_eval`` after the module has run (only when its parameters are the expected
  ones), and removes itself. A replaced method compiles exactly as attrs would: the same text,
  file name (its tracebacks' lines stay in ``linecache``) and ``__future__`` flags;
- ``typing.ForwardRef`` compiles a text to the same code with or without the store: typing
  gets a module global ``compile`` only where its ``ForwardRef.__init__`` calls ``compile``
  and typing has no such global already; any call but ``(text, "<string>", "eval")`` goes
  to the builtin, and a text that is not valid Python raises the builtin's ``SyntaxError``;
- the store is keyed by the interpreter's version (its bytecode format) and lives in the user's
  cache (``usercache``: private files only); it is read once at start-up and rewritten at
  exit only when this process compiled a method it did not have;
- a damaged store never stops a class being defined: an entry that is not bytes, or does not
  load as a code object, is compiled afresh as if it were missing.
"""

from __future__ import annotations

import atexit
import builtins
import dataclasses
import hashlib
import marshal
import re
import sys
import types
from typing import Any

from agentctl.usercache import read_entries, write_entries, written_against

FILE_NAME = "dataclass-methods.marshal"
# The interpreter exactly (its bytecode changes only with its version).
_INTERPRETER = f"{sys.implementation.cache_tag} {sys.version}".replace("\n", " ")
KEY = f"agentctl-dataclass-methods-1 {_INTERPRETER}\n".encode()
_MAX_ENTRIES = 5_000  # ~4 MB; past it (many upgrades later) only what this process used is kept
_PARAMETERS = ("name", "args", "body", "globals", "locals", "return_type")


class _Store:
    """The digests of method texts and their marshalled code objects."""

    def __init__(self, known: dict[bytes, bytes]) -> None:
        self.known = known
        self.used: dict[bytes, bytes] = {}
        self.added = False
        self.closed = False  # ``close``: methods compiled from now on are not kept

    def code(
        self, text: str, filename: str = "<string>", flags: int = 0, mode: str = "exec"
    ) -> types.CodeType:
        key = text if filename == "<string>" and not flags else f"{filename}\0{flags}\0{text}"
        if mode != "exec":  # a source text never holds NUL: no exec key looks like this
            key = f"{mode}\0{filename}\0{flags}\0{text}"
        digest = hashlib.blake2b(key.encode(), digest_size=16).digest()
        blob = self.known.get(digest)
        code = None if blob is None else _loaded(blob)
        if blob is None or code is None:  # unknown, or a damaged entry: compiled (again)
            return self._compiled(digest, text, filename, flags, mode)
        self.used[digest] = blob
        return code

    def _compiled(
        self, digest: bytes, text: str, filename: str, flags: int, mode: str
    ) -> types.CodeType:
        code: types.CodeType = compile(text, filename, mode, flags=flags, dont_inherit=True)
        if not self.closed:
            self.used[digest] = self.known[digest] = marshal.dumps(code)
            self.added = True
        return code

    def save(self) -> None:
        """Never raises (``write_entries``): a worker leaving without ``atexit`` calls it too."""
        if self.added:
            write_entries(FILE_NAME, KEY, self.known, self.used, _MAX_ENTRIES)

    def close(self) -> None:
        """Save now and let the entries go: for a long-lived process (a worker) whose start-up
        is over — the store's ~2 MB would otherwise stay in every worker for its whole life.
        Later methods are compiled as usual and not kept; a later ``save`` writes nothing."""
        self.save()
        self.known, self.used, self.added, self.closed = {}, {}, False, True


def install() -> _Store | None:
    """Serve dataclasses' generated methods from the store (module docstring); returns the
    store, or None where this interpreter is not the one this was written against."""
    if not written_against(getattr(dataclasses, "_create_fn", None), _PARAMETERS):
        return None
    store = _Store(_load(read_entries(FILE_NAME, KEY)))
    dataclasses._create_fn = _creator(store)  # type: ignore[attr-defined]  # private, by design
    attrs_make = sys.modules.get(_ATTRS_MODULE)
    if attrs_make is None:
        sys.meta_path.insert(0, _AttrsWatch(store))
    else:
        _serve_attrs(attrs_make, store)
    _serve_typing(store)
    atexit.register(store.save)
    return store


def _serve_typing(store: _Store) -> None:
    """Give ``typing`` a ``compile`` taking forward references' code from ``store``.

    ``typing.ForwardRef`` compiles its text (``compile(text, "<string>", "eval")``, the only
    ``compile`` in typing) each time one is made: ~1,000 on the way to a run (pydantic-core's
    ~100 TypedDicts, the workflow models' string annotations), ~280 distinct texts, ~6 µs
    each. A module global named ``compile`` is found before the builtin, so typing alone gets
    this one; the same text gives the same (immutable) code object, shared within the process
    and kept in the store across processes. Any other call is the builtin's.
    """
    import typing

    init = getattr(getattr(typing, "ForwardRef", None), "__init__", None)
    names = getattr(getattr(init, "__code__", None), "co_names", ())
    if "compile" not in names or hasattr(typing, "compile"):
        return
    seen: dict[str, types.CodeType] = {}

    def compile(source: Any, filename: Any, mode: Any, *args: Any, **kwargs: Any) -> Any:
        # typing inherits no __future__ flags: the store compiles with none inherited either.
        if args or kwargs or type(source) is not str or (filename, mode) != ("<string>", "eval"):
            return builtins.compile(source, filename, mode, *args, **kwargs)
        code = seen.get(source)
        if code is None:
            code = seen[source] = store.code(source, filename, mode=mode)
        return code

    typing.compile = compile  # type: ignore[attr-defined]  # typing's own global, by design


def _load(known: dict[Any, Any]) -> dict[bytes, bytes]:
    # A damaged store may hold anything: only digest -> marshalled code entries are kept.
    return {k: v for k, v in known.items() if isinstance(k, bytes) and isinstance(v, bytes)}


def _loaded(blob: bytes) -> types.CodeType | None:
    """The code object marshalled in ``blob``, or None when it is not one (damaged store)."""
    try:
        code = marshal.loads(blob)
    except Exception:  # any failure to load a cached entry means: compile it as usual
        return None
    return code if isinstance(code, types.CodeType) else None


def _creator(store: _Store) -> Any:
    missing = dataclasses.MISSING

    def _create_fn(
        name: str,
        args: list[str],
        body: list[str],
        *,
        globals: dict[str, Any] | None = None,
        locals: dict[str, Any] | None = None,
        return_type: Any = missing,
    ) -> Any:
        # The text is built exactly as CPython 3.11's dataclasses._create_fn builds it.
        if locals is None:
            locals = {}
        return_annotation = ""
        if return_type is not missing:
            locals["_return_type"] = return_type
            return_annotation = "->_return_type"
        joined = ",".join(args)
        lines = "\n".join(f"  {b}" for b in body)
        text = f" def {name}({joined}){return_annotation}:\n{lines}"
        local_vars = ", ".join(locals.keys())
        text = f"def __create_fn__({local_vars}):\n{text}\n return {name}"
        ns: dict[str, Any] = {}
        # exec of a string without globals would run in the caller's (dataclasses') module.
        scope = vars(dataclasses) if globals is None else globals
        exec(store.code(text), scope, ns)
        return ns["__create_fn__"](**locals)

    return _create_fn


_ATTRS_MODULE = "attr._make"
# attrs writes a hashable class's own hash (of a text, so different in every process under
# hash randomization) into its ``__hash__`` as a literal. Its code is stored with this
# placeholder instead, outside the 64-bit range of ``hash``, and the literal put back.
_TYPE_HASH = re.compile(r"hash\(\(\n +(-?[0-9]+),\n")
_PLACEHOLDER = 2**64 + 7
_ATTRS_PARAMETERS = ("script", "globs", "locs", "filename")


class _AttrsWatch:
    """The ``sys.meta_path`` entry waiting for ``attr._make`` (module docstring)."""

    def __init__(self, store: _Store) -> None:
        self.store = store

    def find_spec(self, name: str, path: Any, target: Any = None) -> Any:
        if name != _ATTRS_MODULE:
            return None
        from importlib.machinery import SourceFileLoader, SourcelessFileLoader

        sys.meta_path.remove(self)  # once: whatever follows, attrs is found by the others
        spec = None
        for finder in sys.meta_path:
            find = getattr(finder, "find_spec", None)
            spec = None if find is None else find(name, path, target)
            if spec is not None:
                break
        loader = getattr(spec, "loader", None)
        # Only a file loader made for this one module is changed (a shared one never is).
        if isinstance(loader, SourceFileLoader | SourcelessFileLoader):
            run = loader.exec_module

            def exec_module(module: types.ModuleType) -> None:
                run(module)
                _serve_attrs(module, self.store)

            loader.exec_module = exec_module  # type: ignore[method-assign]  # this instance only
        return spec


def _serve_attrs(module: types.ModuleType, store: _Store) -> None:
    """Replace ``module._compile_and_eval`` (attrs') by one taking its code from ``store``."""
    import __future__

    original = getattr(module, "_compile_and_eval", None)
    code = getattr(original, "__code__", None)
    # The parameters, and a body that does nothing but compile and evaluate (the globals it
    # uses): a version of attrs doing more there keeps its own function.
    if code is None or code.co_varnames[: len(_ATTRS_PARAMETERS)] != _ATTRS_PARAMETERS:
        return
    if code.co_names != ("compile", "eval"):
        return
    # compile() inherits the __future__ flags of the function calling it.
    future = 0
    for feature in __future__.all_feature_names:
        future |= getattr(__future__, feature).compiler_flag
    flags = code.co_flags & future

    def _compile_and_eval(
        script: str, globs: dict[str, Any] | None, locs: Any = None, filename: str = ""
    ) -> None:
        eval(_attrs_code(store, script, filename, flags), globs, locs)

    module._compile_and_eval = _compile_and_eval  # type: ignore[attr-defined]  # private, by design


def _attrs_code(store: _Store, script: str, filename: str, flags: int) -> types.CodeType:
    """The code of an attrs method text: from the store, its class hash put back (above)."""
    found = list(_TYPE_HASH.finditer(script))
    if not found:
        return store.code(script, filename, flags)
    if len(found) == 1:
        start, end = found[0].span(1)
        text = f"{script[:start]}{_PLACEHOLDER}{script[end:]}"
        put = _Put(int(found[0].group(1)))
        code = put.into(store.code(text, filename, flags))
        if put.count == 1:  # exactly where the literal was: the code attrs itself makes
            return code
    # Not a text attrs writes today, or the literal folded where it cannot be put back:
    # compiled as attrs would, not stored.
    made: types.CodeType = compile(script, filename, "exec", flags=flags, dont_inherit=True)
    return made


class _Put:
    """Puts ``value`` where ``_PLACEHOLDER`` is in a code object's constants, counting the
    places: in nested functions and in folded tuple or frozenset constants (``hash((h,))``
    of a class with no hashed field compiles to one tuple constant)."""

    def __init__(self, value: int) -> None:
        self.value = value
        self.count = 0

    def into(self, code: types.CodeType) -> types.CodeType:
        return code.replace(co_consts=tuple(self._const(c) for c in code.co_consts))

    def _const(self, c: object) -> object:
        if type(c) is int and c == _PLACEHOLDER:
            self.count += 1
            return self.value
        if isinstance(c, types.CodeType):
            return self.into(c)
        if type(c) is tuple:
            return tuple(self._const(x) for x in c)
        if type(c) is frozenset:
            return frozenset(self._const(x) for x in c)
        return c
