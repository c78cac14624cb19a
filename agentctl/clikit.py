"""Shared pieces of the command line: delivering an outcome, reading user files, path checks.

Invariants:
- a command never prints by itself; it hands one ``Outcome`` to ``deliver`` and the entry
  point renders it, so JSON mode always writes exactly one envelope;
- every path the user names is checked here, before any state exists: files the CLI reads go
  through ``read_cli_file`` (regular files only — a FIFO, socket or device is refused before
  it is opened, so nothing blocks — and at most 1 MiB), ``--db`` through ``check_db_path``
  and ``--workspace`` through ``check_workspace``, as ``--timeout-seconds`` through
  ``check_timeout`` (all run while the command line is parsed: as typer callbacks, or by
  ``cli_fast``); each refusal is a ``ValidationError`` (exit 2);
- every other path argument or option is parsed by ``path_parser`` from the text as written,
  so an empty value or a URL (``scheme://``, or ``http:…``-like: ``url_prefix``) is refused
  (exit 2) instead of becoming a local path;
- nothing here imports typer: the hand-parsed hot commands (``cli_fast``) use this module,
  and importing typer was a fifth of their start-up (typer's option types: ``cli_options``);
- ``collect_from_now`` ends start-up for the garbage collector (see ``entry``): called once
  a command's imports are done and before its own work, whatever the command;
- ``ignore_interrupts`` and ``report_closed_stdout`` serve ``cli_main.main``'s last step: once
  the outcome is decided it is final, and a reader that closed stdout is told on stderr.
"""

from __future__ import annotations

import contextlib
import gc
import math
import os
import re
import signal
import stat
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import NoReturn

from agentctl.core.dburl import POSTGRES_SCHEMES, is_postgres_url, redact
from agentctl.core.jsonvalue import JsonValue
from agentctl.core.strictjson import parse_strict
from agentctl.errors import AgentctlError, Diagnostic, ValidationError
from agentctl.render import Outcome, Settings, emit_error, silence_stdout

MAX_CLI_FILE_BYTES = 1_048_576
DEFAULT_DB = ".agentctl/runtime.db"


def collect_from_now() -> None:
    """Turn the garbage collector back on if start-up (``entry.main``) turned it off.

    What exists now — the imported program — is moved out of the collector's view
    (``gc.freeze``): it lives as long as the process, so scanning it again in every full
    collection of a long run would be wasted work. A process that never turned the collector
    off (a test calling ``cli_main.main``) is left as it is.
    """
    if not gc.isenabled():
        gc.freeze()
        gc.enable()


def _file_kind(mode: int) -> str:
    """What a non-regular file is, in the words of ``ls -l``."""
    for test, name in (
        (stat.S_ISDIR, "a directory"),
        (stat.S_ISFIFO, "a FIFO (named pipe)"),
        (stat.S_ISSOCK, "a socket"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
    ):
        if test(mode):
            return name
    return "not a regular file"


def _blocking_ancestor(path: Path) -> Path | None:
    """The nearest existing ancestor of ``path`` that is not a directory (None if all are)."""
    for parent in path.absolute().parents:
        if parent.exists():
            return None if parent.is_dir() else parent
    return None


_URL = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://")
# ``http:/h/x``, ``file:x.txt``, ``data:text/plain,hi``: a URL without ``//`` is still a URL
# (``Path`` would make the first a directory ``http:``). A name whose ``NAME:`` prefix is one
# of these well-known URL schemes (any case) and has something after it is refused as one; any
# other ``a:b.txt`` stays a local file name (a colon is legal in one), as does a one-letter
# prefix (``C:x``), which is no URL scheme.
_SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]+):(?=.)", re.DOTALL)
URL_SCHEMES = frozenset(
    {"http", "https", "file", "data", "ftp", "ftps", "sftp", "ssh", "scp", "git", "git+ssh"}
    | {"git+https", "s3", "gs", "gcs", "az", "abfs", "abfss", "wasb", "wasbs", "hdfs"}
    | {"ws", "wss", "mailto", "javascript", "blob", "about", "urn", "tel", "ldap", "ldaps"}
    | {"smb", "nfs", "webdav", "dav", "davs", "rsync", "magnet", "irc", "news", "nntp"}
    | {"postgres", "postgresql", "mysql", "sqlite", "redis", "mongodb", "jdbc", "odbc"}
)


