"""How long a run took, in the human views: only an ended run has a duration. A paused or
running run's last update is only its latest transition, so created → updated read "0.0s"
(or the seconds to its pause) in ``runs list``, ``inspect`` and its HTML report as if the run
had ended that quickly."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

from tests.conftest import EXAMPLES, Cli

SECONDS = re.compile(r"\d+\.\ds")


def _runs(cli: Cli, tmp_path: Path) -> tuple[str, str]:
    """A paused run (E6 waits for an approval) and a succeeded one (E1)."""
    shutil.copy(EXAMPLES / "e6-approval.yaml", tmp_path / "paused.yaml")
    shutil.copy(EXAMPLES / "e1-dataflow.yaml", tmp_path / "done.yaml")
    paused = cli("--output", "json", "run", "paused.yaml", "--db", "r.db")
    assert paused.rc == 3, paused.stderr
    done = cli("--output", "json", "run", "done.yaml", "--db", "r.db")
    assert done.rc == 0, done.stderr
    return str(paused.data["runId"]), str(done.data["runId"])


def test_runs_list_gives_a_duration_only_to_an_ended_run(cli: Cli, tmp_path: Path) -> None:
    paused, done = _runs(cli, tmp_path)
    listed = cli("runs", "list", "--db", "r.db")
    assert listed.rc == 0, listed.stderr
    took = {line.split()[0]: line.split()[-1] for line in listed.stdout.splitlines()[1:]}
    assert took[paused] == "-"
    assert SECONDS.fullmatch(took[done]), listed.stdout


def test_inspect_and_the_report_give_a_paused_run_no_duration(cli: Cli, tmp_path: Path) -> None:
    paused, done = _runs(cli, tmp_path)
    for run_id, want in ((paused, None), (done, SECONDS)):
        shown = cli("inspect", run_id, "--db", "r.db")
        assert shown.rc == 0, shown.stderr
        line = next(x for x in shown.stdout.splitlines() if x.startswith("duration"))
        value = line.split(None, 1)[1]
        assert value == "-" if want is None else want.fullmatch(value), line
        out = tmp_path / f"{run_id}.html"
        assert cli("inspect", run_id, "--html", str(out), "--db", "r.db").rc == 0
        cell = re.search(r"<tr><th>duration</th><td>([^<]*)</td>", out.read_text())
        assert cell is not None
        assert cell[1] == "-" if want is None else want.fullmatch(cell[1]), cell[0]
