"""``open_ledger``: the ledger a ``--db`` value names — a SQLite file or a PostgreSQL URL.

Invariants:
- a ``postgresql://`` / ``postgres://`` URL opens ``PgLedger`` (psycopg is imported here, only
  then); anything else is a SQLite file path (the CLI has refused other URL schemes already);
- the artifact directory of a PostgreSQL ledger is ``artifacts``, else ``$AGENTCTL_ARTIFACTS``,
  else ``.agentctl/artifacts`` under the working directory; it must be one directory shared
  by every host. A SQLite ledger's stays beside its file (``<db dir>/artifacts``).
"""

from __future__ import annotations

import os

from agentctl.core.dburl import is_postgres_url, url_scheme
from agentctl.errors import ValidationError
from agentctl.ledger.connection import DEFAULT_BUSY_TIMEOUT_MS
from agentctl.ledger.service import LedgerService
from agentctl.ledger.sqlite_ledger import open_sqlite_ledger

ARTIFACTS_ENV = "AGENTCTL_ARTIFACTS"


def open_ledger(
    db: str | os.PathLike[str],
    *,
    artifacts: str | None = None,
    busy_timeout_ms: int = DEFAULT_BUSY_TIMEOUT_MS,
    target_version: int | None = None,
    verify: bool = True,
) -> LedgerService:
    """Open (creating and migrating as needed) the ledger ``db`` names; use it as a context
    manager so the connection closes. ``verify`` (SQLite) quick-checks the file before any
    write; ``target_version`` is for tests of older schemas."""
    if isinstance(db, str) and is_postgres_url(db):
        from agentctl.ledger.pg.ledger import open_pg_ledger

        root = artifacts or _artifacts_env()
        return open_pg_ledger(db, artifacts=root, target_version=target_version)
    return open_sqlite_ledger(
        db, busy_timeout_ms=busy_timeout_ms, target_version=target_version, verify=verify
    )


def _artifacts_env() -> str | None:
    """``$AGENTCTL_ARTIFACTS``, a local directory: a URL is refused (exit 2), as the CLI
    refuses one for ``--artifacts``, rather than opened as the relative directory ``https:``."""
    value = os.environ.get(ARTIFACTS_ENV) or None
    scheme = url_scheme(value) if value else None
    if scheme:
        raise ValidationError(
            f"{ARTIFACTS_ENV} {scheme}://… is a URL ({scheme} is a URL scheme); give a local "
            "directory (URLs are not fetched; write ./NAME for a local directory of that name)"
        )
    return value
