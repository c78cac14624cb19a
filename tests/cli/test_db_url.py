"""``--db`` (or ``$AGENTCTL_DB``) takes a SQLite file path or a PostgreSQL URL; any other URL is
refused with exit 2 naming the supported schemes, never created as a directory, and a URL's
password never appears in what the CLI prints."""

from __future__ import annotations

import json
import shutil
import socket
from pathlib import Path

import pytest

from tests.conftest import REPO, Cli

# The --db/AGENTCTL_DB values are these tests' subject; the backend parametrization would only
# rewrite them.
pytestmark = pytest.mark.sqlite_only(reason="tests how --db and AGENTCTL_DB values are read")

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
    # The refusal names the variable the value came from: no --db was given to fix.
    assert refused.error["error"]["message"].startswith("$AGENTCTL_DB mysql://… is not"), refused
    (tmp_path / "dir").mkdir()
    for command in (("runs", "list"), ("run", "hello.yaml")):
        env_dir = cli(*command, env={"AGENTCTL_DB": "dir"})
        assert env_dir.rc == 2 and "error: $AGENTCTL_DB dir is a directory" in env_dir.stderr
        given = cli(*command, "--db", "dir", env={"AGENTCTL_DB": "x.db"})
        assert given.rc == 2 and "error: --db dir is a directory" in given.stderr
    # An explicit --db wins over the variable: the file is opened (made, being missing), the
    # URL never used.
    env = {"AGENTCTL_DB": "mysql://h/db"}
    local = cli("--output", "json", "runs", "list", "--db", "none.db", env=env)
    assert local.rc == 0 and local.data == {"runs": []}, local
    assert (tmp_path / "none.db").is_file()


def test_an_unreachable_server_exits_5_without_the_password(cli: Cli, tmp_path: Path) -> None:
    url = "postgresql://someone:hunter2@127.0.0.1:1/agentctl"
    done = cli("--output", "json", "runs", "list", "--db", url)
    assert done.rc == 5, done
    assert "hunter2" not in done.stderr + done.stdout
    assert "someone:***@127.0.0.1:1" in json.dumps(done.error)
    assert sorted(p.name for p in tmp_path.iterdir()) == []


def _closed_port() -> int:
    with socket.socket() as probe:  # bound, never listened on: nothing answers once closed
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
    return port


# (URL template, the secrets it carries): libpq takes ?, # and % in a password, an upper-case
# scheme is a PostgreSQL URL, and sslpassword/password may come as query parameters.
SECRET_FORMS = [
    ("postgresql://someone:se?cret-1@127.0.0.1:{port}/agentctl", ("se?cret-1",)),
    ("postgresql://someone:se#cret-2@127.0.0.1:{port}/agentctl", ("se#cret-2", "cret-2")),
    ("postgresql://someone:pa%zz-3@127.0.0.1:{port}/agentctl", ("pa%zz-3",)),
    ("POSTGRESQL://someone:upper-4@127.0.0.1:{port}/agentctl", ("upper-4",)),
    (
        "postgresql://someone@127.0.0.1:{port}/agentctl?sslpassword=sslpw-5&password=qpw-6",
        ("sslpw-5", "qpw-6"),
    ),
]


@pytest.mark.parametrize(("template", "secrets"), SECRET_FORMS, ids=[s[0] for _, s in SECRET_FORMS])
@pytest.mark.parametrize("command", ["runs list", "db stats", "doctor hello.yaml"])
def test_no_form_of_url_password_is_ever_printed(
    cli: Cli, tmp_path: Path, template: str, secrets: tuple[str, ...], command: str
) -> None:
    shutil.copy(REPO / "examples" / "hello.yaml", tmp_path / "hello.yaml")
    url = template.format(port=_closed_port())
    done = cli("--output", "json", *command.split(), "--db", url)
    assert done.rc in (5, 6), done  # refused: 5, or doctor's "not ready"
    shown = done.stdout + done.stderr
    assert "Traceback" not in shown and "127.0.0.1" in shown, done
    for secret in secrets:
        assert secret not in shown, done


@pytest.mark.parametrize("name", [":memory:", "./:memory:"])
def test_a_db_file_named_like_sqlite_memory_keeps_what_is_written(
    cli: Cli, tmp_path: Path, name: str
) -> None:
    # SQLite opens the name ":memory:" as a private in-memory database. The ledger creates the
    # file of that name, so every connection must open that file: else a write is reported
    # done and lost with the process, and a read finds no tables (exit 5).
    wrote = cli("--output", "json", "memory", "put", "ns", "k", "7", "--db", name)
    assert wrote.rc == 0, wrote
    read = cli("--output", "json", "memory", "get", "ns", "k", "--db", name)
    assert read.rc == 0 and read.data["value"] == 7, read
    listed = cli("--output", "json", "runs", "list", "--db", name)
    assert listed.rc == 0 and listed.data == {"runs": []}, listed
    assert (tmp_path / ":memory:").is_file()
