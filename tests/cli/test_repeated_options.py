"""An option that takes one value, given twice with different values: exit 2 (docs/cli.md).

click let the last one win silently: ``effects reconcile E --status applied … --outcome
not-applied`` recorded ``not_applied`` (and the next resume re-ran the effect), ``--reason
first --reason second`` kept "second", ``--output json --output human`` printed human text.
What each test checks is what the user sees and that a refusal changes nothing.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.cli.test_hostile_state import SIMPLE_WF
from tests.cli.test_reconcile_options import DB, FLOW, _history, _json, _park
from tests.conftest import Cli, CliResult


def _refused(done: CliResult, *named: str) -> str:
    """The one-line JSON error envelope of a usage error; its message names ``named``."""
    assert done.rc == 2, (done.stdout, done.stderr)
    assert done.stdout == ""
    [line] = done.stderr.strip().splitlines()
    message = str(json.loads(line)["error"]["message"])
    assert "given twice with different values" in message
    assert all(word in message for word in named), message
    return message


def test_an_option_and_its_alias_with_two_values_record_nothing(cli: Cli, tmp_path: Path) -> None:
    run_id, effect = _park(cli, tmp_path, "never")
    (tmp_path / "res.json").write_text('{"ok": 1}', encoding="utf-8")
    args = ("effects", "reconcile", effect, "--status", "applied", "--result-file", "res.json")
    more = ("--reason", "it ran", "--outcome", "not-applied")
    done = cli("--output", "json", *args, *more, *DB)
    _refused(done, "--status", "--outcome", "'applied'", "'not-applied'")
    assert _history(cli, effect) == []
    [listed] = _json(cli, "effects", "list", run_id)["effects"]
    assert listed["status"] == "uncertain"  # still the operator's to settle


def _pending(cli: Cli, tmp_path: Path) -> tuple[str, str]:
    """A run paused on the approval of its shell step: the run's id, the approval's."""
    (tmp_path / "wf.yaml").write_text(FLOW.format(approval="high_risk"), encoding="utf-8")
    first = cli("--output", "json", "run", "wf.yaml", *DB)
    assert first.rc == 3, first.stderr
    [pending] = _json(cli, "approvals", "list", first.data["runId"])["approvals"]
    return str(first.data["runId"]), str(pending["approvalId"])


def test_two_reasons_or_actors_leave_the_approval_pending(cli: Cli, tmp_path: Path) -> None:
    run_id, approval = _pending(cli, tmp_path)
    for flags in (
        ("--reason", "first", "--reason", "second"),
        ("--reason=first", "--actor", "a1", "--actor=a2", "--reason", "first"),
    ):
        done = cli("--output", "json", "approvals", "approve", approval, *flags, *DB)
        _refused(done, "'first'" if "second" in flags else "'a1'")
    [still] = _json(cli, "approvals", "list", run_id)["approvals"]
    assert still["approvalId"] == approval and still["status"] == "pending"
    same = cli("--output", "json", "approvals", "approve", approval, "--reason", "go",
               "--reason=go", "--actor", "a1", *DB)  # fmt: skip
    assert same.rc == 0, same.stderr  # the same value twice is harmless
    assert same.data["status"] == "approved"


@pytest.mark.parametrize(
    ("before", "after"),
    [
        (("--output", "json"), ("--output", "human")),
        (("--output", "human"), ("--output=json",)),
        (("--output=jsonl",), ("--output", "human")),
    ],
)
def test_two_output_formats_are_a_json_error_if_either_asks_for_json(
    cli: Cli, before: tuple[str, ...], after: tuple[str, ...]
) -> None:
    _refused(cli(*before, "runs", "list", *after, *DB), "--output", "'human'")


def test_two_colors_are_a_human_error(cli: Cli, tmp_path: Path) -> None:
    done = cli("--color", "never", "runs", "list", "--color=always", *DB)
    assert done.rc == 2 and done.stdout == ""
    assert done.stderr.startswith("error: option --color is given twice"), done.stderr
    assert "'never'" in done.stderr and "'always'" in done.stderr
    assert not (tmp_path / "s").exists()  # refused before the database was created


def test_a_one_value_run_option_twice_creates_no_run(cli: Cli, tmp_path: Path) -> None:
    (tmp_path / "wf.yaml").write_text(FLOW.format(approval="never"), encoding="utf-8")
    args = ("run", "wf.yaml", "--timeout-seconds", "5", "--timeout-seconds", "9")
    _refused(cli("--output", "json", *args, *DB), "--timeout-seconds", "'5'", "'9'")
    assert not (tmp_path / "s").exists()


def test_repeatable_options_still_repeat(cli: Cli, tmp_path: Path) -> None:
    (tmp_path / "wf.yaml").write_text(FLOW.format(approval="never"), encoding="utf-8")
    done = cli("--output", "json", "check", "wf.yaml", "--var", "a=1", "--var", "b=2")
    assert done.rc == 0, done.stderr
    listed: Any = cli("--output", "json", "--output=json", "runs", "list", *DB)
    assert listed.rc == 0 and listed.data["runs"] == []


def test_one_directory_spelled_twice_is_one_value_and_two_are_refused(
    cli: Cli, tmp_path: Path
) -> None:
    """A path option compares the path it names, as ``--db`` does: ``.`` and ``./`` (and the
    absolute spelling) are one workspace; another directory is a mistake, refused before the
    run is created."""
    (tmp_path / "wf.yaml").write_text(SIMPLE_WF, encoding="utf-8")
    (tmp_path / "other").mkdir()
    same = ("--workspace", ".", "--workspace=./", "--workspace", str(tmp_path))
    for command in ("check", "plan"):
        done = cli("--output", "json", command, "wf.yaml", *same)
        assert done.rc == 0, done.stderr
    ran = cli("--output", "json", "run", "wf.yaml", *same, *DB)
    assert ran.rc == 0 and ran.data["state"] == "succeeded", ran.stderr
    args = ("run", "wf.yaml", "--workspace", ".", "--workspace", "other")
    _refused(cli("--output", "json", *args, "--db", "s2/r.db"), "--workspace", "'.'", "'other'")
    assert not (tmp_path / "s2").exists()
