"""Kill-and-recover with finished outputs that live only in the ledger.

The coordinator keeps a finished output in memory only while an unfinished task reads it, and
a resumed coordinator loads none: every output a later task, a condition or the run's output
reads must come back from the ledger. A chain of pure tasks is followed by one ``builtin.write``
effect whose content and ``when`` condition read outputs finished long before (one of them not
in its needs: a condition may name any task). The coordinator SIGKILLs itself once that
effect is ``started`` (and, in a second case, once its outcome is durable); ``resume`` must
write the file exactly once with the right content and report the run output from the ledger.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from agentctl.crashpoints import CrashPoint

CHAIN = 12

_LINKS = "\n".join(
    f'    - {{ id: p{i}, uses: "action:put", needs: [p{i - 1}], with: {{ n: {i} }} }}'
    for i in range(1, CHAIN)
)

WORKFLOW = f"""\
apiVersion: agentctl.dev/v1alpha1
kind: Workflow
metadata: {{ name: far-reads }}
spec:
  policy: {{ approval: never, writableRoots: [out] }}
  actions:
    put: {{ kind: builtin.assign }}
    save: {{ kind: builtin.write }}
  outputs:
    seed: "${{{{ tasks.seed.output.output.word }}}}"
    last: "${{{{ tasks.p{CHAIN - 1}.output.output.n }}}}"
    wrote: "${{{{ tasks.save.output.changed }}}}"
  tasks:
    - {{ id: seed, uses: "action:put", with: {{ word: far, go: true }} }}
    - {{ id: p0, uses: "action:put", needs: [seed], with: {{ n: 0 }} }}
{_LINKS}
    - id: save
      uses: "action:save"
      needs: [p{CHAIN - 1}]
      when: "tasks.seed.output.output.go == true"
      with:
        path: out/x.txt
        content: "n=${{{{ tasks.p{CHAIN - 1}.output.output.n }}}}"
"""


def _integrity(db: Path) -> str:
    with sqlite3.connect(db) as conn:
        return str(conn.execute("PRAGMA integrity_check").fetchone()[0])


def _succeeded_effects(db: Path) -> int:
    with sqlite3.connect(db) as conn:
        row = conn.execute("SELECT count(*) FROM effects WHERE status = 'succeeded'").fetchone()
    return int(row[0])


@pytest.mark.parametrize("point", [CrashPoint.AFTER_STARTED.value, CrashPoint.AFTER_OUTCOME.value])
def test_resume_reads_far_outputs_back(point: str, cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    (tmp_path / "wf.yaml").write_text(WORKFLOW)
    db = tmp_path / "r.db"
    crash = {"AGENTCTL_CRASH_AT": point}
    first = cli("--output", "json", "run", "wf.yaml", "--db", str(db), env=crash)
    assert first.rc == -9, (first.rc, first.stderr)
    assert _integrity(db) == "ok"
    run_id = cli("--output", "json", "runs", "list", "--db", str(db)).data["runs"][0]["runId"]
    resumed = cli("--output", "json", "resume", run_id, "--db", str(db))
    if point == CrashPoint.AFTER_STARTED.value:
        # Started, never confirmed: uncertain, never repeated; not-applied lets it run once.
        assert resumed.rc == 3, resumed.stderr
        effects = cli("--output", "json", "effects", "list", run_id, "--db", str(db))
        (eff,) = [e for e in effects.data["effects"] if e["status"] == "uncertain"]
        assert not (tmp_path / "out" / "x.txt").exists()
        args = ["effects", "reconcile", eff["effectId"], "--status", "not-applied"]
        rec = cli(*args, "--reason", "no file", "--db", str(db))
        assert rec.rc == 0, rec.stderr
        resumed = cli("--output", "json", "resume", run_id, "--db", str(db))
    assert resumed.rc == 0, resumed.stderr
    assert resumed.data["state"] == "succeeded"
    assert resumed.data["output"] == {"seed": "far", "last": CHAIN - 1, "wrote": True}
    assert (tmp_path / "out" / "x.txt").read_text() == f"n={CHAIN - 1}"
    assert _succeeded_effects(db) == 1  # the confirmed write ran once, never again
    assert _integrity(db) == "ok"


CONTRACT = """\
apiVersion: agentctl.dev/v1alpha1
kind: Workflow
metadata: { name: vouched }
spec:
  policy: { approval: never, writableRoots: [out] }
  actions:
    save: { kind: builtin.write }
  tasks:
    - id: save
      uses: "action:save"
      with: { path: out/x.txt, content: hi }
      outputSchema: { type: object, required: [path], properties: { path: { type: string } } }
"""


@pytest.mark.parametrize(
    ("result", "state"), [({"foo": 1}, "refused"), ({"path": "out/x.txt"}, "succeeded")]
)
def test_an_applied_result_is_held_to_the_tasks_output_contract(  # type: ignore[no-untyped-def]
    result: dict[str, object], state: str, cli, tmp_path: Path
) -> None:
    # An operator's `applied` result stands for what the effect did; the task delivers it only
    # if its output contract holds, exactly as for a live outcome. One that breaks it is
    # refused when it is given (a record cannot be taken back; resume would fail the run for
    # good), so the effect stays unresolved and the run waits for a result that holds.
    (tmp_path / "wf.yaml").write_text(CONTRACT)
    (tmp_path / "result.json").write_text(json.dumps(result))
    db = ["--db", str(tmp_path / "r.db")]
    crash = {"AGENTCTL_CRASH_AT": CrashPoint.AFTER_STARTED.value}
    assert cli("--output", "json", "run", "wf.yaml", *db, env=crash).rc == -9
    run_id = cli("--output", "json", "runs", "list", *db).data["runs"][0]["runId"]
    (eff,) = cli("--output", "json", "effects", "list", run_id, *db).data["effects"]
    args = ["effects", "reconcile", eff["effectId"], "--status", "applied", "--reason", "done"]
    given = cli("--output", "json", *args, "--result-file", "result.json", *db)
    resumed = cli("--output", "json", "resume", run_id, *db)
    effect = cli("--output", "json", "effects", "inspect", eff["effectId"], *db).data
    task = cli("--output", "json", "inspect", run_id, *db).data["tasks"][0]
    if state == "refused":
        assert given.rc == 4
        assert "output does not match its output contract" in given.error["error"]["message"]
        assert effect["reconciliations"] == [] and effect["effect"]["status"] == "uncertain"
        assert resumed.rc == 3 and task["output"] is None
    else:
        assert given.rc == 0 and resumed.rc == 0, resumed.stderr
        assert task["state"] == state and task["output"] == result
    assert not (tmp_path / "out" / "x.txt").exists()  # vouched for, never run again