def url_prefix(value: str) -> str | None:
    """What makes ``value`` a URL, to echo instead of it (the rest may carry a password):
    ``scheme://`` for any scheme, ``scheme:`` for a well-known one (``URL_SCHEMES``); None
    for a local path."""
    url = _URL.match(value)
    if url:
        return url.group(0)
    scheme = _SCHEME.match(value)
    if scheme and scheme.group(1).lower() in URL_SCHEMES:
        return f"{scheme.group(1)}:"
    return None


def check_db_path(value: str, what: str = "--db") -> str:
    """``--db`` (or ``$AGENTCTL_DB``, named by ``what`` in a refusal): a PostgreSQL URL, or a
    regular file or a path that can become one; never a directory or device, and never a URL
    of another scheme."""
    if is_postgres_url(value):
        return value
    url = url_prefix(value)
    if url:
        # A URL is never taken as a file name (it would create a directory "postgresql:"),
        # and only its scheme is echoed: the rest may carry a password.
        supported = ", ".join(f"{s}://" for s in POSTGRES_SCHEMES)
        raise ValidationError(
            f"{what} {url}… is not a supported database URL: give a {supported} URL "
            "or the path of a SQLite database file"
        )
    path = checked_path(value, what)  # not empty, not ending in a separator (a directory)
    _check_db_fits(path, what)
    try:
        mode = path.stat().st_mode
    except (FileNotFoundError, NotADirectoryError):
        mode = None
    if mode is not None and not stat.S_ISREG(mode):
        raise ValidationError(f"{what} {value} is {_file_kind(mode)}; give a database file path")
    blocker = _blocking_ancestor(path)
    if blocker is not None:
        raise ValidationError(f"{what} {value}: {blocker} is a file, not a directory")
    return value


# What the ledger adds to its database file's name for the files beside it: ``NAME.lock``,
# ``NAME.workers``, ``NAME-wal``, ``NAME-journal`` (8 bytes at most); and, while it creates the
# database, the file it builds aside, ``.NAME.new-PID`` (a Linux pid has at most 7 digits),
# which has its ``-journal`` too.
_BESIDE_DB = len("-journal")
_ASIDE_DB = len(".") + len(".new-") + 7
# SQLite's unix VFS opens no database whose absolute path is longer than its MAX_PATHNAME
# (512, fixed when SQLite is built) less the 8 bytes it keeps for a "-journal": 504 opens,
# 505 is "unable to open database file".
_SQLITE_MAX_PATH = 512 - len("-journal")


def _check_db_fits(path: Path, what: str) -> None:
    """``--db``'s path, and the names the ledger derives from it, are ones the file system
    and SQLite can take; checked as text (a name too long fails ``stat`` itself)."""
    creating = not os.path.lexists(path)  # False for a path too long to look up: checked next
    aside = _ASIDE_DB if creating else 0
    check_path_fits(path, what, last_extra=_BESIDE_DB + aside)
    size = len(os.fsencode(path.absolute())) + aside
    if size > _SQLITE_MAX_PATH:
        raise ValidationError(
            f"{what}: the database's absolute path is {size - aside} bytes; SQLite opens a "
            f"database of at most {_SQLITE_MAX_PATH - aside} bytes here (its MAX_PATHNAME, "
            "less the names the ledger derives from it)"
        )


