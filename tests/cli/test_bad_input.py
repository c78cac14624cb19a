"""Bad input at the command line: every case exits 2, cleanly, and leaves no trace on disk.

For each malformed workflow file and each usage error: exit code 2; with ``--output json`` one
``agentctl.dev/cli/v1`` error envelope on stderr and nothing on stdout; in human mode an
``error:`` line, plus ``file:line:col`` when the loader or compiler located the problem; never
a Python traceback; and the working directory is byte-for-byte unchanged (``run`` compiles
before it opens a database, so a bad workflow creates no ``.agentctl/``).
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from tests.conftest import Cli, CliResult

HEADER = "apiVersion: agentctl.dev/v1alpha1\nkind: Workflow\n"
GOOD = HEADER + (
    "metadata:\n"
    "  name: good\n"
    "spec:\n"
    "  actions:\n"
    "    put: { kind: builtin.assign }\n"
    "  tasks:\n"
    "    - id: a\n"
    "      uses: action:put\n"
)


def _edit(old: str, new: str) -> bytes:
    assert GOOD.count(old) == 1, old
    return GOOD.replace(old, new).encode()


def _tasks(*lines: str) -> bytes:
    body = (
        "metadata: { name: bad }\nspec:\n  actions: { put: { kind: builtin.assign } }\n  tasks:\n"
    )
    return (HEADER + body + "".join(f"    - {line}\n" for line in lines)).encode()


# name -> (file content, expected code of the first diagnostic)
FILES: dict[str, tuple[bytes, str]] = {
    "malformed-yaml": (HEADER.encode() + b"metadata: { name: x\nspec: [\n", "yaml_syntax"),
    "binary-garbage": (bytes(range(256)) * 8, "yaml_syntax"),
    "two-mebibytes": (b"# " + b"x" * (2 * 1024 * 1024) + b"\n", "schema_violation"),
    "unknown-key-root": (GOOD.encode() + b"bogus: 1\n", "schema_violation"),
    "unknown-key-metadata": (
        _edit("  name: good\n", "  name: good\n  bogus: 1\n"),
        "schema_violation",
    ),
    "unknown-key-task": (GOOD.encode() + b"      bogus: 1\n", "schema_violation"),
    "string-for-integer": (
        _edit("spec:\n", 'spec:\n  runtime: { maxConcurrency: "3" }\n'),
        "schema_violation",
    ),
    "dependency-cycle": (
        _tasks(
            '{ id: a, uses: "action:put", needs: [b] }', '{ id: b, uses: "action:put", needs: [a] }'
        ),
        "dependency_cycle",
    ),
    "missing-action": (_tasks('{ id: a, uses: "action:nope" }'), "missing_reference"),
    "missing-needs": (_tasks('{ id: a, uses: "action:put", needs: [ghost] }'), "missing_reference"),
    "reads-unneeded-task": (
        _tasks(
            '{ id: a, uses: "action:put" }',
            '{ id: b, uses: "action:put", with: { x: "${{ tasks.a.output }}" } }',
        ),
        "invalid_template",
    ),
}

# Diagnostics the user must be pointed at: the JSON path of the offending key.
PATHS = {
    "unknown-key-root": "bogus",
    "unknown-key-metadata": "metadata.bogus",
    "unknown-key-task": "spec.tasks.0.bogus",
    "string-for-integer": "spec.runtime.maxConcurrency",
}

MODES = ["json", "human"]


def _listing(root: Path) -> dict[str, tuple[int, int]]:
    return {
        str(p.relative_to(root)): (p.stat().st_size, p.stat().st_mtime_ns) for p in root.rglob("*")
    }


def _assert_clean_failure(done: CliResult, mode: str) -> None:
    assert done.rc == 2, (done.stdout, done.stderr)
    assert "Traceback" not in done.stderr and "Traceback" not in done.stdout
    if mode == "json":
        assert done.stdout == ""
        lines = done.stderr.strip().splitlines()
        assert len(lines) == 1, done.stderr
        envelope = json.loads(lines[0])
        assert envelope["apiVersion"] == "agentctl.dev/cli/v1"
        assert envelope["kind"] == "Error" and envelope["ok"] is False
        assert envelope["error"]["exitCode"] == 2
        assert envelope["error"]["message"]
    else:
        assert done.stderr.startswith("error: "), done.stderr
        assert "\x1b" not in done.stderr


def _mode_flags(mode: str) -> list[str]:
    return ["--output", "json"] if mode == "json" else ["--color", "never"]


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("case", sorted(FILES))
def test_bad_workflow_file_with_check(cli: Cli, tmp_path: Path, case: str, mode: str) -> None:
    content, code = FILES[case]
    (tmp_path / "wf.yaml").write_bytes(content)
    before = _listing(tmp_path)
    done = cli(*_mode_flags(mode), "check", "wf.yaml")
    _assert_clean_failure(done, mode)
    if mode == "json":
        first = done.error["diagnostics"][0]
        assert first["code"] == code, first
        assert first["file"] == "wf.yaml"
        assert isinstance(first["line"], int) and isinstance(first["column"], int)
        if case in PATHS:
            assert first["path"] == PATHS[case]
        if case == "two-mebibytes":  # refused before any parsing, with one diagnostic
            assert done.error["diagnostics"] == [first]
            assert "limit is 1048576 bytes" in first["message"], first
    else:
        assert f"[{code}]" in done.stderr
        assert re.search(r"wf\.yaml:\d+:\d+", done.stderr), done.stderr
    assert _listing(tmp_path) == before


@pytest.mark.parametrize("case", sorted(FILES))
def test_bad_workflow_file_with_run(
    cli: Cli,
    tmp_path: Path,
    case: str,
) -> None:
    content, code = FILES[case]
    (tmp_path / "wf.yaml").write_bytes(content)
    before = _listing(tmp_path)
    done = cli("--output", "json", "run", "wf.yaml")
    _assert_clean_failure(done, "json")
    assert done.error["diagnostics"][0]["code"] == code
    assert _listing(tmp_path) == before  # in particular `run` created no .agentctl/


def test_yaml_nan_is_a_diagnostic(cli: Cli, tmp_path: Path) -> None:
    (tmp_path / "wf.yaml").write_bytes(_edit("spec:\n", "spec:\n  inputs: { x: .nan }\n"))
    done = cli("--output", "json", "check", "wf.yaml")
    _assert_clean_failure(done, "json")
    assert done.error["diagnostics"][0]["code"] == "yaml_syntax"


# --------------------------------------------------------------------------- not a file


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("what", ["missing", "directory"])
def test_workflow_path_that_is_not_a_file(cli: Cli, tmp_path: Path, what: str, mode: str) -> None:
    if what == "directory":
        (tmp_path / "wf.yaml").mkdir()
    before = _listing(tmp_path)
    for command in ("check", "plan", "run") if mode == "json" else ("check",):
        done = cli(*_mode_flags(mode), command, "wf.yaml")
        _assert_clean_failure(done, mode)
        message = done.error["error"]["message"] if mode == "json" else done.stderr
        assert "wf.yaml" in message
        assert ("does not exist" if what == "missing" else "directory") in message
    assert _listing(tmp_path) == before


# A URL, an empty string or a file path ending in "/" where a path is expected: ``Path`` would
# make ``https://h/x`` the relative ``https:/h/x`` (``--write`` then created a directory
# ``https:``), ``""`` the current directory (``--workspace ""`` ran in it) and ``out/`` the
# file ``out``; all must be refused before anything runs.
_DIGEST = "sha256:" + "0" * 64
NOT_A_PATH: dict[str, tuple[list[str], str]] = {
    "check-url": (["check", "https://example.com/wf.yaml"], "URL"),
    "run-url": (["run", "https://example.com/wf.yaml"], "URL"),
    "plan-empty": (["plan", ""], "empty"),
    "migrate-write-url": (["migrate", "wf.yaml", "--write", "https://example.com/x.yaml"], "URL"),
    "migrate-write-empty": (["migrate", "wf.yaml", "--write", ""], "empty"),
    "schema-write-url": (["schema", "--write", "file:///tmp/schema.json"], "URL"),
    "run-workspace-empty": (["run", "wf.yaml", "--workspace", ""], "empty"),
    "run-inputs-file-url": (["run", "wf.yaml", "--inputs-file", "https://h/i.json"], "URL"),
    "export-dest-url": (["artifacts", "export", _DIGEST, "https://example.com/a"], "URL"),
    # A well-known scheme without "//" is a URL too: "http:/h/x" made a directory "http:".
    "export-dest-url-one-slash": (["artifacts", "export", _DIGEST, "http:/example.com/x"], "URL"),
    "export-dest-file-scheme": (["artifacts", "export", _DIGEST, "file:example.com.txt"], "URL"),
    "export-dest-data-url": (["artifacts", "export", _DIGEST, "data:text/plain,hi"], "URL"),
    "schema-write-upper-scheme": (["schema", "--write", "HTTPS:example.com/s.json"], "URL"),
    "run-inputs-file-s3": (["run", "wf.yaml", "--inputs-file", "s3:example.com/i.json"], "URL"),
    # A trailing separator names a directory: Path("out/") would write a file named "out".
    "schema-write-dir": (["schema", "--write", "out/"], "ends with a path separator"),
    "migrate-write-dir": (["migrate", "wf.yaml", "--write", "out/"], "ends with a path separator"),
}


@pytest.mark.parametrize("case", sorted(NOT_A_PATH))
def test_url_or_empty_string_is_not_a_path(cli: Cli, tmp_path: Path, case: str) -> None:
    (tmp_path / "wf.yaml").write_text(GOOD)
    argv, mentioned = NOT_A_PATH[case]
    before = _listing(tmp_path)
    done = cli("--output", "json", *argv)
    _assert_clean_failure(done, "json")
    message = done.error["error"]["message"]
    assert mentioned in message
    assert "example.com" not in message  # only a URL's scheme is echoed, as for --db
    assert _listing(tmp_path) == before


# --------------------------------------------------------------------------- usage errors

USAGE: dict[str, tuple[list[str], str]] = {
    "unknown-command": (["frobnicate", "wf.yaml"], "frobnicate"),
    "unknown-subcommand": (["runs", "frobnicate"], "frobnicate"),
    "bad-flag": (["check", "--frobnicate", "wf.yaml"], "--frobnicate"),
    "bad-flag-on-run": (["run", "wf.yaml", "--frobnicate"], "--frobnicate"),
    "missing-argument": (["check"], "file"),
    "bad-color": (["--color", "rainbow", "check", "wf.yaml"], "rainbow"),
    "flag-without-value": (["check", "wf.yaml", "--color"], "--color"),
    "inputs-not-json": (["run", "wf.yaml", "--inputs", "{oops"], "JSON"),
    "inputs-not-object": (["run", "wf.yaml", "--inputs", "[1]"], "object"),
    "input-without-equals": (["run", "wf.yaml", "--input", "novalue"], "KEY=VALUE"),
    # Both given is the error, whatever the file: it is not even read.
    "inputs-and-missing-file": (
        ["run", "wf.yaml", "--inputs", "{}", "--inputs-file", "missing.json"],
        "mutually exclusive",
    ),
}


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("case", sorted(USAGE))
def test_usage_error(cli: Cli, tmp_path: Path, case: str, mode: str) -> None:
    (tmp_path / "wf.yaml").write_text(GOOD)
    argv, mentioned = USAGE[case]
    before = _listing(tmp_path)
    flags = _mode_flags(mode) if mode == "json" else []
    done = cli(*flags, *argv)
    _assert_clean_failure(done, mode)
    message = done.error["error"]["message"] if mode == "json" else done.stderr
    assert mentioned in message
    assert _listing(tmp_path) == before


@pytest.mark.parametrize("where", ["before", "after"])
def test_output_xml_is_rejected(cli: Cli, tmp_path: Path, where: str) -> None:
    (tmp_path / "wf.yaml").write_text(GOOD)
    before = _listing(tmp_path)
    argv = ["--output", "xml", "check", "wf.yaml"]
    if where == "after":
        argv = ["check", "wf.yaml", "--output", "xml"]
    done = cli(*argv)
    _assert_clean_failure(done, "human")  # no JSON was asked for, so the error is human text
    assert "xml" in done.stderr and "json" in done.stderr  # names the valid choices
    assert _listing(tmp_path) == before


def test_json_flag_after_the_command_also_governs_usage_errors(cli: Cli) -> None:
    done = cli("check", "--frobnicate", "wf.yaml", "--output", "json")
    _assert_clean_failure(done, "json")


# spec/cli.md §1: ``--db`` is taken on the group and after the subcommand. Given in both places
# with different values, the later one silently won (and was created: a typo made an empty
# ledger and an empty listing, exit 0). One database named twice is fine.
DB_TWICE: dict[str, list[str]] = {
    "effects": ["effects", "--db", "st/r.db", "list", "RUN", "--db", "typo/r.db"],
    "approvals": ["approvals", "--db", "st/r.db", "list", "RUN", "--db", "typo/r.db"],
    "artifacts": ["artifacts", "--db", "st/r.db", "list", "--db", "typo/r.db"],
    "db": ["db", "--db", "st/r.db", "stats", "--db", "typo/r.db"],
    "memory": ["memory", "--db", "st/r.db", "get", "ns", "k", "--db", "typo/r.db"],
    "runs": ["runs", "--db", "st/r.db", "list", "--db=typo/r.db"],
    "global": ["--db", "st/r.db", "runs", "list", "--db", "typo/r.db"],
}


@pytest.mark.parametrize("case", sorted(DB_TWICE))
def test_two_different_db_values_are_refused(
    cli: Cli, tmp_path: Path, backend: str, case: str
) -> None:
    before = _listing(tmp_path)
    done = cli("--output", "json", *DB_TWICE[case])
    _assert_clean_failure(done, "json")
    message = done.error["error"]["message"]
    assert "different values" in message
    if backend == "sqlite":  # on PostgreSQL the test's paths become two server URLs
        assert "'st/r.db'" in message and "'typo/r.db'" in message
    assert _listing(tmp_path) == before  # neither database was created


def test_one_db_named_twice_is_one_database(cli: Cli, tmp_path: Path) -> None:
    done = cli("--output", "json", "runs", "--db", "st/r.db", "list", "--db", "./st/r.db")
    assert done.rc == 0, done.stderr
    assert done.data["runs"] == []


@pytest.mark.sqlite_only(reason="the PostgreSQL target rewrites a --db path that is no URL")
def test_db_with_a_url_scheme_and_no_slashes_is_a_url(cli: Cli, tmp_path: Path) -> None:
    before = _listing(tmp_path)
    done = cli("--output", "json", "runs", "list", "--db", "http:example.com/r.db")
    _assert_clean_failure(done, "json")
    assert "not a supported database URL" in done.error["error"]["message"]
    assert _listing(tmp_path) == before


def test_a_colon_name_with_no_url_scheme_is_a_local_file(cli: Cli, tmp_path: Path) -> None:
    # Only well-known URL schemes are refused: "a:b.json" (or "./http:x.json") is a file name.
    for name in ("a:b.json", "./http:x.json"):
        done = cli("--output", "json", "schema", "--write", name)
        assert done.rc == 0, (name, done.stderr)
        assert (tmp_path / name).is_file()
