"""Sources and arguments that retry, repair and compensate refuse before doing anything.

A preview (``run --check``) executed no effect, so none of its tasks can stand for a result;
an empty task id on the command line is bad input, not a task a plan then reports missing.
"""

from __future__ import annotations

from pathlib import Path

FLOW = """\
apiVersion: agentctl.dev/v1alpha1
kind: Workflow
metadata: { name: preview-src }
spec:
  inputs: { ok: false }
  policy: { approval: never, writableRoots: [out] }
  actions:
    put: { kind: builtin.write }
    check: { kind: builtin.assert }
  outputs: { f: "${{ tasks.w.output.path }}" }
  tasks:
    - { id: w, uses: "action:put", with: { path: out/f.txt, content: data } }
    - { id: gate, uses: "action:check", needs: [w], with: { that: "${{ inputs.ok }}", message: not ok } }
"""


def _runs(cli, db: Path) -> list[str]:  # type: ignore[no-untyped-def]
    listed = cli("--output", "json", "runs", "list", "--db", str(db))
    return [r["runId"] for r in listed.data["runs"]]


def _preview(cli, tmp_path: Path) -> tuple[Path, Path, str]:  # type: ignore[no-untyped-def]
    wf = tmp_path / "wf.yaml"
    wf.write_text(FLOW)
    db = tmp_path / "state" / "r.db"
    got = cli("--output", "json", "run", str(wf), "--check", "--db", str(db))
    assert got.rc == 4, got.stderr
    assert not (tmp_path / "out").exists()
    return wf, db, _runs(cli, db)[0]


def test_retry_and_repair_refuse_a_preview_as_their_source(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    wf, db, source = _preview(cli, tmp_path)
    commands = [
        ["retry", str(wf), source, "--failed", "--input", "ok=true"],
        ["retry", str(wf), source, "--from", "w", "--restart-successful"],
        ["repair", str(wf), source, "--from", "gate", "--input", "ok=true"],
    ]
    for command in commands:
        got = cli("--output", "json", *command, "--db", str(db))
        assert got.rc == 3, (command, got.stdout, got.stderr)
        rules = [b["rule"] for b in got.data["blockedReuse"]]
        assert "check_source" in rules, got.data
        assert "preview" in str(got.data["blockedReuse"])
    # Nothing was created and nothing written: the preview's "write" never happened.
    assert _runs(cli, db) == [source]
    assert not (tmp_path / "out").exists()


def test_an_empty_task_id_is_bad_input_before_the_database(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    wf = tmp_path / "wf.yaml"
    wf.write_text(FLOW)
    db = tmp_path / "state" / "r.db"
    first = cli("--output", "json", "run", str(wf), "--db", str(db))
    assert first.rc == 4, first.stderr
    source = _runs(cli, db)[0]
    for command, flag in [
        (["retry", str(wf), source, "--from", ""], "--from"),
        (["repair", str(wf), source, "--from", " "], "--from"),
        (["compensate", source, "--task", ""], "--task"),
    ]:
        got = cli("--output", "json", *command, "--db", str(db))
        assert got.rc == 2, (command, got.stdout, got.stderr)
        assert flag in got.error["error"]["message"] and "empty" in got.error["error"]["message"]
    assert _runs(cli, db) == [source]
