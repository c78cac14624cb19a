"""An uncertain effect's budget reservation, as a user sees it through the CLI (spec/cli.md §4,
§6, §7): it stays counted until the effect is reconciled, and the reconciliation settles it —
``not-applied`` with nothing, ``applied`` with what the result tells — so a tight budget still
lets the resumed retry run; a cancelled or failed run's never-started reservation settles with
nothing.

A coordinator killed right after an effect started (``AGENTCTL_CRASH_AT``, as a power cut or
``kill -9`` would) leaves that effect uncertain with its reservation active.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.cli.queue_helpers import serve_report
from tests.cli.test_agent_sessions import GUIDE, _setup
from tests.conftest import Cli, StartCli

DB = ("--db", "r.db")
SHELL = """\
apiVersion: agentctl.dev/v1alpha1
kind: Workflow
metadata: {{ name: tight }}
spec:
  policy: {{ approval: {approval}, processAllowlist: [sh] }}
  runtime: {{ budgets: {{ maxProcessOutputBytes: 1500 }} }}
  actions:
    say: {{ kind: builtin.shell.exec, command: /bin/sh, args: ["-c", "{script}"],
           combinedOutputLimitBytes: 1000 }}
  tasks:
    - {{ id: s, uses: "action:say" }}
"""
CRASH = {"AGENTCTL_CRASH_AT": "coordinator.after_started", "AGENTCTL_CRASH_HIT": "1"}


def _json(cli: Cli, *args: str) -> Any:
    got = cli("--output", "json", *args, *DB)
    assert got.rc == 0, got.stderr
    return got.data


def _budget(cli: Cli, run_id: str) -> Any:
    return _json(cli, "inspect", run_id)["budget"]


def _crashed(cli: Cli, tmp_path: Path, text: str) -> str:
    """Run ``text`` until its coordinator dies with the first effect started; the run's id,
    once a resume has found that effect unresolved (exit 3) and left it uncertain."""
    (tmp_path / "wf.yaml").write_text(text, encoding="utf-8")
    killed = cli("--output", "json", "run", "wf.yaml", *DB, env=CRASH)
    assert killed.rc == -9, killed.stderr
    run_id: str = _json(cli, "runs", "list")["runs"][0]["runId"]
    assert cli("resume", run_id, *DB).rc == 3
    return run_id


def _uncertain(cli: Cli, run_id: str) -> str:
    effects = _json(cli, "effects", "list", run_id)["effects"]
    [effect] = [e["effectId"] for e in effects if e["status"] == "uncertain"]
    return str(effect)


def _reconcile(cli: Cli, effect: str, status: str, *flags: str) -> None:
    args = ("effects", "reconcile", effect, "--status", status, "--reason", "checked", *flags)
    _json(cli, *args)


def test_a_not_applied_effect_gives_its_reservation_back_for_the_retry(
    cli: Cli, tmp_path: Path
) -> None:
    # 1000 reserved for the lost attempt + 1000 for its retry would pass the 1500 limit.
    run_id = _crashed(cli, tmp_path, SHELL.format(approval="never", script="printf hello"))
    assert _budget(cli, run_id)["reserved"] == {"processOutputBytes": 1000}
    _reconcile(cli, _uncertain(cli, run_id), "not-applied")
    settled = _budget(cli, run_id)
    assert settled["reserved"] == {"processOutputBytes": 0}
    assert settled["usage"] == {"processOutputBytes": 0} and settled["exceeded"] is None
    done = cli("--output", "json", "resume", run_id, *DB)
    assert done.rc == 0, done.stderr
    final = _budget(cli, run_id)
    assert final["usage"] == {"processOutputBytes": 5} and final["exceeded"] is None


def test_an_applied_effect_settles_the_output_its_result_shows_once(
    cli: Cli, tmp_path: Path
) -> None:
    run_id = _crashed(cli, tmp_path, SHELL.format(approval="never", script="printf hello"))
    effect = _uncertain(cli, run_id)
    for stdout in ("hello", "x" * 900):  # the second record supersedes: it counts nothing
        result = {"status": "changed", "exitCode": 0, "stdout": stdout, "stderr": ""}
        (tmp_path / "result.json").write_text(json.dumps(result), encoding="utf-8")
        _reconcile(cli, effect, "applied", "--result-file", "result.json")
        budget = _budget(cli, run_id)
        assert budget["usage"] == {"processOutputBytes": 5}
        assert budget["reserved"] == {"processOutputBytes": 0}
    assert cli("resume", run_id, *DB).rc == 0  # the recorded result is used: nothing runs
    assert _budget(cli, run_id)["usage"] == {"processOutputBytes": 5}


def test_a_not_applied_model_call_does_not_count_against_max_provider_requests(
    cli: Cli, tmp_path: Path
) -> None:
    # The guide's agent makes two model calls; the lost one would make the retry's three.
    budgets = "  runtime: { budgets: { maxProviderRequests: 2 } }\n  tools:"
    _setup(tmp_path, GUIDE.replace("  tools:", budgets, 1))
    run_id = _crashed(cli, tmp_path, (tmp_path / "wf.yaml").read_text(encoding="utf-8"))
    assert _budget(cli, run_id)["reserved"]["providerRequests"] == 1
    _reconcile(cli, _uncertain(cli, run_id), "not-applied")
    assert _budget(cli, run_id)["reserved"]["providerRequests"] == 0
    done = cli("--output", "json", "resume", run_id, *DB)
    assert done.rc == 0, done.stderr
    assert _budget(cli, run_id)["usage"]["providerRequests"] == 2


PRICED = """  runtime:
    pricing:
      version: test
      models:
        fake/scripted:
          inputMicrousdPerMillionTokens: 2000000
          cacheReadMicrousdPerMillionTokens: 1000000
          cacheWriteMicrousdPerMillionTokens: 3000000
          outputMicrousdPerMillionTokens: 10000000
          reasoningMicrousdPerMillionTokens: 20000000
  tools:"""


def test_an_applied_model_call_is_settled_at_its_price_not_the_reserved_bound(
    cli: Cli, tmp_path: Path
) -> None:
    _setup(tmp_path, GUIDE.replace("  tools:", PRICED, 1))
    run_id = _crashed(cli, tmp_path, (tmp_path / "wf.yaml").read_text(encoding="utf-8"))
    reserved = _budget(cli, run_id)["reserved"]["costMicrousd"]
    usage = {"inputTokens": 1000, "cacheReadTokens": 600, "cacheWriteTokens": 100}
    usage |= {"outputTokens": 400, "reasoningTokens": 100}
    answer = {"finish": "complete", "text": "VERIFIED", "toolCalls": [], "usage": usage}
    (tmp_path / "answer.json").write_text(json.dumps(answer), encoding="utf-8")
    _reconcile(cli, _uncertain(cli, run_id), "applied", "--result-file", "answer.json")
    budget = _budget(cli, run_id)
    assert budget["reserved"]["costMicrousd"] == 0
    # 300 plain input at 2, 600 read at 1, 100 written at 3; 300 plain output at 10, 100
    # reasoning at 20 micro-USD a token: the reservation's upper bound was far more.
    cost = 300 * 2 + 600 * 1 + 100 * 3 + 300 * 10 + 100 * 20
    assert budget["usage"]["costMicrousd"] == cost < reserved
    assert (budget["usage"]["inputTokens"], budget["usage"]["totalTokens"]) == (1000, 1400)


def test_cancelling_a_paused_run_settles_its_never_started_reservation(
    cli: Cli, tmp_path: Path
) -> None:
    # Under `approval: mutations` the process waits for approval, 1000 bytes reserved.
    (tmp_path / "wf.yaml").write_text(
        SHELL.format(approval="mutations", script="printf hello"), encoding="utf-8"
    )
    paused = cli("--output", "json", "run", "wf.yaml", *DB)
    assert paused.rc == 3, paused.stderr
    run_id = paused.data["runId"]
    assert _budget(cli, run_id)["reserved"] == {"processOutputBytes": 1000}
    assert cli("cancel", run_id, *DB).rc == 0  # recorded; the resume honours it
    assert _budget(cli, run_id)["reserved"] == {"processOutputBytes": 1000}
    assert cli("resume", run_id, *DB).rc == 130
    assert _json(cli, "inspect", run_id)["run"]["state"] == "cancelled"
    budget = _budget(cli, run_id)
    assert budget["reserved"] == {"processOutputBytes": 0}
    assert budget["usage"] == {"processOutputBytes": 0}


def test_a_stopped_runs_started_effect_stays_reserved_until_reconciled(
    cli: Cli, tmp_path: Path
) -> None:
    # --timeout-seconds stops the run with the process running: it may have written output.
    # The deadline counts from the run's start, so it leaves room for the start and the
    # dispatch on a loaded machine (parallel test workers), and falls inside the 30 s sleep.
    (tmp_path / "wf.yaml").write_text(
        SHELL.format(approval="never", script="sleep 30"), encoding="utf-8"
    )
    stopped = cli("--output", "json", "run", "wf.yaml", "--timeout-seconds", "15", *DB)
    assert stopped.rc == 130, stopped.stderr
    run_id = stopped.data["runId"]
    assert _budget(cli, run_id)["reserved"] == {"processOutputBytes": 1000}
    _reconcile(cli, _uncertain(cli, run_id), "not-applied")
    assert _budget(cli, run_id)["reserved"] == {"processOutputBytes": 0}


def test_a_timed_out_process_keeps_its_reservation_until_reconciled(
    cli: Cli, tmp_path: Path
) -> None:
    # The process is killed at its timeout, after it may have written output: its spend is
    # unknown, so the 1000 bytes stay reserved (the retry's 1000 more would pass 1500).
    script = "if [ -e go ]; then printf hello; else sleep 30; fi"
    text = SHELL.format(approval="never", script=script).replace(
        "combinedOutputLimitBytes: 1000", "combinedOutputLimitBytes: 1000, timeoutSeconds: 1"
    )
    (tmp_path / "wf.yaml").write_text(text, encoding="utf-8")
    timed_out = cli("--output", "json", "run", "wf.yaml", *DB)
    assert timed_out.rc == 4, timed_out.stderr
    run_id = _json(cli, "runs", "list")["runs"][0]["runId"]
    assert _budget(cli, run_id)["reserved"] == {"processOutputBytes": 1000}
    _reconcile(cli, _uncertain(cli, run_id), "not-applied")
    assert _budget(cli, run_id)["reserved"] == {"processOutputBytes": 0}
    (tmp_path / "go").write_text("", encoding="utf-8")
    done = cli("--output", "json", "resume", run_id, *DB)
    assert done.rc == 0, done.stderr
    assert _budget(cli, run_id)["usage"] == {"processOutputBytes": 5}


def test_a_rejected_approval_gives_its_effects_reservation_back(cli: Cli, tmp_path: Path) -> None:
    (tmp_path / "wf.yaml").write_text(
        SHELL.format(approval="mutations", script="printf hello"), encoding="utf-8"
    )
    paused = cli("--output", "json", "run", "wf.yaml", *DB)
    assert paused.rc == 3, paused.stderr
    run_id = paused.data["runId"]
    assert _budget(cli, run_id)["reserved"] == {"processOutputBytes": 1000}
    [pending] = _json(cli, "approvals", "list", run_id)["approvals"]
    _json(cli, "approvals", "reject", pending["approvalId"], "--reason", "not today")
    assert _budget(cli, run_id)["reserved"] == {"processOutputBytes": 0}  # it never runs
    assert cli("resume", run_id, *DB).rc == 4  # approval rejected
    budget = _budget(cli, run_id)
    assert budget["reserved"] == {"processOutputBytes": 0}
    assert budget["usage"] == {"processOutputBytes": 0}


# `s` is held for approval with memory k = a; `again`, beside it, makes k = b. Once approved,
# `s` cannot be re-created identically (its input reads k), so the continued run fails with
# its approved effect never started.
DRIFTED = """\
apiVersion: agentctl.dev/v1alpha1
kind: Workflow
metadata: { name: drifted }
spec:
  runtime: { maxConcurrency: 2, budgets: { maxProcessOutputBytes: 1500 } }
  policy: { approval: mutations, processAllowlist: [sh] }
  actions:
    say: { kind: builtin.shell.exec, command: /bin/sh, args: ["-c", "printf '${{ memory.k }}'"],
           combinedOutputLimitBytes: 1000 }
    remember: { kind: builtin.memory.write }
  tasks:
    - { id: first, uses: "action:remember", with: { key: k, value: a } }
    - { id: s, uses: "action:say", needs: [first] }
    - { id: again, uses: "action:remember", needs: [first], with: { key: k, value: b } }
