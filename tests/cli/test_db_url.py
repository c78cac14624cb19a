"""``--db`` takes a database file path; a URL is refused, never created as a directory."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from tests.conftest import REPO, Cli

URLS = ["postgresql://user@db.example/agentctl", "sqlite:///tmp/x.db", "file://runtime.db"]


@pytest.mark.parametrize("url", URLS)
@pytest.mark.parametrize("command", ["run", "inspect"])
def test_a_url_for_db_exits_2_and_creates_nothing(
    cli: Cli, tmp_path: Path, url: str, command: str
) -> None:
    shutil.copy(REPO / "examples" / "hello.yaml", tmp_path / "hello.yaml")
    target = "hello.yaml" if command == "run" else "some-run-id"
    done = cli("--output", "json", command, target, "--db", url)
    assert done.rc == 2, done
    assert "is a URL" in json.dumps(done.error), done
    assert sorted(p.name for p in tmp_path.iterdir()) == ["hello.yaml"]
