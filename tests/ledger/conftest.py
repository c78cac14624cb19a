"""Fixtures for ledger tests: a real SQLite file in tmp_path, and (``ledger`` parametrized)
the same tests against a real PostgreSQL schema (``pg_fixture``; skipped without a server).

A test that exercises SQLite's own machinery (its file, pragmas, triggers) is marked
``@pytest.mark.sqlite_only`` and runs on SQLite alone.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from agentctl.ledger import LedgerService, open_ledger
from agentctl.ledger.connection import Database, open_database
from tests.ledger.pg_fixture import pg_database, pg_url

__all__ = ["pg_database", "pg_url"]


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "sqlite_only: a test of SQLite's own machinery")


@pytest.fixture
def db_path(tmp_path: Path) -> Path:
    return tmp_path / "state" / "runtime.db"


@pytest.fixture(params=["sqlite", "postgresql"])
def ledger(request: pytest.FixtureRequest, db_path: Path) -> Iterator[Any]:
    """The transaction runner of a fresh ledger: SQLite's ``Database`` or PostgreSQL's."""
    if request.param == "postgresql":
        if request.node.get_closest_marker("sqlite_only"):
            pytest.skip("a test of SQLite's own machinery")
        from agentctl.ledger.pg.ledger import open_pg_ledger

        url = request.getfixturevalue("pg_url")
        pg = open_pg_ledger(url, artifacts=db_path.parent / "artifacts")
        try:
            yield pg._pg
        finally:
            pg.close()
        return
    led: Database = open_database(db_path)
    try:
        yield led
    finally:
        led.close()


@pytest.fixture(params=["sqlite", "postgresql"])
def run_ledger(request: pytest.FixtureRequest, db_path: Path) -> Iterator[LedgerService]:
    """A fresh ``RunLedger`` (``open_ledger``) on SQLite or on PostgreSQL."""
    target = request.getfixturevalue("pg_url") if request.param == "postgresql" else db_path
    led = open_ledger(target, artifacts=str(db_path.parent / "artifacts"))
    try:
        yield led
    finally:
        led.close()
