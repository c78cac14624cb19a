"""A PostgreSQL server for the tests, and a fresh database on it for each test that asks.

Where the server comes from, in order:
1. ``AGENTCTL_TEST_PG_URL`` names one (a URL on a database the user may ``CREATE DATABASE``
   from, e.g. ``postgresql://postgres@127.0.0.1:5432/postgres``);
2. otherwise, if Debian's server binaries are installed (``/usr/lib/postgresql/*/bin``), a
   private server is started for the session: ``initdb`` + ``pg_ctl`` in a fresh directory
   under ``/tmp`` (PostgreSQL refuses a data directory it cannot reach, and pytest's
   ``tmp_path`` lies in a 0700 tree), listening on 127.0.0.1 on a free port (another one if
   that port is taken before the server binds it), trust auth, fsync on, and stopped at the
   end of the session. Under pytest-xdist the session is a worker's: each worker process
   starts its own server, in its own directory on its own port, so workers share no server;
3. otherwise the PostgreSQL variants skip, saying why — except under ``CI=true``, where they
   fail: CI must really test PostgreSQL.

Invariants:
- PostgreSQL refuses to run as root: as root, ``initdb`` and ``pg_ctl`` run as the
  ``postgres`` user (``runuser -u postgres --``), which owns the private directory;
- a private server never outlives its pytest process: a watchdog process stops it and removes
  its directory once that process is gone without its teardown (killed, say);
- every database handed out is new (``CREATE DATABASE`` with a unique name) and dropped after
  its test, connections and all, so tests never see each other's rows;
- psycopg is imported only here, lazily, so the SQLite suite runs without it.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import pytest

URL_ENV = "AGENTCTL_TEST_PG_URL"
BIN_GLOB = "/usr/lib/postgresql/*/bin"
# Every CLI process opens its own connections; concurrent tests start several at once.
MAX_CONNECTIONS = 200
# Tries at starting the private server, each on a fresh free port (see _start_on_a_free_port).
START_ATTEMPTS = 5


@dataclass(frozen=True)
class PgServer:
    """A reachable server; ``admin_url`` is a database to run ``CREATE DATABASE`` from."""

    admin_url: str

    def url_of(self, dbname: str) -> str:
        parts = urlsplit(self.admin_url)
        return urlunsplit(parts._replace(path=f"/{dbname}"))

    def _admin(self, statement: str) -> None:
        import psycopg  # lazily: only the PostgreSQL variants need it

        with psycopg.connect(self.admin_url, autocommit=True, connect_timeout=10) as conn:
            conn.execute(statement)

    def create_database(self, prefix: str = "agentctl_t") -> str:
        """A new, empty database with a unique name; returns its name."""
        name = f"{prefix}_{uuid.uuid4().hex[:16]}"
        self._admin(f'CREATE DATABASE "{name}"')
        return name

    def drop_database(self, name: str) -> None:
        # FORCE: a CLI process killed by its test may have left a connection behind.
        self._admin(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def server_binaries() -> Path | None:
    """The newest installed server's bin directory, or None."""
    found = sorted(Path("/usr/lib/postgresql").glob("*/bin/pg_ctl"), key=_major)
    return found[-1].parent if found else None


def _major(pg_ctl: Path) -> int:
    version = pg_ctl.parent.parent.name
    return int(version) if version.isdigit() else 0


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _as_server_user(argv: list[str]) -> list[str]:
    return ["runuser", "-u", "postgres", "--", *argv] if os.geteuid() == 0 else argv


def _run(argv: list[str], what: str) -> None:
    done = subprocess.run(
        _as_server_user(argv), capture_output=True, text=True, timeout=120, check=False
    )
    if done.returncode != 0:
        raise RuntimeError(f"{what} failed ({done.returncode}): {done.stderr or done.stdout}")


def _private_root() -> Path:
    """A fresh 0755 directory under /tmp, owned by the user the server runs as."""
    root = Path(tempfile.mkdtemp(prefix="agentctl-pg-", dir="/tmp"))
    root.chmod(0o755)
    if os.geteuid() == 0:
        shutil.chown(root, "postgres", "postgres")
    return root


