"""What a ``--db`` value names: a SQLite file path, or a PostgreSQL server URL.

Pure: no I/O, no driver import (the CLI checks ``--db`` while parsing, before any database
code is loaded, and ``agentctl check`` never imports a driver).

Invariants:
- a value is a URL exactly when it starts with ``scheme://``; a path never does, so a URL is
  never taken as a file name (which once created a directory named ``postgresql:``);
- only ``postgresql://`` and ``postgres://`` URLs are databases; any other scheme is refused
  by the caller naming these;
- ``redact`` is the one way a URL is shown to a user, in an error or the audit log: its
  password is replaced by ``***`` (in the authority and in a ``password=`` query parameter).
"""

from __future__ import annotations

import re

POSTGRES_SCHEMES = ("postgresql", "postgres")
_URL = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*)://")
_AUTHORITY_PASSWORD = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*://[^:@/?#]*):[^@/?#]*@")
_QUERY_PASSWORD = re.compile(r"([?&]password=)[^&#]*", re.IGNORECASE)


def url_scheme(value: str) -> str | None:
    """The scheme of a URL value (lower case), or None for a path."""
    found = _URL.match(value)
    return found.group(1).lower() if found else None


def is_postgres_url(value: str) -> bool:
    return url_scheme(value) in POSTGRES_SCHEMES


def redact(url: str) -> str:
    """``url`` with any password replaced by ``***``; a path is returned unchanged."""
    if url_scheme(url) is None:
        return url
    hidden = _AUTHORITY_PASSWORD.sub(r"\1:***@", url, count=1)
    return _QUERY_PASSWORD.sub(r"\1***", hidden)
