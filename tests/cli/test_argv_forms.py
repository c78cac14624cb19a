"""Command-line forms an audit found read wrongly (docs/cli.md, first sections).

- ``-h``/``--help`` beside ``--db`` on a group (``agentctl effects --db X -h``) is help, exit 0
  on stdout, and opens nothing; it was "missing command", exit 2;
- the top-level ``-h``/``-V`` act as the original's (clap's) do: the first one met wins and
  the rest of the line is ignored (``-h -V`` was "No such option: -V", ``-V runs list``
  an error naming ``agentctl version``);
- a number option's value is written plainly: ``1_0`` and ``' 2 '`` were read as 10 and 2;
- ``effects reconcile --status`` takes the documented ``not-applied``, not the stored
  ``not_applied`` (accepted alone, yet "a different value" beside ``--outcome not-applied``).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from agentctl import __version__
from tests.conftest import Cli, CliResult

ONE_TASK = """\
apiVersion: agentctl.dev/v1
kind: Workflow
metadata: { name: one-task }
spec:
  actions: { keep: { kind: builtin.assign } }
  tasks:
    - { id: only, uses: "action:keep", with: { v: 1 } }
"""


def _nothing_created(tmp_path: Path) -> None:
    """No database, no state directory: only what the test wrote itself."""
    assert sorted(p.name for p in tmp_path.iterdir()) in ([], ["wf.yaml"])


def _usage_error(done: CliResult, *named: str) -> str:
    """The JSON error envelope of a usage error (exit 2) naming each of ``named``."""
    assert done.rc == 2 and done.stdout == "", (done.stdout, done.stderr)
    message = str(done.error["error"]["message"])
    assert all(word in message for word in named), message
    return message


# ------------------------------------------------------------------ help beside --db


@pytest.mark.parametrize(
    ("args", "page"),
    [
        (("effects", "--db", "s/x.db", "-h"), "agentctl effects"),
        (("effects", "-h", "--db", "s/x.db"), "agentctl effects"),
        (("--db", "s/x.db", "approvals", "--help"), "agentctl approvals"),
        (("db", "encryption", "--db=s/x.db", "-h"), "agentctl db encryption"),
        (("--db", "s/x.db", "-h"), "agentctl"),
    ],
)
def test_help_beside_db_is_help_and_opens_nothing(
    cli: Cli, tmp_path: Path, args: tuple[str, ...], page: str
) -> None:
    for output in ("human", "json"):
        done = cli("--output", output, *args)
        assert done.rc == 0, done.stderr
        assert done.stdout.startswith(f"Usage: {page} [OPTIONS] COMMAND"), done.stdout
        assert done.stderr == ""
    _nothing_created(tmp_path)
    # Without the help flag the group still misses its command (exit 2).
    bare = cli("effects", "--db", "s/x.db")
    assert bare.rc == 2 and "missing command: 'agentctl effects'" in bare.stderr


# ------------------------------------------------------------------ top-level -h / -V


@pytest.mark.parametrize(
    ("args", "shows"),
    [
        (("-h", "-V"), "help"),
        (("--help", "--version"), "help"),
        (("-h", "runs", "list"), "help"),
        (("-V", "-h"), "version"),
        (("-V", "runs", "list"), "version"),
        (("--version", "--bogus"), "version"),
        (("-V", "--db", "s/x.db"), "version"),
        (("version",), "version"),
    ],
)
def test_the_first_top_level_help_or_version_flag_acts(
    cli: Cli, tmp_path: Path, args: tuple[str, ...], shows: str
) -> None:
    done = cli(*args)
    assert done.rc == 0 and done.stderr == "", done.stderr
    if shows == "help":
        assert done.stdout.startswith("Usage: agentctl [OPTIONS] COMMAND"), done.stdout
        assert "-V/--version" in done.stdout
    else:
        assert done.stdout == f"agentctl {__version__}\n"
        machine = cli("--output", "json", *args)
        assert machine.rc == 0 and machine.data["version"] == __version__
    _nothing_created(tmp_path)


def test_a_top_level_flag_after_an_unknown_option_is_still_a_usage_error(cli: Cli) -> None:
    done = cli("--bogus", "-V")
    assert done.rc == 2 and "No such option: --bogus" in done.stderr


# ------------------------------------------------------------------ the help subcommand


@pytest.mark.parametrize(
    ("args", "page"),
    [
        (("help",), "agentctl [OPTIONS] COMMAND"),
        (("help", "run"), "agentctl run [OPTIONS]"),
        (("help", "runs", "list"), "agentctl runs list [OPTIONS]"),
        (("runs", "help", "list"), "agentctl runs list [OPTIONS]"),
        (("effects", "help"), "agentctl effects [OPTIONS] COMMAND"),
        (("help", "db", "encryption", "--db", "s/x.db"), "agentctl db encryption [OPTIONS]"),
    ],
)
def test_help_names_the_page_as_the_original_does(
    cli: Cli, tmp_path: Path, args: tuple[str, ...], page: str
) -> None:
    """clap gives every group a ``help`` subcommand; scripts and users call it."""
    done = cli(*args)
    assert done.rc == 0 and done.stderr == "", done.stderr
    assert done.stdout.startswith(f"Usage: {page}"), done.stdout
    _nothing_created(tmp_path)


@pytest.mark.parametrize(
    ("args", "named"),
    [
        (("help", "nosuch"), ("No such command 'nosuch'",)),
        (("help", "runs", "nosuch"), ("No such command 'nosuch'", "agentctl runs --help")),
        (("help", "run", "extra"), ("unrecognized subcommand 'extra'", "'agentctl run'")),
    ],
)
def test_help_of_what_is_no_command_is_a_usage_error(
    cli: Cli, tmp_path: Path, args: tuple[str, ...], named: tuple[str, ...]
) -> None:
    _usage_error(cli("--output", "json", *args), *named)
    _nothing_created(tmp_path)


def test_help_as_a_command_argument_is_only_an_argument(cli: Cli, tmp_path: Path) -> None:
    """``help`` in a group's command position is the help page; after a command, its word."""
    page = cli("help", "memory", "put")
    assert page.rc == 0 and page.stdout.startswith("Usage: agentctl memory put [OPTIONS]")
    put = cli("--output", "json", "memory", "put", "ns", "help", '"v"', "--db", "m.db")
    assert put.rc == 0, put.stderr
    got = cli("--output", "json", "memory", "get", "ns", "help", "--db", "m.db")
    assert got.rc == 0 and got.data["value"] == "v", got.stdout


