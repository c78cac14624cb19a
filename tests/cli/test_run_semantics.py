"""What a run does, checked from the outside: conditions, failures, memory, routers, order."""

from __future__ import annotations

import sqlite3
import threading
import time
from pathlib import Path

import pytest

HEAD = """\
apiVersion: agentctl.dev/v1alpha1
kind: Workflow
metadata: { name: semantics }
spec:
"""


def _inspect(cli, db: Path, run_id: str):  # type: ignore[no-untyped-def]
    got = cli("--output", "json", "inspect", run_id, "--db", str(db))
    assert got.rc == 0, got.stderr
    return got.data


def _tasks(data) -> dict:  # type: ignore[no-untyped-def,type-arg]
    return {t["taskId"]: t for t in data["tasks"]}


def test_when_false_skips_with_a_recorded_decision(cli, write_workflow, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    wf = write_workflow(
        HEAD
        + """\
  inputs: { go: false }
  actions: { put: { kind: builtin.assign } }
  tasks:
    - { id: gate, uses: "action:put", when: "${{ inputs.go == true }}", with: { a: 1 } }
    - { id: after, uses: "action:put", needs: [gate], with: { b: 2 } }
    - { id: other, uses: "action:put", with: { c: 3 } }
"""
    )
    db = tmp_path / "r.db"
    done = cli("--output", "json", "run", str(wf), "--db", str(db))
    assert done.rc == 0, done.stderr
    tasks = _tasks(_inspect(cli, db, done.data["runId"]))
    gate = tasks["gate"]
    assert gate["state"] == "skipped"
    assert gate["output"]["reason"] == "when condition was false"
    condition = gate["output"]["condition"]
    assert condition["expression"] == "${{ inputs.go == true }}" and condition["result"] is False
    assert condition["contextDigest"].startswith("sha256:v1:")
    assert tasks["after"]["state"] == "skipped"
    assert tasks["after"]["output"] == {
        "reason": "dependency did not succeed",
        "dependency": "gate",
    }
    assert tasks["other"]["state"] == "succeeded"
    # The same input flips the decision: the condition really reads the input.
    again = cli("--output", "json", "run", str(wf), "--db", str(db), "--input", "go=true")
    assert _tasks(_inspect(cli, db, again.data["runId"]))["gate"]["state"] == "succeeded"


def test_failure_continue_skips_dependants_and_runs_the_rest(
    cli, write_workflow, tmp_path: Path
) -> None:  # type: ignore[no-untyped-def]
    wf = write_workflow(
        HEAD
        + """\
  actions: { check: { kind: builtin.assert }, put: { kind: builtin.assign } }
  tasks:
    - { id: bad, uses: "action:check", failure: continue, with: { that: false, message: nope } }
    - { id: child, uses: "action:put", needs: [bad] }
    - { id: free, uses: "action:put", with: { x: 1 } }
"""
    )
    db = tmp_path / "r.db"
    done = cli("--output", "json", "run", str(wf), "--db", str(db))
    assert done.rc == 4
    err = done.error["error"]
    assert "nope" in err["message"] and err["runId"]
    tasks = _tasks(_inspect(cli, db, err["runId"]))
    assert [tasks[t]["state"] for t in ("bad", "child", "free")] == [
        "failed",
        "skipped",
        "succeeded",
    ]


def test_failure_stop_ends_the_run(cli, write_workflow, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    wf = write_workflow(
        HEAD
        + """\
  actions: { check: { kind: builtin.assert }, put: { kind: builtin.assign } }
  tasks:
    - { id: bad, uses: "action:check", with: { that: false } }
    - { id: later, uses: "action:put", with: { x: 1 } }
"""
    )
    db = tmp_path / "r.db"
    done = cli("--output", "json", "run", str(wf), "--db", str(db))
    assert done.rc == 4 and "assertion failed" in done.error["error"]["message"]
    data = _inspect(cli, db, done.error["error"]["runId"])
    assert data["run"]["state"] == "failed"
    later = _tasks(data)["later"]
    assert later["state"] == "cancelled" and "not started" in later["error"]


def test_memory_write_then_read(cli, write_workflow, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    wf = write_workflow(
        HEAD
        + """\
  policy: { approval: never }
  memory: { working: { seed: 1 } }
  actions: { remember: { kind: builtin.memory.write }, recall: { kind: builtin.memory.read } }
  outputs: { got: "${{ tasks.recall.output.value }}", seed: "${{ memory.seed }}" }
  tasks:
    - { id: remember, uses: "action:remember", with: { key: colour, value: blue } }
    - { id: recall, uses: "action:recall", needs: [remember], with: { key: colour } }
"""
    )
    db = tmp_path / "r.db"
    done = cli("--output", "json", "run", str(wf), "--db", str(db))
    assert done.rc == 0, done.stderr
    assert done.data["output"] == {"got": "blue", "seed": 1}
    data = _inspect(cli, db, done.data["runId"])
    [effect] = data["effects"]
    assert effect["operation"] == "builtin.memory.write" and effect["status"] == "succeeded"
    assert _tasks(data)["remember"]["stateDelta"] == {"colour": "blue"}


def test_memory_write_reports_a_change_by_exact_json(cli, write_workflow, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """spec/dsl.md §6.3: equality is exact JSON — ``true`` is not ``1``, ``1`` is not ``1.0``,
    ``0`` is not ``false`` — so replacing one by the other is a change; the same value is not."""
    wf = write_workflow(
        HEAD
        + """\
  policy: { approval: never }
  memory: { working: { t: true, f: 1, z: 0, same: 1 } }
  actions: { w: { kind: builtin.memory.write } }
  tasks:
    - { id: t, uses: "action:w", with: { key: t, value: 1 } }
    - { id: f, uses: "action:w", with: { key: f, value: 1.0 } }
    - { id: z, uses: "action:w", with: { key: z, value: false } }
    - { id: same, uses: "action:w", with: { key: same, value: 1 } }
"""
    )
    db = tmp_path / "r.db"
    done = cli("--output", "json", "run", str(wf), "--db", str(db))
    assert done.rc == 0, done.stderr
    outputs = {k: t["output"] for k, t in _tasks(_inspect(cli, db, done.data["runId"])).items()}
    for key in ("t", "f", "z"):
        assert (outputs[key]["status"], outputs[key]["changed"]) == ("changed", True), outputs
    assert (outputs["same"]["status"], outputs["same"]["changed"]) == ("unchanged", False)


@pytest.mark.parametrize(("value", "named"), [("null", "got null"), ('"yes"', 'got "yes"')])
def test_an_assert_on_a_non_boolean_names_the_value_as_json(  # type: ignore[no-untyped-def]
    cli, write_workflow, tmp_path: Path, value: str, named: str
) -> None:
    wf = write_workflow(
        HEAD
        + f"""\
  inputs: {{ n: {value} }}
  actions: {{ check: {{ kind: builtin.assert }} }}
  tasks: [ {{ id: a, uses: "action:check", with: {{ that: "${{{{ inputs.n }}}}" }} }} ]
"""
    )
    done = cli("--output", "json", "run", str(wf), "--db", str(tmp_path / "r.db"))
    assert done.rc == 4, done.stdout
    message = done.error["error"]["message"]
    assert f"must be a boolean, {named}" in message and "None" not in message, message


def test_router_skips_unselected_destinations(cli, write_workflow, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    wf = write_workflow(
        HEAD
        + """\
  inputs: { verdict: go }
  actions: { put: { kind: builtin.assign } }
  tasks:
    - { id: decide, uses: "action:put", with: { v: "${{ inputs.verdict }}" } }
    - id: pick
      uses: router
      needs: [decide]
      route: { select: "${{ tasks.decide.output.output.v }}", cases: [ { equals: go, tasks: [publish] } ], default: [shelve] }
    - { id: publish, uses: "action:put", needs: [pick] }
    - { id: shelve, uses: "action:put", needs: [pick] }
"""
    )
    db = tmp_path / "r.db"
    done = cli("--output", "json", "run", str(wf), "--db", str(db))
    assert done.rc == 0, done.stderr
    tasks = _tasks(_inspect(cli, db, done.data["runId"]))
    assert tasks["pick"]["output"] == {
        "selected": "go",
        "matched": True,
        "destinations": ["publish"],
    }
    assert tasks["publish"]["state"] == "succeeded"
    assert tasks["shelve"]["state"] == "skipped"
    assert tasks["shelve"]["output"] == {
        "reason": "route not selected",
        "route": {"router": "pick", "selected": "go", "matched": True},
    }


def test_parallel_batch_commits_in_compiled_order(cli, write_workflow, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    # Later-declared tasks finish first; the commits must still follow compiled order.
    items = ", ".join(str(0.05 * (8 - i)) for i in range(8))
    wf = write_workflow(
        HEAD
        + f"""\
  runtime: {{ maxConcurrency: 8 }}
  policy: {{ approval: never, processAllowlist: [sleep] }}
  actions: {{ nap: {{ kind: builtin.shell.exec, command: /bin/sleep, args: ["${{{{ vars.item }}}}"] }} }}
  tasks:
    - {{ id: fan, uses: "action:put", foreach: {{ items: [{items}], maxItems: 8 }} }}
""".replace('uses: "action:put"', 'uses: "action:nap"')
    )
    db = tmp_path / "r.db"
    done = cli("--output", "json", "run", str(wf), "--db", str(db))
    assert done.rc == 0, done.stderr
    data = _inspect(cli, db, done.data["runId"])
    order = [t["taskId"] for t in data["tasks"]]
    committed = [a["taskId"] for a in data["audit"] if a["eventType"] == "task.succeeded"]
    assert committed == order


# Each a fresh run's maxWallTimeSeconds: the first whose nap starts in time is the one checked.
WALL_LIMITS = (1, 4, 16)


def _nap_past_its_wall_time(cli, write_workflow, tmp_path: Path, limit: int):  # type: ignore[no-untyped-def]
    """A run of one 60-second nap under a ``limit``-second wall time: its result and inspect."""
    wf = write_workflow(
        HEAD
        + f"""\
  runtime: {{ budgets: {{ maxWallTimeSeconds: {limit} }} }}
  policy: {{ approval: never, processAllowlist: [sleep] }}
  actions: {{ nap: {{ kind: builtin.shell.exec, command: /bin/sleep, args: ["60"], timeoutSeconds: 120 }} }}
  tasks: [ {{ id: nap, uses: "action:nap" }} ]
""",
        f"wf{limit}.yaml",
    )
    db = tmp_path / f"r{limit}.db"
    done = cli("--output", "json", "run", str(wf), "--db", str(db), timeout=120)
    assert done.rc == 4, done.stderr
    assert "maxWallTimeSeconds" in done.error["error"]["message"]
    data = _inspect(cli, db, done.error["error"]["runId"])
    assert data["run"]["state"] == "failed"
    [nap] = data["tasks"]
    assert nap["state"] == "cancelled" and "maxWallTimeSeconds" in nap["error"], nap
    return data


def test_wall_time_budget_fails_the_run(cli, write_workflow, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    # The wall time counts from the run's creation, so on a loaded machine it can run out
    # before the nap starts (the coordinator and its worker start first): then nothing
    # starts, and the run is failed all the same. The limit the test needs is one the nap
    # starts within, so each longer limit is a fresh run, and the one whose nap did start
    # is checked in full; 16 seconds is only the safety net (a 1-second limit usually does).
    for limit in WALL_LIMITS:
        data = _nap_past_its_wall_time(cli, write_workflow, tmp_path, limit)
        if data["effects"]:
            break
        assert data["budget"]["exceeded"]["dimension"] == "wallTimeSeconds", data["budget"]
    else:
        pytest.fail(f"the nap never started within {limit} s of its run's creation")
    assert [e["status"] for e in data["effects"]] == ["uncertain"]
    # The task stopped mid-effect says why, as the tasks of a cancelled run do (checked above).
    # spec/cli.md §6: expiry "records overrun" -- the ledger's exceeded record, as for any
    # other dimension, named by its counter and carrying the limit and the seconds reached.
    over = data["budget"]["exceeded"]
    assert over["dimension"] == "wallTimeSeconds" and over["limit"] == limit, over
    assert over["attempted"] > limit, over
    audited = [a["payload"] for a in data["audit"] if a["eventType"] == "budget.exceeded"]
    assert audited == [over]


@pytest.mark.sqlite_only(reason="holds SQLite's database-wide write lock (PostgreSQL locks rows)")
def test_locked_database_is_a_persistence_error(cli, write_workflow, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    wf = write_workflow(
        HEAD
        + """\
  actions: { put: { kind: builtin.assign } }
  tasks: [ { id: a, uses: "action:put" } ]
"""
    )
    db = tmp_path / "r.db"
    assert cli("run", str(wf), "--db", str(db)).rc == 0
    holder = sqlite3.connect(db, isolation_level=None, check_same_thread=False)
    holder.execute("BEGIN IMMEDIATE")
    release = threading.Timer(20, holder.rollback)
    release.start()
    try:
        started = time.monotonic()
        blocked = cli("--output", "json", "run", str(wf), "--db", str(db))
        assert blocked.rc == 5, blocked.stderr
        assert "lock" in blocked.error["error"]["message"].lower()
        assert time.monotonic() - started < 19
    finally:
        release.cancel()
        holder.rollback()
        holder.close()
    listed = cli("--output", "json", "runs", "list", "--db", str(db))
    assert len(listed.data["runs"]) == 1  # the blocked run was never created


def test_commit_order_is_compiled_order_under_random_timing(
    cli, write_workflow, tmp_path: Path
) -> None:  # type: ignore[no-untyped-def]
    import random

    rng = random.Random(20261129)
    for run in range(20):
        sleeps = [round(rng.uniform(0.0, 0.08), 3) for _ in range(8)]
        actions = "".join(
            f'    s{i}: {{ kind: builtin.shell.exec, command: /bin/sleep, args: ["{t}"] }}\n'
            for i, t in enumerate(sleeps)
        )
        tasks = "".join(f'    - {{ id: t{i}, uses: "action:s{i}" }}\n' for i in range(8))
        wf = write_workflow(
            HEAD
            + "  runtime: { maxConcurrency: 8 }\n"
            + "  policy: { approval: never, processAllowlist: [sleep] }\n"
            + "  actions:\n"
            + actions
            + "  tasks:\n"
            + tasks
            + '    - { id: last, uses: "action:s0", needs: [t0, t1, t2, t3, t4, t5, t6, t7] }\n',
            name=f"wf{run}.yaml",
        )
        db = tmp_path / f"r{run}.db"
        done = cli("--output", "json", "run", str(wf), "--db", str(db))
        assert done.rc == 0, done.stderr
        data = _inspect(cli, db, done.data["runId"])
        order = [t["taskId"] for t in data["tasks"]]
        committed = [a["taskId"] for a in data["audit"] if a["eventType"] == "task.succeeded"]
        assert committed == order, (run, sleeps, committed)
        # The run output map has every task, in canonical (sorted) order, as inspect and
        # replay give the stored output back (test_output_order.py); commits keep compiled order.
        assert list(done.data["output"].keys()) == sorted(order)
        batch = [c for c in data["checkpoints"] if len(c["state"].get("tasks", [])) == 8]
        assert [t["taskId"] for t in batch[0]["state"]["tasks"]] == order[:8]


def test_long_term_memory_outlives_the_run_and_replay_reuses_reads(
    cli, write_workflow, tmp_path: Path
) -> None:  # type: ignore[no-untyped-def]
    writer = write_workflow(
        HEAD
        + """\
  policy: { approval: never }
  memory: { longTerm: { namespace: team } }
  actions: { keep: { kind: builtin.long_term_memory.write } }
  tasks: [ { id: keep, uses: "action:keep", with: { key: motto, value: { say: durable } } } ]
""",
        name="writer.yaml",
    )
    reader = write_workflow(
        HEAD
        + """\
  memory: { longTerm: { namespace: team } }
  actions: { recall: { kind: builtin.long_term_memory.read } }
  outputs: { said: "${{ tasks.recall.output.value.say }}" }
  tasks: [ { id: recall, uses: "action:recall", with: { key: motto } } ]
""",
        name="reader.yaml",
    )
    db = tmp_path / "r.db"
    missing = cli("--output", "json", "run", str(reader), "--db", str(db))
    assert missing.rc == 4 and "team/motto" in missing.error["error"]["message"]
    wrote = cli("--output", "json", "run", str(writer), "--db", str(db))
    assert wrote.rc == 0, wrote.stderr
    [effect] = _inspect(cli, db, wrote.data["runId"])["effects"]
    assert effect["effectClass"] == "external_mutate" and effect["status"] == "succeeded"
    read = cli("--output", "json", "run", str(reader), "--db", str(db))
    assert read.rc == 0, read.stderr
    assert read.data["output"] == {"said": "durable"}
    # Overwrite the entry: a replay of the reading run still shows what it read then.
    changed = writer.read_text().replace("durable", "changed")
    writer.write_text(changed)
    assert cli("run", str(writer), "--db", str(db)).rc == 0
    replayed = cli("--output", "json", "replay", read.data["runId"], "--db", str(db))
    assert replayed.rc == 0 and replayed.data["output"] == {"said": "durable"}
    assert _inspect(cli, db, replayed.data["runId"])["effects"] == []


def test_a_chain_of_shell_effects_settles_every_reservation(  # type: ignore[no-untyped-def]
    cli, write_workflow, tmp_path: Path
) -> None:
    # Each shell effect's output budget is settled in the transaction that starts the next
    # step (with the next reservation, or at that transaction's end when, as before the
    # write task, nothing is reserved): the run ends with its usage counted, nothing held.
    wf = write_workflow(
        HEAD
        + """\
  policy: { processAllowlist: [sh], approval: never, writableRoots: [out] }
  actions:
    one: { kind: builtin.shell.exec, command: sh, args: ["-c", "printf abc"] }
    two: { kind: builtin.shell.exec, command: sh, args: ["-c", "printf de"] }
    put: { kind: builtin.write }
  tasks:
    - { id: a, uses: "action:one" }
    - { id: b, uses: "action:put", needs: [a], with: { path: out/x.txt, content: hi } }
    - { id: c, uses: "action:two", needs: [b] }
"""
    )
    db = tmp_path / "r.db"
    done = cli("--output", "json", "run", str(wf), "--db", str(db))
    assert done.rc == 0, done.stderr
    budget = _inspect(cli, db, done.data["runId"])["budget"]
    assert budget["usage"]["processOutputBytes"] == 5
    assert budget["reserved"]["processOutputBytes"] == 0


def test_an_output_that_cannot_render_fails_the_run_saying_so_once(  # type: ignore[no-untyped-def]
    cli, write_workflow, tmp_path: Path
) -> None:
    # The run's outputs are rendered after every task succeeded; a read of a path the task's
    # record lacks fails the run (exit 4), named once: "run failed: outputs: …".
    wf = write_workflow(
        HEAD
        + """\
  actions: { g: { kind: builtin.assign } }
  outputs: { x: "${{ tasks.a.output.output.nope }}" }
  tasks: [ { id: a, uses: "action:g", with: { v: 1 } } ]
"""
    )
    ran = cli("--output", "json", "run", str(wf), "--db", str(tmp_path / "r.db"))
    assert ran.rc == 4, ran.stdout
    message = ran.error["error"]["message"]
    assert message == "run failed: outputs: undefined value `tasks.a.output.output.nope`"


def _run(cli, write_workflow, tmp_path: Path, body: str):  # type: ignore[no-untyped-def]
    """Run ``HEAD + body`` in a new database: (the CLI's result, that database)."""
    db = tmp_path / "r.db"
    return cli("--output", "json", "run", str(write_workflow(HEAD + body)), "--db", str(db)), db


def test_the_loop_guard_after_the_last_iteration_sees_the_task_vars(  # type: ignore[no-untyped-def]
    cli, write_workflow, tmp_path: Path
) -> None:
    # The guard is re-checked with loopIndex = maxIterations; like every iteration's guard
    # it reads the task's variables, here one rendered from memory that the iteration turned
    # off: the loop converged, so its aggregate succeeds.
    body = """\
  policy: { approval: never }
  memory: { working: { go: true } }
  actions: { remember: { kind: builtin.memory.write } }
  outputs: { runs: "${{ tasks.poll.output.iterations }}" }
  tasks:
    - { id: poll, uses: "action:remember", vars: { flag: "${{ memory.go }}" },
        loop: { maxIterations: 1, while: "${{ vars.flag }}" }, with: { key: go, value: false } }
"""
    done, _ = _run(cli, write_workflow, tmp_path, body)
    assert done.rc == 0, done.stderr
    assert done.data["output"] == {"runs": 1}


def test_a_loop_whose_guard_stays_true_on_a_var_fails_as_not_converged(  # type: ignore[no-untyped-def]
    cli, write_workflow, tmp_path: Path
) -> None:
    body = """\
  vars: { keep: true }
  actions: { step: { kind: builtin.assign } }
  tasks:
    - { id: poll, uses: "action:step", loop: { maxIterations: 2, while: "${{ vars.keep }}" } }
"""
    done, db = _run(cli, write_workflow, tmp_path, body)
    assert done.rc == 4, done.stdout
    poll = _tasks(_inspect(cli, db, done.error["error"]["runId"]))["poll"]
    assert poll["state"] == "failed"
    assert "loop guard is still true after maxIterations (2)" in poll["error"]
