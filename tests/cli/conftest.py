"""The CLI suite runs on both ledger backends; fixtures for tests with a scripted provider.

Every test here that uses the ``cli`` fixture (or ``ledger_target``) runs once on SQLite and
once on PostgreSQL, unless it is marked ``@pytest.mark.sqlite_only(reason=...)`` because what
it checks is SQLite itself. The PostgreSQL variant skips without a server, or fails under
``CI=true`` (tests/pgserver.py).
"""

from __future__ import annotations

import pytest

from tests.clibackend import BACKENDS
from tests.providers.fixtures import server

__all__ = ["server"]


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "backend" not in metafunc.fixturenames:
        return
    only = metafunc.definition.get_closest_marker("sqlite_only")
    if only is not None and not only.kwargs.get("reason"):
        raise pytest.UsageError(f"{metafunc.definition.nodeid}: sqlite_only needs a reason=")
    metafunc.parametrize("backend", ["sqlite"] if only else list(BACKENDS))