def _name_limits(path: Path) -> tuple[int, int]:
    """NAME_MAX and PATH_MAX of the file system ``path`` is (or would be) on: those of its
    nearest ancestor that exists (the usual 255 and 4096 where the system cannot say)."""
    for place in (path, *path.parents):
        try:
            return os.pathconf(place, "PC_NAME_MAX"), os.pathconf(place, "PC_PATH_MAX")
        except OSError:  # not there yet, or itself a path too long to look up
            continue
        except ValueError:  # the system knows neither name
            break
    return 255, 4096


def check_path_fits(path: Path, what: str, *, last_extra: int = 0) -> None:
    """Refuse (exit 2) a path no system call can take, before anything is created (the OS
    would refuse it only when the file is opened, after its parents were made): a name longer
    than the file system's NAME_MAX (the last name ``last_extra`` bytes less, for the names
    derived from it) or an absolute path of PATH_MAX bytes or more."""
    absolute = path.absolute()
    name_max, path_max = _name_limits(absolute)
    size = len(os.fsencode(absolute))
    if size >= path_max:
        raise ValidationError(
            f"{what}: the path is {size} bytes long (made absolute); a path may have at most "
            f"{path_max - 1} bytes (PATH_MAX)"
        )
    names = path.parts
    for index, name in enumerate(names):
        limit = name_max - (last_extra if index == len(names) - 1 else 0)
        length = len(os.fsencode(name))
        if length > limit:
            shown = name if length <= 40 else f"{name[:32]}…"
            derived = " (NAME_MAX, less the suffixes of the files named after it)"
            raise ValidationError(
                f"{what}: the name {shown!r} is {length} bytes; a name here may have at most "
                f"{limit} bytes{derived if limit < name_max else ' (NAME_MAX)'}"
            )


def checked_path(value: str, what: str, *, file: bool = True) -> Path:
    """A path the user named (``what`` says which), from the text as written.

    ``Path`` rewrites what it is given: ``Path("")`` is the current directory,
    ``Path("https://h/x")`` the relative path ``https:/h/x`` and ``Path("out/")`` the file
    ``out``. So an empty value would be read as ``.``, a URL (``scheme://…``, or a
    well-known scheme without ``//``: ``url_prefix``) read or written (creating a directory
    ``https:``) as a local file, and a ``file`` argument ending in a separator (which
    names a directory) written as a file: all are refused here. Nothing named is ever fetched.
    """
    if not value.strip():
        raise ValidationError(f"{what} is empty; give a path")
    url = url_prefix(value)
    if url:
        # Only the scheme is echoed, as for --db: the rest of a URL may carry a password.
        raise ValidationError(
            f"{what} {url}… is a URL ({url.rstrip(':/')} is a URL scheme); give a local file "
            "path (URLs are not fetched; write ./NAME for a local file of that name)"
        )
    if file and value.endswith(("/", os.sep)):
        raise ValidationError(
            f"{what} {value} ends with a path separator, so it names a directory; give a file"
        )
    return Path(value)


# Each option parsed by ``path_parser``, added as the command modules define their options: its
# value names a file or directory, so the same one spelled twice (`.` and `./`) is one value.
PATH_OPTIONS: set[str] = set()


def path_parser(what: str, *, file: bool = True) -> Callable[[str], Path]:
    """``checked_path`` as a typer ``parser``: it gets the raw text, before ``Path`` sees it.
    ``file=False`` for an argument that may name a directory (``--workspace``, a pack).
    An option's name (``what`` starting with ``--``) joins ``PATH_OPTIONS``."""
    if what.startswith("--"):
        PATH_OPTIONS.add(what)

    def parse(value: str) -> Path:
        return checked_path(value, what, file=file)

    return parse


def is_server_db(db: str) -> bool:
    """Whether ``--db`` names a database server (a PostgreSQL URL), not a SQLite file."""
    return is_postgres_url(db)


def db_words(db: str) -> tuple[str, ...]:
    """``--db DB`` for a command the CLI tells the operator to run next, or nothing when that
    command finds the same database without it (the default, or ``$AGENTCTL_DB``); a URL is
    shown without its password."""
    implied = db in (DEFAULT_DB, os.environ.get("AGENTCTL_DB"))
    return () if implied else ("--db", redact(db))


