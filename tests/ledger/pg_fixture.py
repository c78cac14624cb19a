"""PostgreSQL for the ledger tests: one place that knows where a server is.

``AGENTCTL_TEST_PG_URL`` names a server (default: the development server on 127.0.0.1:55432);
a session database ``pgledger_test_<pid>`` is created on it, and each test gets its own schema
in it (a URL whose ``search_path`` is that schema), dropped afterwards. With no server
answering, the PostgreSQL variants skip and say why. (The CI suite replaces this module's
server lookup with a fixture that starts a server.)
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from urllib.parse import quote

import pytest

PG_URL_ENV = "AGENTCTL_TEST_PG_URL"
DEFAULT_PG_URL = "postgresql://postgres@127.0.0.1:55432/postgres"


def _admin_url() -> str:
    return os.environ.get(PG_URL_ENV) or DEFAULT_PG_URL


def _with_database(url: str, name: str) -> str:
    base, _, query = url.partition("?")
    head = base.rsplit("/", 1)[0] if base.count("/") > 2 else base
    return f"{head}/{name}" + (f"?{query}" if query else "")


@pytest.fixture(scope="session")
def pg_database() -> Iterator[str]:
    """The URL of a database of this test session (created, and dropped at the end)."""
    psycopg = pytest.importorskip("psycopg", reason="the postgres extra is not installed")
    admin = _admin_url()
    try:
        conn = psycopg.connect(admin, autocommit=True, connect_timeout=3)
    except psycopg.OperationalError as exc:
        pytest.skip(f"no PostgreSQL server answers at ${PG_URL_ENV} or the default: {exc}")
    name = f"pgledger_test_{os.getpid()}"
    conn.execute(f'DROP DATABASE IF EXISTS "{name}"')
    conn.execute(f'CREATE DATABASE "{name}"')
    try:
        yield _with_database(admin, name)
    finally:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        conn.close()


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
