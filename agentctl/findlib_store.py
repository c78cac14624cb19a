"""The answers of ``ctypes.util.find_library`` kept between CLI processes, for trio's import.

trio names its threads with ``pthread_setname_np``, which it looks for when imported:
``ctypes.util.find_library("pthread")``. That imports ``ctypes.util`` (with shutil, tempfile,
bz2, lzma, random) and forks ``/sbin/ldconfig -p`` to read the dynamic linker's cache, and
parses its output: 4-6 ms of an ``agentctl run``'s CPU and wall (interleaved pairs, ADR 0013
item 9), in every process, for an answer that changes only with that cache. So this module
keeps it.

Invariants:
- ``install`` adds a finder that serves the module ``ctypes.util`` once, only while it is not
  imported yet; what it serves (``_StandIn``) answers ``find_library`` from the store, and
  any other public name — and every ``find_library`` the store cannot answer — from the real
  module (a dunder name the stand-in lacks is missing, as the import system expects),
  which it then imports and puts in its place (``sys.modules`` and the ``ctypes`` package),
  so a later reader gets the real module;
- an answer is kept only when the linker cache gave it (``_findSoname_ldconfig``, the first
  of ``find_library``'s searches on Linux, asked again to tell), under a key naming that
  cache's identity (device, inode, size, times of ``/etc/ld.so.cache``: installing a library
  rewrites it), the machine and the interpreter — what that answer depends on; an answer of
  the fallbacks (the compiler's and linker's search paths) is never kept, and without the
  cache file nothing is served or kept;
- the store lives in the user's cache (``usercache``: private files only): the name it holds
  is loaded by ``ctypes.CDLL``, so it is trusted exactly as far as the user's own files are.
"""

from __future__ import annotations

import os
import sys
import types
from importlib.machinery import ModuleSpec
from typing import Any

from agentctl.usercache import read_entries, write_entries

FILE_NAME = "find-library.marshal"
MODULE = "ctypes.util"
LINKER_CACHE = "/etc/ld.so.cache"
_INTERPRETER = f"{sys.implementation.cache_tag} {sys.version}".replace("\n", " ")
_MAX_ENTRIES = 64  # trio asks for one name; past it only what this process used is kept


def install() -> None:
    """Serve ``ctypes.util`` through ``_StandIn`` if nothing imported it yet (module docstring)."""
    if MODULE in sys.modules or any(isinstance(f, _Finder) for f in sys.meta_path):
        return
    sys.meta_path.insert(0, _Finder())


def store_key() -> bytes | None:
    """The key of the answers valid now; None without a linker cache (nothing kept then)."""
    try:
        st = os.stat(LINKER_CACHE)
    except OSError:
        return None
    cache = (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)
    return f"agentctl-find-library-1 {cache} {os.uname().machine} {_INTERPRETER}\n".encode()


class _Finder:
    """A meta path finder for ``ctypes.util`` alone, used once."""

    def find_spec(self, fullname: str, path: object, target: object = None) -> ModuleSpec | None:
        if fullname != MODULE:
            return None
        sys.meta_path.remove(self)
        loader: Any = _Loader()  # the two methods of ``importlib.abc.Loader`` (not imported)
        return ModuleSpec(MODULE, loader)


class _Loader:
    def create_module(self, spec: ModuleSpec) -> types.ModuleType:
        return _StandIn(spec.name)

    def exec_module(self, module: types.ModuleType) -> None:
        return None


class _StandIn(types.ModuleType):
    """``ctypes.util`` until something needs more of it than a stored ``find_library``."""

    def find_library(self, name: str) -> str | None:
        key = store_key()
        known = read_entries(FILE_NAME, key) if key is not None else {}
        answer = known.get(name)
        if type(answer) is str:
            return answer
        real = real_module()
        found: Any = real.find_library(name)
        if key is not None and type(found) is str and _by_linker_cache(real, name) == found:
            known[name] = found
            write_entries(FILE_NAME, key, known, {name: found}, _MAX_ENTRIES)
        return found  # type: ignore[no-any-return]

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):  # the import system probing a fresh module (``__path__``)
            raise AttributeError(name)
        return getattr(real_module(), name)


def _by_linker_cache(real: Any, name: str) -> object:
    """What the linker cache alone answers for ``name`` (None off Linux, where it is not read)."""
    search = getattr(real, "_findSoname_ldconfig", None)
    return None if search is None else search(name)


def real_module() -> types.ModuleType:
    """The real ``ctypes.util``, imported now if the stand-in is still in its place."""
    current = sys.modules.get(MODULE)
    if current is not None and not isinstance(current, _StandIn):
        return current
    sys.modules.pop(MODULE, None)
    import ctypes
    import importlib

    if isinstance(getattr(ctypes, "util", None), _StandIn):
        delattr(ctypes, "util")  # the import below sets the real one there
    return importlib.import_module(MODULE)