def command_line(*words: str, db: str) -> str:
    """``agentctl WORDS`` on one line, quoted for a shell, on the database ``db``."""
    import shlex  # only a reply that suggests a command needs it: not on run's start-up

    return " ".join(shlex.quote(word) for word in ("agentctl", *words, *db_words(db)))


_SUGGESTED = re.compile(r"`(agentctl [^`]*)`")


def name_db_in_text(text: str, db: str) -> str:
    """``text`` with ``--db DB`` added to every command it suggests (each written
    `` `agentctl …` ``) that does not name one, as the views do (``db_words``): the layer that
    wrote the text does not know the database, and a command pasted without it looks in the
    default ledger (run not found, exit 5), creating that ledger on the way."""
    words = db_words(db)
    if not words or "`agentctl " not in text:
        return text
    import shlex

    tail = " ".join(shlex.quote(word) for word in words)

    def named(found: re.Match[str]) -> str:
        return found[0] if " --db" in found[1] else f"`{found[1]} {tail}`"

    return _SUGGESTED.sub(named, text)


def name_db_in_error(error: AgentctlError, db: str) -> None:
    """``name_db_in_text`` on ``error``'s message and hint."""
    error.message = name_db_in_text(error.message, db)
    hint = error.data.get("hint")
    if isinstance(hint, str):
        error.data["hint"] = name_db_in_text(hint, db)


def statement(value: str, flag: str) -> str:
    """An operator's recorded words (``--reason``, ``--actor``): blank is bad input, refused
    (exit 2) before any database is opened, since the record would say nothing."""
    if not value.strip():
        raise ValidationError(f"{flag} must not be empty: it is recorded with the decision")
    return value


def task_names(values: list[str] | None, flag: str) -> list[str] | None:
    """Task ids given on the command line (``--from``, ``--task``): an empty one (an unset
    shell variable, say) is bad input (exit 2) before any database is opened, not a task that
    a plan then reports missing."""
    for value in values or []:
        if not value.strip():
            raise ValidationError(f"{flag} needs a task id; it was given an empty value")
    return values


def check_timeout(value: float | None) -> float | None:
    """``--timeout-seconds``: a finite number of seconds. ``inf``, ``Infinity`` and numbers
    too large for a float (``1e400``, 400 nines) all read as infinity, which passes typer's
    ``min`` and would mean no deadline at all: refused (exit 2) instead."""
    if value is not None and not math.isfinite(value):
        raise ValidationError(
            "--timeout-seconds must be a finite number of seconds; this value reads as infinity"
        )
    return value


def check_workspace(value: Path | None) -> Path | None:
    """``--workspace``: an existing directory, checked before any database or run exists."""
    if value is None:
        return None
    check_path_fits(value, "--workspace")  # before ``exists``, which fails on a name too long
    if not value.exists():
        raise ValidationError(f"--workspace {value} does not exist")
    if not value.is_dir():
        raise ValidationError(f"--workspace {value} is not a directory")
    return value


class Delivered(Exception):
    """Carries a finished command's outcome out of typer to ``main``."""

    def __init__(self, outcome: Outcome) -> None:
        super().__init__(outcome.kind)
        self.outcome = outcome


def deliver(outcome: Outcome) -> NoReturn:
    raise Delivered(outcome)


@contextlib.contextmanager
def warning_errors(warnings: Sequence[Diagnostic]) -> Iterator[None]:
    """An error raised inside (a run failing mid-drive) carries the compile's ``warnings`` in
    its envelope's diagnostics, as the success envelope does (spec/cli.md §2)."""
    try:
        yield
    except AgentctlError as exc:
        exc.diagnostics = [*warnings, *exc.diagnostics]
        raise


