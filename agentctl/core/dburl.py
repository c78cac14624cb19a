"""What a ``--db`` value names: a SQLite file path, or a PostgreSQL server URL.

Pure: no I/O, no driver import (the CLI checks ``--db`` while parsing, before any database
code is loaded, and ``agentctl check`` never imports a driver).

Invariants:
- a value is a URL exactly when it starts with ``scheme://``; a path never does, so a URL is
  never taken as a file name (which once created a directory named ``postgresql:``);
- only ``postgresql://`` and ``postgres://`` URLs are databases; any other scheme is refused
  by the caller naming these;
- ``redact`` is the one way a URL is shown to a user, in an error or the audit log: its
  password is replaced by ``***`` whatever characters it holds (in the user-info, split as
  libpq splits it, and in ``password=``/``sslpassword=`` query parameters); ``scrub`` removes
  those passwords, raw or percent-decoded, from any other text (a driver's error message).
"""

from __future__ import annotations

import re
from urllib.parse import unquote

POSTGRES_SCHEMES = ("postgresql", "postgres")
_URL = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*)://")
_QUERY_PASSWORD = re.compile(r"([?&](?:ssl)?password=)[^&#]*", re.IGNORECASE)
# ``password=…`` in a message (a conninfo string, a quoted option), unless already hidden.
_KEYWORD_PASSWORD = re.compile(
    r"((?:ssl)?password\s*=\s*)(?!\*\*\*)('[^']*'|\"[^\"]*\"|[^\s&#'\"]+)", re.IGNORECASE
)
HIDDEN = "***"


def url_scheme(value: str) -> str | None:
    """The scheme of a URL value (lower case), or None for a path."""
    found = _URL.match(value)
    return found.group(1).lower() if found else None


def is_postgres_url(value: str) -> bool:
    return url_scheme(value) in POSTGRES_SCHEMES


def normalized(url: str) -> str:
    """``url`` with its scheme in lower case, the only spelling libpq accepts."""
    found = _URL.match(url)
    return found.group(1).lower() + url[found.end(1) :] if found else url


def _user_info(url: str) -> tuple[int, int] | None:
    """Where the user-info's password lies in ``url`` (start, end), or None when it has none.

    As libpq reads it: the user-info ends at the last ``@`` before the first ``/`` after the
    scheme's ``//``, so a password may hold any character (``?``, ``#``, ``:``, ``%``…)."""
    found = _URL.match(url)
    if found is None:
        return None
    start = found.end()
    slash = url.find("/", start)
    at = url.rfind("@", start, len(url) if slash < 0 else slash)
    colon = url.find(":", start, at) if at >= 0 else -1
    return None if colon < 0 else (colon + 1, at)


def redact(url: str) -> str:
    """``url`` with any password replaced by ``***``; a path is returned unchanged."""
    if url_scheme(url) is None:
        return url
    span = _user_info(url)
    hidden = url if span is None else f"{url[: span[0]]}{HIDDEN}{url[span[1] :]}"
    return _QUERY_PASSWORD.sub(rf"\1{HIDDEN}", hidden)


def passwords(url: str) -> tuple[str, ...]:
    """Every form in which ``url``'s passwords (user-info, ``password=``, ``sslpassword=``)
    may be quoted back: as written and percent-decoded, longest first."""
    found: list[str] = []
    span = _user_info(url)
    if span is not None:
        found.append(url[span[0] : span[1]])
    found += [m.group(0).split("=", 1)[1] for m in _QUERY_PASSWORD.finditer(url)]
    forms = {form for raw in found for form in (raw, unquote(raw)) if form}
    return tuple(sorted(forms, key=len, reverse=True))


def scrub(message: str, url: str) -> str:
    """``message`` without ``url``'s passwords in any form, nor any ``password=`` value."""
    for secret in passwords(url):
        message = message.replace(secret, HIDDEN)
    return _KEYWORD_PASSWORD.sub(rf"\1{HIDDEN}", message)
