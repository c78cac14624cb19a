"""Hostile command lines (issue 18): each is refused at once with its own message and exit 2,
and the working directory is byte-for-byte what it was before.

Covered: special files as file arguments (never opened, so nothing hangs), strict JSON
(``NaN``/``Infinity`` and overflowing numbers in JSON documents; an ``--input`` value that is
not strict JSON is text), impossible ``--db`` paths, over-deep inputs,
a ``--limit`` beyond 64 bits, a ``--workspace`` that is not a directory, ``--input`` names
neither declared nor read, malformed ones, and a stdout closed by its reader.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.conftest import Cli, agentctl_argv, cli_env

WF = """apiVersion: agentctl.dev/v1alpha1
kind: Workflow
metadata: { name: hostile }
spec:
  inputs: { who: world, count: 1 }
  policy: { approval: never, writableRoots: [out] }
  actions:
    put: { kind: builtin.assign }
    save: { kind: builtin.write }
  tasks:
    - { id: a, uses: action:put, with: { who: "${{ inputs.who }}" } }
    - { id: b, uses: action:save, needs: [a], with: { path: out/x.txt, content: hi } }
"""
EFFECT = "0" * 64
HANG_GUARD_S = 60  # a FIFO would block forever; this only turns a hang into a failure


def snapshot(root: Path) -> dict[str, bytes | None]:
    """Every path under ``root`` with its bytes (None for directories and special files)."""
    found: dict[str, bytes | None] = {}
    for path in sorted(root.rglob("*")):
        regular = path.is_file() and not path.is_symlink()
        found[str(path.relative_to(root))] = path.read_bytes() if regular else None
    return found


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    (tmp_path / "wf.yaml").write_text(WF, encoding="utf-8")
    (tmp_path / "plain.txt").write_text("not a directory\n", encoding="utf-8")
    return tmp_path


def refused(cli: Cli, root: Path, *args: str, needle: str, code: int = 2) -> None:
    """Run ``agentctl --output json ARGS``: exit ``code``, ``needle`` in the message, no change."""
    before = snapshot(root)
    result = cli("--output", "json", *args, timeout=HANG_GUARD_S)
    assert result.rc == code, (result.rc, result.stdout, result.stderr)
    assert result.stdout == ""
    message = result.error["error"]["message"]
    assert needle in message, message
    assert "internal error" not in message and "Traceback" not in result.stderr
    assert snapshot(root) == before


# ----------------------------------------------------------------- 2. special files never hang


@contextlib.contextmanager
def special_file(kind: str, where: Path) -> Iterator[Path]:
    if kind == "fifo":
        os.mkfifo(where)
        yield where
    elif kind == "socket":
        server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        server.bind(str(where))
        with server:
            yield where
    else:
        yield Path("/dev/null")


def _reconcile(status: str, flag: str, path: Path) -> list[str]:
    return ["effects", "reconcile", EFFECT, "--status", status, "--reason", "r", flag, str(path)]


FILE_ARGS: dict[str, Callable[[Path], list[str]]] = {
    "workflow": lambda p: ["check", str(p)],
    "inputs-file": lambda p: ["run", "wf.yaml", "--inputs-file", str(p)],
    "result-file": lambda p: _reconcile("applied", "--result-file", p),
    "result-schema-file": lambda p: _reconcile("applied", "--result-schema-file", p),
    "evidence-file": lambda p: _reconcile("not-applied", "--evidence-file", p),
}
KINDS = {"fifo": "a FIFO", "socket": "a socket", "device": "a character device"}


@pytest.mark.parametrize("kind", sorted(KINDS))
@pytest.mark.parametrize("arg", sorted(FILE_ARGS))
def test_special_file_arguments_are_refused_without_opening(
    cli: Cli, ws: Path, kind: str, arg: str
) -> None:
    with special_file(kind, ws / "special") as special:
        refused(cli, ws, *FILE_ARGS[arg](special), needle=f"is {KINDS[kind]}")


# ----------------------------------------------------------------- 5. strict JSON everywhere

LITERALS = ["NaN", "Infinity", "-Infinity", "1e999"]


def _json_args(where: str, literal: str, root: Path) -> list[str]:
    document = '{"who": [' + literal + "]}"
    if where == "inputs":
        return ["run", "wf.yaml", "--inputs", document]
    (root / "data.json").write_text(document, encoding="utf-8")
    if where == "inputs-file":
        return ["run", "wf.yaml", "--inputs-file", "data.json"]
    return _reconcile("applied", "--result-file", Path("data.json"))


@pytest.mark.parametrize("literal", LITERALS)
@pytest.mark.parametrize("where", ["inputs", "inputs-file", "result-file"])
def test_non_finite_numbers_are_refused(cli: Cli, ws: Path, where: str, literal: str) -> None:
    args = _json_args(where, literal, ws)
    refused(cli, ws, *args, needle=f"contains {literal}")


NOT_STRICT_JSON = [*LITERALS, "1e400", '"\\ud800"', "[" * 200 + "]" * 200]


@pytest.mark.parametrize("value", NOT_STRICT_JSON)
def test_an_input_value_that_is_not_strict_json_is_text(cli: Cli, ws: Path, value: str) -> None:
    """spec/cli.md §1: ``--input K=V`` takes V "as JSON else string". Text strict JSON refuses
    (what Python's parser alone would take) is such a string, kept as typed, not exit 2."""
    done = cli("--output", "json", "run", "wf.yaml", "--input", f"who={value}")
    assert done.rc == 0, done.stderr
    shown = cli("--output", "json", "inspect", done.data["runId"]).data
    [a] = [task for task in shown["tasks"] if task["taskId"] == "a"]
    assert a["output"]["output"] == {"who": value}


def test_rendering_never_writes_a_bare_nan() -> None:
    """The last guard, for a value no input check saw: non-finite floats render as null."""
    from agentctl.render import dump_json

    text = dump_json({"a": [float("nan"), float("inf")], "b": -float("inf"), "c": 1.5})
    assert json.loads(text, parse_constant=lambda c: pytest.fail(c)) == {
        "a": [None, None],
        "b": None,
        "c": 1.5,
    }


# ----------------------------------------------------------------- 6. no "internal error"


@pytest.mark.sqlite_only(reason="--db path checks")
def test_db_that_is_a_directory(cli: Cli, ws: Path) -> None:
    (ws / "state").mkdir()
    refused(cli, ws, "runs", "list", "--db", "state", needle="--db state is a directory")


@pytest.mark.sqlite_only(reason="--db path checks")
def test_db_with_a_trailing_separator_names_a_directory(cli: Cli, ws: Path) -> None:
    """``--db state/`` made ``run`` create a database *file* named ``state`` (``Path`` drops the
    separator); it names a directory, refused before anything exists."""
    refused(cli, ws, "run", "wf.yaml", "--db", "state/", needle="ends with a path separator")


@pytest.mark.sqlite_only(reason="--db path checks")
def test_db_under_a_regular_file(cli: Cli, ws: Path) -> None:
    refused(cli, ws, "run", "wf.yaml", "--db", "plain.txt/r.db", needle="is a file, not a dir")


@pytest.mark.sqlite_only(reason="--db path checks")
def test_db_that_is_empty(cli: Cli, ws: Path) -> None:
    refused(cli, ws, "inspect", "run-x", "--db", "", needle="--db is empty")


def test_deeply_nested_inputs(cli: Cli, ws: Path) -> None:
    deep = '{"who": ' + "[" * 5000 + "]" * 5000 + "}"
    refused(cli, ws, "run", "wf.yaml", "--inputs", deep, needle="nested more than 128 levels")


def test_limit_beyond_64_bits(cli: Cli, ws: Path) -> None:
    refused(cli, ws, "runs", "list", "--limit", str(2**64), needle="--limit")


def test_closed_stdout_is_reported_not_a_crash(ws: Path) -> None:
    """``agentctl runs list | head -0``: the reader is gone before agentctl writes."""
    read_end, write_end = os.pipe()
    os.close(read_end)
    argv = agentctl_argv("--output", "json", "db", "migrate", "--db", "s/r.db")
    proc = subprocess.run(argv, cwd=ws, env=cli_env(), stdout=write_end, stderr=subprocess.PIPE)
    os.close(write_end)
    stderr = proc.stderr.decode()
    assert proc.returncode == 4, stderr
    error = json.loads(stderr.strip().splitlines()[-1])["error"]
    assert "broken pipe" in error["message"] and error["exitCode"] == 4
    assert "Traceback" not in stderr and "internal error" not in stderr


SLOW_CHAIN = """
apiVersion: agentctl.dev/v1alpha1
kind: Workflow
metadata: { name: slow-chain }
spec:
  policy: { approval: never, writableRoots: [out], processAllowlist: [sleep] }
  actions:
    nap: { kind: builtin.shell.exec, command: /bin/sleep, args: ["1"], timeoutSeconds: 30 }
    save: { kind: builtin.write }
  tasks:
    - { id: nap, uses: action:nap }
    - { id: save, uses: action:save, needs: [nap], with: { path: out/done.txt, content: done } }
"""


def test_a_jsonl_reader_that_goes_away_does_not_stop_the_run(tmp_path: Path) -> None:
    """``agentctl --output jsonl run wf.yaml | head -1``: the reader leaves while the run is
    driven; the drive still carries every effect to its end (none left started for an operator
    to reconcile), then the broken pipe is reported (exit 4)."""
    (tmp_path / "wf.yaml").write_text(SLOW_CHAIN, encoding="utf-8")
    argv = agentctl_argv("--output", "jsonl", "run", "wf.yaml", "--db", "s/r.db")
    proc = subprocess.Popen(
        argv, cwd=tmp_path, env=cli_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    assert proc.stdout is not None and proc.stderr is not None
    first = json.loads(proc.stdout.readline())
    proc.stdout.close()  # gone while `nap` sleeps: every later line meets a closed pipe
    stderr = proc.stderr.read().decode()
    assert proc.wait(timeout=HANG_GUARD_S) == 4, stderr
    assert first["data"]["type"] == "run.created"
    assert "broken pipe" in json.loads(stderr.strip().splitlines()[-1])["error"]["message"]
    shown = subprocess.run(
        agentctl_argv("--output", "json", "inspect", first["data"]["runId"], "--db", "s/r.db"),
        cwd=tmp_path,
        env=cli_env(),
        capture_output=True,
        check=True,
    )
    record = json.loads(shown.stdout)["data"]
    assert record["run"]["state"] == "succeeded"
    assert [e["status"] for e in record["effects"]] == ["succeeded", "succeeded"]
    assert (tmp_path / "out" / "done.txt").read_text(encoding="utf-8") == "done"


# ----------------------------------------------------------------- 7. flags before state


@pytest.mark.parametrize(
    ("workspace", "needle"), [("nope", "does not exist"), ("plain.txt", "is not a directory")]
)
def test_workspace_checked_before_any_state(
    cli: Cli, ws: Path, workspace: str, needle: str
) -> None:
    refused(
        cli,
        ws,
        "run",
        "wf.yaml",
        "--workspace",
        workspace,
        needle=f"--workspace {workspace} {needle}",
    )


LONG = "a" * 300  # beyond the 255 bytes a name may have on common file systems
DEEP = "/".join(["b" * 200] * 25)  # every name fits, the whole path does not (PATH_MAX)
TOO_LONG_DB = {  # --db → what the refusal names
    f"{LONG}.db": "(NAME_MAX, less the suffixes",
    "a" * 240 + ".db": "(NAME_MAX, less the suffixes",  # fits, but its .NAME.new-PID-journal not
    f"d/{LONG}/x.db": "(NAME_MAX)",  # used to create d/ before failing
    f"{DEEP}.db": "(PATH_MAX)",
    "/".join(["c" * 100] * 5) + "/x.db": "SQLite opens a database of at most",
}


@pytest.mark.sqlite_only(reason="--db path checks")
@pytest.mark.parametrize("db", sorted(TOO_LONG_DB))
def test_a_db_path_no_file_system_takes_is_a_usage_error(cli: Cli, ws: Path, db: str) -> None:
    # It was exit 5 (File name too long, unable to open database file) once opened, after
    # the missing parent directories had been made.
    for command in (["run", "wf.yaml"], ["runs", "list"]):  # the fast parser and typer
        refused(cli, ws, *command, "--db", db, needle=TOO_LONG_DB[db])


@pytest.mark.parametrize(
    ("workspace", "needle"), [(LONG, "bytes (NAME_MAX)"), (DEEP, "bytes (PATH_MAX)")]
)
def test_a_workspace_path_no_file_system_takes_is_a_usage_error(
    cli: Cli, ws: Path, workspace: str, needle: str
) -> None:
    for option in (["--workspace", workspace], [f"--workspace={workspace}"]):
        refused(cli, ws, "run", "wf.yaml", *option, needle=needle)


INFINITE = ["inf", "Infinity", "1e400", "9" * 400]  # the last two overflow a float
TIMED = {  # every command that takes --timeout-seconds
    "resume": ["resume", "run-x"],
    "fork": ["fork", "run-x"],
    "retry": ["retry", "wf.yaml", "run-x", "--failed"],
    "repair": ["repair", "wf.yaml", "run-x", "--from", "a"],
    "compensate": ["compensate", "run-x"],
}


@pytest.mark.parametrize("value", INFINITE)
def test_a_run_timeout_that_reads_as_infinity_is_refused(cli: Cli, ws: Path, value: str) -> None:
    # It used to pass the option's minimum and run with no deadline at all (exit 0); a plain
    # run of digits goes through the fast parser (cli_fast), the others through typer.
    for option in (["--timeout-seconds", value], [f"--timeout-seconds={value}"]):
        refused(cli, ws, "run", "wf.yaml", *option, needle="must be a finite number of seconds")


@pytest.mark.parametrize("command", sorted(TIMED))
def test_every_timeout_option_refuses_infinity(cli: Cli, ws: Path, command: str) -> None:
    args = [*TIMED[command], "--timeout-seconds", "inf"]
    refused(cli, ws, *args, needle="must be a finite number of seconds")


# ----------------------------------------------------------------- 9. input names


@pytest.mark.parametrize(
    ("pair", "needle"),
    [
        ("whom=x", "'whom' is neither a declared input (spec.inputs) nor read by the workflow"),
        ("1st=x", "'1st' is neither a declared input (spec.inputs) nor read by the workflow"),
        ("a.b=x", "'a.b' is not a valid input name"),
        ("a b=x", "'a b' is not a valid input name"),
    ],
)
def test_input_names_must_be_declared_or_read_template_names(
    cli: Cli, ws: Path, pair: str, needle: str
) -> None:
    refused(cli, ws, "run", "wf.yaml", "--input", pair, needle=needle)
    result = cli("--output", "json", "run", "wf.yaml", "--input", pair)
    assert "inputs: count, who" in result.error["error"]["message"]


def test_an_input_read_but_not_declared_can_be_set_as_with_inputs(cli: Cli, ws: Path) -> None:
    # spec.inputs holds defaults: a workflow may read an input it gives no default, and
    # `--input` reaches it as `--inputs` does; so does one read only in a var file.
    (ws / "vars.yaml").write_text('tag: "${{ inputs.tag }}"\n', encoding="utf-8")
    (ws / "read.yaml").write_text(
        WF.replace('with: { who: "${{ inputs.who }}" }', 'with: { n: "${{ inputs.extra.n }}" }'),
        encoding="utf-8",
    )
    result = cli("--output", "json", "run", "read.yaml", "--input", 'extra={"n": 7}')
    assert result.rc == 0, result.stderr
    assert result.data["output"]["a"]["output"] == {"n": 7}
    args = ("run", "wf.yaml", "--vars-file", "vars.yaml", "--input", "tag=v1")
    assert cli("--output", "json", *args).rc == 0
    # Read nowhere: still a typo, refused before anything is created.
    refused(cli, ws, "run", "read.yaml", "--input", "tag=v1", needle="nor read by the workflow")


def test_a_declared_input_of_any_template_spelling_can_be_set(cli: Cli, ws: Path) -> None:
    # Template path segments are [A-Za-z0-9_-]+ (spec/dsl.md §6.1): `my-key` and `9x` are
    # ordinary declared inputs, so `--input` must reach them as `--inputs` does.
    (ws / "names.yaml").write_text(
        WF.replace("{ who: world, count: 1 }", "{ my-key: 1, 9x: 1 }").replace(
            'with: { who: "${{ inputs.who }}" }',
            'with: { k: "${{ inputs.my-key }}", n: "${{ inputs.9x }}" }',
        ),
        encoding="utf-8",
    )
    result = cli("--output", "json", "run", "names.yaml", "--input", "my-key=2", "--input", "9x=3")
    assert result.rc == 0, result.stderr
    assert result.data["output"]["a"]["output"] == {"k": 2, "n": 3}


# ----------------------------------------------------------------- 3. foreign databases


def _foreign_sqlite(path: Path, application_id: int) -> None:
    import sqlite3  # the test builds another program's file; agentctl never sees sqlite3 here

    raw = sqlite3.connect(path)
    raw.execute(f"PRAGMA application_id = {application_id}")
    raw.execute("CREATE TABLE notes (body TEXT)")
    raw.execute("INSERT INTO notes VALUES ('mine')")
    raw.commit()
    raw.close()
    path.chmod(0o644)


@pytest.mark.sqlite_only(reason="another program's SQLite file")
@pytest.mark.parametrize("application_id", [0, 0x1234])
@pytest.mark.parametrize("command", [["runs", "list"], ["db", "migrate"], ["run", "wf.yaml"]])
def test_foreign_sqlite_file_is_never_taken_over(
    cli: Cli, ws: Path, application_id: int, command: list[str]
) -> None:
    _foreign_sqlite(ws / "other.db", application_id)
    mode = (ws / "other.db").stat().st_mode
    refused(
        cli, ws, *command, "--db", "other.db", needle="other.db is not an agentctl ledger", code=5
    )
    assert (ws / "other.db").stat().st_mode == mode


@pytest.mark.sqlite_only(reason="another program's SQLite file")
@pytest.mark.parametrize("command", [["db", "stats"], ["runs", "list"], ["run", "wf.yaml"]])
def test_a_runs_table_at_a_late_version_without_our_id_is_not_taken_over(
    cli: Cli, ws: Path, command: list[str]
) -> None:
    # Like a ledger of the original (or any program with a `runs` table) at schema 15: ours
    # carry the application id from v5 on, so this one is not ours, and stays byte-identical
    # (no WAL switch, no setup lock), instead of failing half-way on a missing table.
    import sqlite3

    raw = sqlite3.connect(ws / "other.db")
    raw.execute("CREATE TABLE runs (run_id TEXT PRIMARY KEY, state TEXT)")
    raw.execute("INSERT INTO runs VALUES ('run-x', 'succeeded')")
    raw.execute("PRAGMA user_version = 15")
    raw.commit()
    raw.close()
    needle = "other.db is not an agentctl ledger (schema version 15 without agentctl's"
    refused(cli, ws, *command, "--db", "other.db", needle=needle, code=5)


@pytest.mark.sqlite_only(reason="a --db path that is not a SQLite file")
def test_non_sqlite_file_is_never_taken_over(cli: Cli, ws: Path) -> None:
    refused(cli, ws, "db", "stats", "--db", "plain.txt", needle="not an SQLite database", code=5)


# ----------------------------------------------------------------- 5b. text that is no Unicode

LONE = '"\\ud800"'  # JSON's escape of half a surrogate pair: Python's parser takes it


def _surrogate_args(where: str, root: Path) -> list[str]:
    document = '{"who": ' + LONE + "}"
    if where == "inputs":
        return ["run", "wf.yaml", "--inputs", document]
    if where == "var":
        return ["run", "wf.yaml", "--var", f"v={LONE}"]
    if where == "memory":
        return ["memory", "put", "ns", "key", LONE]
    (root / "data.json").write_text(document, encoding="utf-8")
    if where == "inputs-file":
        return ["run", "wf.yaml", "--inputs-file", "data.json"]
    return _reconcile("applied", "--result-file", Path("data.json"))


@pytest.mark.parametrize("where", ["inputs", "inputs-file", "result-file", "var", "memory"])
def test_a_lone_surrogate_escape_is_refused(cli: Cli, ws: Path, where: str) -> None:
    refused(cli, ws, *_surrogate_args(where, ws), needle="lone surrogate escape")


@pytest.mark.parametrize(
    "args",
    [
        ["memory", "put", "ns", "k\udcff", "1"],  # the byte 0xff, as Python hands it over
        ["memory", "search", "ns", "\udcff"],
        ["run", "wf.yaml", "--input", "who=caf\udce9"],  # Latin-1 é
    ],
)
def test_an_argument_that_is_not_utf8_is_refused(cli: Cli, ws: Path, args: list[str]) -> None:
    refused(cli, ws, *args, needle="is not valid UTF-8 text")


def test_a_yaml_escape_of_half_a_surrogate_pair_is_a_diagnostic(cli: Cli, ws: Path) -> None:
    text = WF.replace('who: "${{ inputs.who }}"', 'who: "x\\ud800"')
    (ws / "wf.yaml").write_text(text, encoding="utf-8")
    refused(cli, ws, "check", "wf.yaml", needle="escapes half of a surrogate pair")
    shown = cli("--output", "json", "check", "wf.yaml").error["diagnostics"]
    line = text.splitlines().index(next(s for s in text.splitlines() if "ud800" in s)) + 1
    assert [(d["code"], d["line"]) for d in shown] == [("yaml_syntax", line)]
    # An escaped pair of a character beyond U+FFFF, written whole, is text.
    (ws / "wf.yaml").write_text(WF.replace("world", '"\\U0001F600"'), encoding="utf-8")
    assert cli("check", "wf.yaml").rc == 0
