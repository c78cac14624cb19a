"""The wire models' core schemas, kept between processes (ADR 0013 item 8).

Both ends of the mailbox decode and encode frames with these models: a worker's start is on
the path of a run's first effect, and so is the coordinator's first frame (the worker's
``Hello``, then its first ``Execute``), and building the pydantic schemas of the messages
and requests is ~10% of a worker's start (callgrind, exec to the first ``Result``) and
20-40 ms of the coordinator's first worker effect; loading them back and building the
validators takes a few ms (``prebuilt``). The schemas are stored as a pickle (it names our
classes) in the user's cache directory, trusted only as the user's own file (``usercache``),
as the CLI keeps the workflow models' schema (``cli_schemacache``).

Invariants:
- the file's key is a fingerprint of everything the schemas are made from — this Python,
  pydantic and pydantic-core versions, and the size and modification time of every source
  file of ``agentctl/mailbox``, ``agentctl/core`` and ``agentctl/errors.py`` — so it is used
  only by the code that made it; otherwise the models are built and the file replaced;
- without a cache directory (no home) nothing changes: the models build on first use;
- the cache only ever saves time: any failure to read or write it (a read-only disk, a
  partial file, a schema that cannot be pickled) falls back to building;
- one preparation a process: later calls (a coordinator opens a pool per run) return at once.
"""

from __future__ import annotations

import contextlib
import pickle
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import cast

import pydantic
import pydantic_core
from pydantic_core import CoreSchema

import agentctl.errors
from agentctl.mailbox import prebuilt
from agentctl.usercache import cache_dir, package_sources, read_pickled, sources_key
from agentctl.usercache import write as write_cached

FORMAT = b"agentctl-wire-schemas-1"
FILE_NAME = "wire-schemas.pickle"
_PACKAGE = Path(agentctl.errors.__file__).resolve().parent


_prepared: list[bool] = []  # non-empty once this process has prepared the models


def prepare_wire_models() -> None:
    """Before the first frame: install the stored schemas, or build them all and store."""
    if _prepared:
        return
    _prepared.append(True)
    if cache_dir() is None:
        return  # nowhere to keep them: each model builds when first used, as without a cache
    try:
        key = fingerprint()
    except OSError:  # a source not there to stat (an install of .pyc files only): no cache
        return
    schemas = cast("Mapping[str, CoreSchema] | None", read_pickled(FILE_NAME, key))
    if schemas is not None and prebuilt.use_prebuilt(schemas):
        return
    built = prebuilt.wire_schemas()  # the slow path, once per installation
    with contextlib.suppress(Exception):  # e.g. a schema naming something pickle cannot
        write_cached(FILE_NAME, key, pickle.dumps(built, protocol=pickle.HIGHEST_PROTOCOL))


def fingerprint() -> bytes:
    """What the stored schemas were made from (module docstring), as the file's key line."""
    versions = (sys.version, pydantic.VERSION, pydantic_core.__version__, str(_PACKAGE))
    sources = package_sources(_PACKAGE, ["errors.py"], ["mailbox", "core"])
    return sources_key(FORMAT, versions, sources)
