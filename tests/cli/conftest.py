"""Fixtures for CLI tests that need a scripted provider: the server of tests.providers.fixtures."""

from __future__ import annotations

from tests.providers.fixtures import server

__all__ = ["server"]
