"""Retry and repair from one failed expanded child re-execute only that child and its descendants.

Every child writes one file; the child whose target path is blocked by a directory fails
(under ``failure: continue``, so the aggregate records it and the task after it still runs).
After the directory is removed, ``retry --failed`` (identical workflow) and ``repair --from
CHILD`` must execute exactly that child, the aggregate and what depends on it — every other
child is reused from the source run.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

HEAD = """\
apiVersion: agentctl.dev/v1alpha1
kind: Workflow
metadata: { name: children }
spec:
  policy: { approval: never, processAllowlist: [sh], writableRoots: [out, log] }
  actions:
    save: { kind: builtin.write }
    tail: { kind: builtin.write, with: { path: log/tail.txt, content: tail } }
"""

FEATURES = {
    "foreach": """\
  tasks:
    - { id: fan, uses: "action:save", failure: continue, foreach: { items: [a, b, c], maxItems: 3 },
        with: { path: "out/${{ vars.item }}.txt", content: x } }
    - { id: after, uses: "action:tail", needs: [fan] }
""",
    "matrix": """\
  tasks:
    - { id: grid, uses: "action:save", failure: continue, matrix: { axes: { k: [a, b, c] }, maxItems: 3 },
        with: { path: "out/${{ vars.matrix.k }}.txt", content: x } }
    - { id: after, uses: "action:tail", needs: [grid] }
""",
    "loop": """\
  tasks:
    - { id: poll, uses: "action:save", failure: continue,
        loop: { maxIterations: 3, while: "${{ vars.loopIndex < 3 }}" },
        with: { path: "out/${{ vars.loopIndex }}.txt", content: x } }
    - { id: after, uses: "action:tail", needs: [poll] }
""",
    "subworkflow": """\
  subworkflows:
    trio:
      version: 1.0.0
      tasks:
        - { id: a, uses: "action:save", failure: continue, with: { path: out/a.txt, content: x } }
        - { id: b, uses: "action:save", failure: continue, with: { path: out/b.txt, content: x } }
        - { id: c, uses: "action:save", failure: continue, with: { path: out/c.txt, content: x } }
  tasks:
    - { id: call, uses: "workflow:trio", failure: continue }
    - { id: after, uses: "action:tail", needs: [call] }
""",
}
BLOCKED = {"foreach": "b.txt", "matrix": "b.txt", "loop": "1.txt", "subworkflow": "b.txt"}


def _source(cli, tmp_path: Path, feature: str) -> tuple[Path, Path, str, str]:  # type: ignore[no-untyped-def]
    wf = tmp_path / "wf.yaml"
    wf.write_text(HEAD + FEATURES[feature])
    (tmp_path / "out" / BLOCKED[feature]).mkdir(parents=True)  # a directory: the write fails
    db = tmp_path / "state" / "r.db"
    first = cli("--output", "json", "run", str(wf), "--db", str(db))
    assert first.rc == 4, first.stderr
    source = first.error["error"]["runId"]
    tasks = cli("--output", "json", "inspect", source, "--db", str(db)).data["tasks"]
    [failed_child] = [
        t["taskId"]
        for t in tasks
        if t["state"] == "failed"
        and "--" in t["taskId"]
        and not t["taskId"].endswith("--inputs-" + t["taskId"].rsplit("-", 1)[-1])
    ]
    shutil.rmtree(tmp_path / "out" / BLOCKED[feature])
    return wf, db, source, failed_child


def _executed(cli, db: Path, run_id: str) -> set[str]:  # type: ignore[no-untyped-def]
    data = cli("--output", "json", "inspect", run_id, "--db", str(db)).data
    return {e["taskId"] for e in data["effects"]}


@pytest.mark.parametrize("how", ["retry", "repair"])
@pytest.mark.parametrize("feature", sorted(FEATURES))
def test_only_the_failed_child_and_descendants_run_again(
    feature: str, how: str, cli, tmp_path: Path
) -> None:  # type: ignore[no-untyped-def]
    wf, db, source, child = _source(cli, tmp_path, feature)
    if how == "retry":
        done = cli("--output", "json", "retry", str(wf), source, "--failed", "--db", str(db))
    else:
        done = cli("--output", "json", "repair", str(wf), source, "--from", child, "--db", str(db))
    assert done.rc == 0, done.stderr
    again = _executed(cli, db, done.data["runId"])
    # The failed child's write ran again; nothing else's effect did. In a loop the later
    # iterations depend on the failed one, so they are descendants too.
    ids = [
        t["taskId"]
        for t in cli("--output", "json", "inspect", source, "--db", str(db)).data["tasks"]
    ]
    later = {t for t in ids if feature == "loop" and t.startswith("poll--") and t > child}
    assert again == {child} | later, (again, child)
    # The aggregate recorded the failed child in the source run, so the task after it ran
    # there; executed again here (a write, idempotent), it finds its file as it left it.
    assert {child, "after"} | later <= set(done.data["executedTasks"])
    reused = set(done.data["reusedTasks"])
    assert reused and not (reused & again)
    assert (tmp_path / "log" / "tail.txt").read_text() == "tail"


NAMED = {"foreach": "fan", "matrix": "grid", "loop": "poll", "subworkflow": "call"}


@pytest.mark.parametrize("feature", sorted(FEATURES))
def test_naming_the_written_task_as_a_root_runs_its_children_again(
    feature: str, cli, tmp_path: Path
) -> None:  # type: ignore[no-untyped-def]
    # The expanded children do the work of the task the user wrote; its aggregate only
    # collects their outputs. `--from fan` must execute the children, not the aggregate alone
    # (which would leave the changed children blocked, or a retry re-running nothing).
    wf, db, source, _child = _source(cli, tmp_path, feature)
    wf.write_text(wf.read_text().replace("content: x", "content: y"))
    name = NAMED[feature]
    done = cli(
        "--output", "json", "repair", str(wf), source, "--from", name, "--restart-successful",
        "--db", str(db),
    )  # fmt: skip
    assert done.rc == 0, done.stdout + done.stderr
    files = sorted((tmp_path / "out").iterdir())
    assert len(files) == 3 and {f.read_text() for f in files} == {"y"}
    assert done.data["reusedTasks"] == []
