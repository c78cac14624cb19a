"""The workflow models' core schema, kept between processes so a command does not rebuild it.

Building the pydantic schema of the workflow models is ~90 ms of every ``check``/``run``;
loading it back and building the validator from it takes ~2 ms (``core/dsl/prebuilt.py``).
The schema is stored as a pickle (it refers to our validator functions and classes by name)
in the user's cache directory, trusted only as the user's own file (``usercache``).

Invariants:
- the file's key is a fingerprint of everything the schema is made from — this Python,
  pydantic and pydantic-core versions, and the size and modification time of every source
  file of ``agentctl/core`` and ``agentctl/errors.py`` (what Python itself checks a cached
  ``.pyc`` against) — so it is used only for the code that made it; otherwise the models
  are built as usual and the file replaced;
- the cache only ever saves time: any failure to read or write it (no home directory, a
  read-only disk, a schema that cannot be pickled) silently falls back to building.
"""

from __future__ import annotations

import contextlib
import pickle
import sys
from pathlib import Path
from typing import cast

import pydantic
import pydantic_core

import agentctl.errors
from agentctl.core.dsl import prebuilt
from agentctl.usercache import package_sources, read_pickled, sources_key
from agentctl.usercache import write as write_cached

FORMAT = b"agentctl-workflow-schema-1"
FILE_NAME = "workflow-schema.pickle"
_PACKAGE = Path(agentctl.errors.__file__).resolve().parent


def prepare_workflow_model() -> None:
    """Before the first workflow is validated: install the stored schema, or build and store."""
    if prebuilt.is_built():
        return
    try:
        key = fingerprint()
    except OSError:  # a source not there to stat (an install of .pyc files only): no cache
        return  # pydantic builds the models when the first document is validated
    schema = cast("pydantic_core.CoreSchema | None", read_pickled(FILE_NAME, key))
    if schema is not None:
        prebuilt.use_prebuilt(schema)
        return
    schema = prebuilt.workflow_schema()  # builds the models: the slow path
    with contextlib.suppress(Exception):  # e.g. a validator that pickle cannot name
        write_cached(FILE_NAME, key, pickle.dumps(schema, protocol=pickle.HIGHEST_PROTOCOL))


def fingerprint() -> bytes:
    """What the stored schema was made from (module docstring), as the file's key line."""
    versions = (sys.version, pydantic.VERSION, pydantic_core.__version__, str(_PACKAGE))
    return sources_key(FORMAT, versions, package_sources(_PACKAGE, ["errors.py"], ["core"]))