# ------------------------------------------------------------------ number options

PUT = ("memory", "put", "ns", "k", '"v"')
NUMBERS = [  # command line, option, lax value
    (("gc", "--dry-run"), "--older-than-days", "3_0"),
    (("artifacts", "gc"), "--older-than-days", "+3_0"),
    (("runs", "list"), "--limit", " 1_0 "),
    (("runs", "list"), "--limit", "10.0"),
    (("runs", "list"), "--limit", "\u0661\u0660"),  # Arabic-Indic digits, int() reads 10
    (PUT, "--retention-days", "1_0"),
    (PUT, "--dimensions", " 16"),
    (("memory", "search", "ns", "q"), "--limit", "1_0"),
    (("serve", "--once"), "--max-runs", "0x1"),
    (("serve", "--once"), "--poll-seconds", "1_0"),
    (("serve", "--once"), "--lease-seconds", " 2 "),
    (("run", "wf.yaml"), "--timeout-seconds", "1_0"),
    (("run", "wf.yaml"), "--timeout-seconds", "2 "),
    (("resume", "run-x"), "--timeout-seconds", "1__0"),
]


@pytest.mark.parametrize(("args", "option", "value"), NUMBERS)
def test_a_number_not_written_plainly_is_refused(
    cli: Cli, tmp_path: Path, args: tuple[str, ...], option: str, value: str
) -> None:
    (tmp_path / "wf.yaml").write_text(ONE_TASK, encoding="utf-8")
    for given in ((option, value), (f"{option}={value}",)):
        done = cli("--output", "json", *args, *given, "--db", "s/x.db")
        message = _usage_error(done, option, repr(value))
        assert message.startswith(f"invalid value {value!r} for {option}: expected a ")
    _nothing_created(tmp_path)


def test_plain_numbers_are_still_read(cli: Cli, tmp_path: Path) -> None:
    (tmp_path / "wf.yaml").write_text(ONE_TASK, encoding="utf-8")
    db = ("--db", "s/x.db")
    for limit in ("10", "+5", "007"):
        assert cli("--output", "json", "runs", "list", "--limit", limit, *db).rc == 0
    assert cli("--output", "json", "gc", "--older-than-days=30", "--dry-run", *db).rc == 0
    for seconds in ("1e3", "2.5", "600"):  # 600 by the fast parser, the others by typer
        done = cli("--output", "json", "run", "wf.yaml", "--timeout-seconds", seconds, *db)
        assert done.rc == 0 and done.data["state"] == "succeeded", done.stderr
    # Spelled-out infinity keeps the option's own, clearer refusal.
    inf = cli("--output", "json", "run", "wf.yaml", "--timeout-seconds", "Infinity", *db)
    _usage_error(inf, "must be a finite number of seconds")


# ------------------------------------------------------------------ reconcile --status


def test_reconcile_status_takes_only_the_documented_spellings(cli: Cli, tmp_path: Path) -> None:
    effect = ("effects", "reconcile", "abcdef12", "--reason", "r", "--db", "s/x.db")
    for status in (("--status", "not_applied"), ("--outcome=not_applied",)):
        done = cli("--output", "json", *effect, *status)
        _usage_error(done, "not_applied", "applied, not-applied or compensated")
    both = cli("--output", "json", *effect, "--status", "not-applied", "--outcome", "not_applied")
    _usage_error(both, "'not-applied'", "'not_applied'")
    _nothing_created(tmp_path)
    # The documented spelling is read (an unknown effect: not found, exit 5).
    known = cli("--output", "json", *effect, "--status", "not-applied")
    assert known.rc == 5, known.stderr
    assert json.loads(known.stderr.strip().splitlines()[-1])["error"]["exitCode"] == 5
