"""PostgreSQL for the ledger tests: a session database on the suite's server.

The server is ``tests.pgserver``'s (``AGENTCTL_TEST_PG_URL``, else a private server started
for the session; without either the PostgreSQL variants skip — or fail under ``CI=true``). A
session database is created on it, and each test gets its own schema in it (a URL whose
``search_path`` is that schema), dropped afterwards.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from urllib.parse import quote

import pytest

from tests.pgserver import PgServer


@pytest.fixture(scope="session")
def pg_database(pg_server: PgServer) -> Iterator[str]:
    """The URL of a database of this test session (created, and dropped at the end)."""
    name = pg_server.create_database("pgledger_test")
    try:
        yield pg_server.url_of(name)
    finally:
        pg_server.drop_database(name)


@pytest.fixture
def pg_url(pg_database: str) -> Iterator[str]:
    """A URL whose ledger lives in a fresh, empty schema of the session database."""
    import psycopg

    schema = f"t_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(pg_database, autocommit=True) as conn:
        conn.execute(f'CREATE SCHEMA "{schema}"')
    sep = "&" if "?" in pg_database else "?"
    yield f"{pg_database}{sep}options={quote(f'-csearch_path={schema}')}"
    with psycopg.connect(pg_database, autocommit=True) as conn:
        conn.execute(f'DROP SCHEMA "{schema}" CASCADE')
