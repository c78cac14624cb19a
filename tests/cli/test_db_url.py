"""``--db`` (or ``$AGENTCTL_DB``) takes a SQLite file path or a PostgreSQL URL; any other URL is
refused with exit 2 naming the supported schemes, never created as a directory, and a URL's
password never appears in what the CLI prints."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from tests.conftest import REPO, Cli

URLS = ["sqlite:///tmp/x.db", "file://runtime.db", "mysql://user:hunter2@db.example/agentctl"]


@pytest.mark.parametrize("url", URLS)
@pytest.mark.parametrize("command", ["run", "inspect"])
def test_an_unsupported_url_for_db_exits_2_and_creates_nothing(
    cli: Cli, tmp_path: Path, url: str, command: str
) -> None:
    shutil.copy(REPO / "examples" / "hello.yaml", tmp_path / "hello.yaml")
    target = "hello.yaml" if command == "run" else "some-run-id"
    done = cli("--output", "json", command, target, "--db", url)
    assert done.rc == 2, done
    message = json.dumps(done.error)
    assert "not a supported database URL" in message and "postgresql://" in message, done
    assert "hunter2" not in done.stderr + done.stdout
    assert sorted(p.name for p in tmp_path.iterdir()) == ["hello.yaml"]


def test_agentctl_db_is_checked_like_db_and_db_wins(cli: Cli, tmp_path: Path) -> None:
    refused = cli("--output", "json", "runs", "list", env={"AGENTCTL_DB": "mysql://h/db"})
    assert refused.rc == 2 and "not a supported database URL" in json.dumps(refused.error)
    # An explicit --db wins over the variable: the file is looked up, the URL never used.
    env = {"AGENTCTL_DB": "mysql://h/db"}
    local = cli("--output", "json", "runs", "list", "--db", "none.db", env=env)
    assert local.rc == 5 and "none.db does not exist" in json.dumps(local.error)
    assert sorted(p.name for p in tmp_path.iterdir()) == []


def test_an_unreachable_server_exits_5_without_the_password(cli: Cli, tmp_path: Path) -> None:
    url = "postgresql://someone:hunter2@127.0.0.1:1/agentctl"
    done = cli("--output", "json", "runs", "list", "--db", url)
    assert done.rc == 5, done
    assert "hunter2" not in done.stderr + done.stdout
    assert "someone:***@127.0.0.1:1" in json.dumps(done.error)
    assert sorted(p.name for p in tmp_path.iterdir()) == []