"""


SERVE = ("--output", "json", "serve", *DB, "--exit-when-idle", "--poll-seconds", "0.2")


def _served(start_cli: StartCli, run_id: str) -> str:
    """The state a ``serve`` (until idle) left the run in."""
    report = serve_report(start_cli(*SERVE))
    [state] = [r["state"] for r in report["runs"] if r["runId"] == run_id]
    return str(state)


@pytest.mark.parametrize("driver", ["resume", "serve"])
def test_a_run_that_ends_failed_settles_its_never_started_reservation(
    cli: Cli, start_cli: StartCli, tmp_path: Path, driver: str
) -> None:
    (tmp_path / "wf.yaml").write_text(DRIFTED, encoding="utf-8")
    if driver == "resume":
        paused = cli("--output", "json", "run", "wf.yaml", *DB)
        assert paused.rc == 3, paused.stderr
        run_id = paused.data["runId"]
    else:
        run_id = _json(cli, "submit", "wf.yaml")["runId"]
        assert _served(start_cli, run_id) == "paused"
    [pending] = _json(cli, "approvals", "list", run_id)["approvals"]
    _json(cli, "approvals", "approve", pending["approvalId"], "--reason", "ok")
    assert _budget(cli, run_id)["reserved"] == {"processOutputBytes": 1000}
    if driver == "resume":
        assert cli("resume", run_id, *DB).rc == 4
    else:  # a serve claims the paused run once its approval is resolved
        assert _served(start_cli, run_id) == "failed"
    assert _json(cli, "inspect", run_id)["run"]["state"] == "failed"
    effects = {e["taskId"]: e["status"] for e in _json(cli, "effects", "list", run_id)["effects"]}
    assert effects["s"] == "cancelled"  # approved, never started: it never will be now
    budget = _budget(cli, run_id)
    assert budget["reserved"] == {"processOutputBytes": 0}
    assert budget["usage"] == {"processOutputBytes": 0}