def _check_regular(path: Path, mode: int, size: int, what: str, diagnosed: bool) -> None:
    if not stat.S_ISREG(mode):
        raise ValidationError(f"{what} {path} is {_file_kind(mode)}, not a regular file")
    if size > MAX_CLI_FILE_BYTES:
        raise _oversized(path, f"{what} {path} is {size} bytes", diagnosed)


def _oversized(path: Path, what: str, diagnosed: bool) -> ValidationError:
    """A file over the CLI's read limit: exit 2; with ``diagnosed``, with one diagnostic naming
    the file and the limit (refused before it is parsed, so it points at line 1, column 1)."""
    message = f"{what}; the limit is {MAX_CLI_FILE_BYTES} bytes"
    if not diagnosed:
        return ValidationError(message)
    found = Diagnostic(
        code="schema_violation",
        message=message,
        file=str(path),
        line=1,
        column=1,
        help=f"keep the file under {MAX_CLI_FILE_BYTES} bytes (1 MiB); move large data elsewhere",
    )
    return ValidationError(message, diagnostics=[found])


def read_cli_file(path: Path, what: str = "file", *, diagnosed: bool = False) -> bytes:
    """Read a user-named regular file of at most 1 MiB; anything else is exit 2.

    ``diagnosed``: the file is the document the command is about (a workflow file), so a file
    over the limit is refused with a diagnostic of its own; files a document names (var files)
    are located at the entry naming them by their reader instead.

    The type is checked before opening (opening a FIFO blocks until a writer appears), and
    again on the open descriptor, which is opened non-blocking in case the path was swapped.
    """
    try:
        st = path.stat()
        _check_regular(path, st.st_mode, st.st_size, what, diagnosed)
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
        with os.fdopen(fd, "rb") as handle:
            st = os.fstat(handle.fileno())
            _check_regular(path, st.st_mode, st.st_size, what, diagnosed)
            data = handle.read(MAX_CLI_FILE_BYTES + 1)
    except FileNotFoundError as exc:
        raise ValidationError(f"{what} {path} does not exist") from exc
    except NotADirectoryError as exc:
        raise ValidationError(f"{what} {path}: a parent is not a directory") from exc
    except PermissionError as exc:
        raise ValidationError(f"{what} {path} is not readable: permission denied") from exc
    except OSError as exc:
        raise ValidationError(f"{what} {path} cannot be read: {exc.strerror}") from exc
    if len(data) > MAX_CLI_FILE_BYTES:
        raise _oversized(
            path, f"{what} {path} is larger than {MAX_CLI_FILE_BYTES} bytes", diagnosed
        )
    return data


def read_cli_text(path: Path, what: str = "file") -> str:
    """A user-named file (as ``read_cli_file``) as UTF-8 text, a leading BOM dropped. Bytes
    that are not UTF-8 are refused (exit 2) rather than replaced: a replaced byte would be
    stored, digested and handed on as if the user had written U+FFFD."""
    data = read_cli_file(path, what)
    try:
        return data.decode("utf-8").removeprefix("\ufeff")
    except UnicodeDecodeError as exc:
        raise ValidationError(
            f"{what} {path} is not valid UTF-8 text (byte offset {exc.start}); save it as UTF-8"
        ) from None


def json_file(path: Path, what: str) -> JsonValue:
    """A user-named file holding strict JSON (no NaN/Infinity, bounded nesting)."""
    return parse_strict(read_cli_file(path, what), f"{what} {path}")


def ignore_interrupts() -> None:
    """From here on SIGINT is ignored: the outcome is decided and is being written."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)


BROKEN_PIPE_EXIT = 4  # spec/cli.md §2: "other runtime error"


def report_closed_stdout(settings: Settings) -> int:
    """stdout's reader went away: say so on stderr and exit non-zero, quietly otherwise."""
    silence_stdout()  # so the interpreter's final flush does not fail again
    message = "stdout was closed by its reader before the output was written (broken pipe)"
    with contextlib.suppress(OSError):
        emit_error(AgentctlError(message), settings)
    return BROKEN_PIPE_EXIT
