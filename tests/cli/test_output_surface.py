"""The command line's surface as a user meets it (spec/cli.md §1-§2, docs/cli.md "Output").

Covered: bytes that are not UTF-8 in a file the CLI reads as JSON are refused (exit 2) and
named by their offset, never replaced; an argument that is not UTF-8 is shown as the bytes
written; an empty list prints one line instead of a frame of headers around nothing; the
`runs list` cells stay under their headers when a column is cut; the YAML reader does not call
a var file a workflow; `db stats` of a new database does not speak of "other" tables.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import Cli

WF = """apiVersion: agentctl.dev/v1alpha1
kind: Workflow
metadata: { name: surface-with-a-long-name }
spec:
  inputs: { who: world }
  policy: { approval: never }
  actions:
    put: { kind: builtin.assign }
  outputs:
    said: "${{ tasks.a.output.output.who }}"
  tasks:
    - { id: a, uses: action:put, with: { who: "${{ inputs.who }}" } }
"""
NOT_UTF8 = b'{"who": "caf\xe9"}'  # Latin-1: the byte 0xe9 at offset 12


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    (tmp_path / "wf.yaml").write_text(WF, encoding="utf-8")
    return tmp_path


def test_an_inputs_file_that_is_not_utf8_is_refused_not_replaced(cli: Cli, ws: Path) -> None:
    # It was decoded with U+FFFD for the bad byte, and the run stored "caf\ufffd" as the input.
    (ws / "inputs.json").write_bytes(NOT_UTF8)
    done = cli("--output", "json", "run", "wf.yaml", "--inputs-file", "inputs.json")
    assert done.rc == 2, (done.stdout, done.stderr)
    assert done.stdout == ""
    message = done.error["error"]["message"]
    assert message == (
        "inputs file inputs.json is not valid UTF-8 text (byte offset 12); save it as UTF-8"
    )
    assert not (ws / ".agentctl").exists()


def test_an_inputs_file_with_a_byte_order_mark_is_read_as_the_evidence_files_are(
    cli: Cli, ws: Path
) -> None:
    (ws / "inputs.json").write_bytes(b'\xef\xbb\xbf{"who": "bom"}')
    done = cli("--output", "json", "run", "wf.yaml", "--inputs-file", "inputs.json")
    assert done.rc == 0, done.stderr
    assert done.data["output"] == {"said": "bom"}


def test_a_json_file_that_is_not_utf8_names_the_offset_not_the_codec(cli: Cli, ws: Path) -> None:
    (ws / "evidence.json").write_bytes(NOT_UTF8)
    reconcile = ["effects", "reconcile", "0" * 64, "--status", "not-applied", "--reason", "r"]
    done = cli("--output", "json", *reconcile, "--evidence-file", "evidence.json")
    assert done.rc == 2, (done.stdout, done.stderr)
    message = done.error["error"]["message"]
    assert "evidence.json is not valid UTF-8 text (byte offset 12)" in message, message
    assert "codec" not in message


def test_an_argument_that_is_not_utf8_is_shown_as_the_bytes_written(cli: Cli, ws: Path) -> None:
    done = cli("--output", "json", "memory", "get", "ns", "caf\udce9")  # the byte 0xe9
    assert done.rc == 2
    message = done.error["error"]["message"]
    assert "(caf\\xe9)" in message, message
    assert "udce9" not in message


@pytest.mark.parametrize(
    ("argv", "line"),
    [
        (["artifacts", "list"], "no artifacts"),
        (["memory", "search", "ns", "anything"], "no entry of ns matches"),
        (["providers", "inspect", "wf.yaml"], "the workflow declares no providers"),
    ],
)
def test_an_empty_list_is_one_line_not_an_empty_table(
    cli: Cli, ws: Path, argv: list[str], line: str
) -> None:
    done = cli(*argv)
    assert done.rc == 0, done.stderr
    assert done.stdout == line + "\n"


def _starts(line: str) -> list[int]:
    return [i for i, c in enumerate(line) if c != " " and (i == 0 or line[i - 1] == " ")]


def test_runs_list_cells_stay_under_their_headers_when_a_column_is_cut(cli: Cli, ws: Path) -> None:
    # A replay's id is the longest; beside it the workflow column is cut to fit 80 columns,
    # and it used to be cut narrower than its header, shifting every cell after it.
    run_id = cli("--output", "json", "run", "wf.yaml").data["runId"]
    assert cli("replay", run_id).rc == 0
    listed = cli("runs", "list")
    assert listed.rc == 0, listed.stderr
    head, *rows = listed.stdout.splitlines()
    assert len(rows) == 2
    for row in rows:
        assert _starts(row) == _starts(head), (head, row)
        assert "surface…" in row  # cut, but to no less than its header's width


def test_an_empty_var_file_is_not_called_a_workflow(cli: Cli, ws: Path) -> None:
    (ws / "vars.yaml").write_text("", encoding="utf-8")
    (ws / "bad-vars.yaml").write_bytes(b"who: caf\xe9\n")
    empty = cli("--output", "json", "check", "wf.yaml", "--vars-file", "vars.yaml")
    not_text = cli("--output", "json", "check", "wf.yaml", "--vars-file", "bad-vars.yaml")
    for done, said in (
        (empty, "the document is empty; expected a mapping"),
        (not_text, "the file is not valid UTF-8 (byte offset 8)"),
    ):
        assert done.rc == 2
        diagnostics = done.error["diagnostics"]
        assert [d["message"] for d in diagnostics] == [said]
        assert "workflow" not in json.dumps(done.error)


@pytest.mark.sqlite_only(reason="a new PostgreSQL ledger holds rows of its own (agentctl_meta)")
def test_db_stats_of_a_new_database_says_all_tables_are_empty(cli: Cli, ws: Path) -> None:
    done = cli("db", "stats", "--db", "fresh.db")
    assert done.rc == 0, done.stderr
    last = done.stdout.splitlines()[-1]
    assert last.startswith("  (all ") and last.endswith(" tables empty)"), done.stdout