# Stops the server and removes its directory once the pytest process is gone without its own
# teardown (killed, or interrupted twice): pg_ctl's server outlives its parent otherwise.
_WATCHDOG = """
import os, shutil, subprocess, sys, time
owner, root, *stop = sys.argv[1:]
while True:
    try:
        os.kill(int(owner), 0)
    except ProcessLookupError:
        break
    except PermissionError:
        pass
    time.sleep(2)
subprocess.run(stop, capture_output=True, check=False)
shutil.rmtree(root, ignore_errors=True)
"""


@contextlib.contextmanager
def open_private_server(bindir: Path) -> Iterator[PgServer]:
    """initdb + pg_ctl start in a fresh directory; stopped and removed on exit."""
    root = _private_root()
    data = root / "data"
    pg_ctl = [str(bindir / "pg_ctl"), "-D", str(data), "-l", str(root / "server.log")]
    stop = _as_server_user([*pg_ctl, "-m", "immediate", "stop"])
    watchdog = subprocess.Popen(
        [sys.executable, "-c", _WATCHDOG, str(os.getpid()), str(root), *stop],
        start_new_session=True,
        stdin=subprocess.DEVNULL,
    )
    try:
        initdb = [str(bindir / "initdb"), "-D", str(data), "-U", "postgres", "--auth=trust"]
        _run([*initdb, "-E", "UTF8", "--no-locale"], "initdb")
        port = _start_on_a_free_port(pg_ctl, root)
        try:
            yield PgServer(f"postgresql://postgres@127.0.0.1:{port}/postgres")
        finally:
            _run([*pg_ctl, "-m", "fast", "-w", "stop"], "pg_ctl stop")
    finally:
        shutil.rmtree(root, ignore_errors=True)
        watchdog.kill()
        watchdog.wait()


def _start_on_a_free_port(pg_ctl: list[str], root: Path) -> int:
    """Start the server on a port that was free a moment ago; its port.

    Another process (a parallel test worker starting its own server, say) may take the port
    between the probe and the bind: the start is then tried again on a new one.
    """
    log = root / "server.log"
    for attempt in range(1, START_ATTEMPTS + 1):
        seen = log.stat().st_size if log.exists() else 0
        port = _free_port()
        options = (
            f"-c listen_addresses=127.0.0.1 -c port={port} -c unix_socket_directories={root} "
            f"-c fsync=on -c max_connections={MAX_CONNECTIONS}"
        )
        try:
            _run([*pg_ctl, "-w", "-t", "100", "-o", options, "start"], "pg_ctl start")
        except RuntimeError:
            if attempt == START_ATTEMPTS or not _port_was_taken(log, seen):
                raise
            continue
        return port
    raise AssertionError("unreachable")


def _port_was_taken(log: Path, seen: int) -> bool:
    """Whether the server's log, past its first ``seen`` bytes, says the port was in use."""
    try:
        with log.open("rb") as f:
            f.seek(seen)
            text = f.read().decode("utf-8", "replace")
    except OSError:
        return False
    return "Address already in use" in text


def unavailable(reason: str) -> None:
    """Skip the PostgreSQL variant — or, under CI, fail it: CI must really test PostgreSQL."""
    if os.environ.get("CI") == "true":
        pytest.fail(f"PostgreSQL is required under CI=true: {reason}", pytrace=False)
    pytest.skip(reason)


def _psycopg_missing() -> bool:
    try:
        import psycopg  # noqa: F401  (only asking whether the client is installed)
    except ImportError:
        return True
    return False


@pytest.fixture(scope="session")
def pg_server() -> Iterator[PgServer]:
    """The session's PostgreSQL server (see the module docstring for where it comes from)."""
    if _psycopg_missing():
        unavailable("psycopg is not installed (pip install -e '.[postgres]')")
    url = os.environ.get(URL_ENV)
    if url:
        yield PgServer(url)
        return
    bindir = server_binaries()
    if bindir is None:
        unavailable(f"no PostgreSQL: set {URL_ENV} or install it (scripts/setup-system.sh)")
        return
    with open_private_server(bindir) as server:
        yield server


@pytest.fixture
def pg_database(pg_server: PgServer) -> Iterator[str]:
    """The URL of a new, empty database on the session's server; dropped after the test."""
    name = pg_server.create_database()
    try:
        yield pg_server.url_of(name)
    finally:
        pg_server.drop_database(name)
