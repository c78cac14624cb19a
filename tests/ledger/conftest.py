"""Fixtures for ledger tests: a real SQLite file in tmp_path."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from agentctl.ledger.connection import Database, open_database


@pytest.fixture
def db_path(tmp_path: Path) -> Path:
    return tmp_path / "state" / "runtime.db"


@pytest.fixture
def ledger(db_path: Path) -> Iterator[Database]:
    led = open_database(db_path)
    try:
        yield led
    finally:
        led.close()
