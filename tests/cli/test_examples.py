"""The bundled examples, end to end through the CLI.

Every ``examples/*.yaml`` must pass ``agentctl check``; every example whose features ``run``
executes today must give the outcome spec/dsl.md §10 states for it. Runs happen in a copy of
the examples directory inside ``tmp_path`` (the workspace defaults to the workflow's own
directory), with the SQLite ledger in ``tmp_path`` as well, so the checkout is never touched.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest

from tests.a2a_peer_process import Peer, running_peer
from tests.cli.mcp_server import TOKEN, start_server
from tests.conftest import EXAMPLES, Cli, CliResult

# file name -> (metadata.name, task count after expansion). A new example must be added here.
EXPECTED = {
    "hello.yaml": ("hello", 3),
    "e1-dataflow.yaml": ("e1", 2),
    "e2-agent-router.yaml": ("e2", 5),
    "e3-fanout.yaml": ("e3", 11),  # 2 writers + (2 + 1) foreach + (4 + 1) matrix + report
    "e4-loop.yaml": ("e4", 5),  # 4 iterations + the aggregate
    "e5-subworkflow.yaml": ("e5", 3),  # boundary, inlined task, aggregate
    "e6-approval.yaml": ("e6", 1),
    "e7-compensation.yaml": ("e7", 2),
    "e8-retry-budget.yaml": ("e8", 2),
    "e9-process.yaml": ("e9", 1),
    "e10-extension.yaml": ("extension-wordcount", 1),
    "e11-mcp.yaml": ("mcp-notes", 2),
    "e12-a2a-delegate.yaml": ("a2a-delegate", 1),
    "router.yaml": ("router", 6),
    "memory.yaml": ("memory", 6),
    "long-term-memory.yaml": ("long-term-memory", 5),
    "foreach-files.yaml": ("foreach-files", 4),
    "reusable-pack.yaml": ("reusable-pack", 5),  # greet: boundary, 2 tasks, aggregate; mark
}


def test_every_example_is_listed() -> None:
    assert sorted(p.name for p in EXAMPLES.glob("*.yaml")) == sorted(EXPECTED)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_example_checks(cli: Cli, name: str) -> None:
    done = cli("--output", "json", "check", str(EXAMPLES / name))
    assert done.rc == 0, done.stderr
    data = done.data
    workflow, tasks = EXPECTED[name]
    assert data["valid"] is True
    assert data["workflow"] == workflow
    assert data["tasks"] == tasks
    assert len(data["workflowDigest"]) == 64 and len(data["planDigest"]) == 64


# --------------------------------------------------------------------------- running


class Runner:
    """Runs examples from a private copy of examples/ against one ledger in tmp_path."""

    def __init__(self, cli: Cli, tmp_path: Path) -> None:
        self.cli = cli
        self.dir = tmp_path / "ex"
        self.db = tmp_path / "state" / "runtime.db"
        shutil.copytree(EXAMPLES, self.dir)

    def edit(self, name: str, *edits: tuple[str, str]) -> str:
        """Write a variant of example ``name`` beside it; returns the variant's file name."""
        text = (self.dir / name).read_text(encoding="utf-8")
        for old, new in edits:
            assert text.count(old) == 1, old
            text = text.replace(old, new)
        variant = "variant-" + name
        (self.dir / variant).write_text(text, encoding="utf-8")
        return variant

    def run(self, name: str, *extra: str) -> CliResult:
        return self.cli(
            "--output", "json", "run", str(self.dir / name), "--db", str(self.db), *extra
        )

    def inspect(self, run_id: str) -> Any:
        done = self.cli("--output", "json", "inspect", run_id, "--db", str(self.db))
        assert done.rc == 0, done.stderr
        return done.data

    def tasks(self, run_id: str) -> dict[str, dict[str, Any]]:
        return {t["taskId"]: t for t in self.inspect(run_id)["tasks"]}


@pytest.fixture
def runner(cli: Cli, tmp_path: Path) -> Runner:
    return Runner(cli, tmp_path)


def _succeeded(done: CliResult) -> Any:
    assert done.rc == 0, done.stderr
    assert done.data["state"] == "succeeded"
    return done.data


def _failed(done: CliResult) -> str:
    """A run failing mid-drive prints an error envelope carrying its run id; exit 4."""
    assert done.rc == 4, (done.stdout, done.stderr)
    run_id = done.error["error"]["runId"]
    assert isinstance(run_id, str) and run_id.startswith("run-")
    return run_id


def test_hello_runs(runner: Runner) -> None:
    data = _succeeded(runner.run("hello.yaml"))
    assert data["output"]["message"] == "hello, world"
    assert data["output"]["echoed"] == "hello from a subprocess\n"
    assert (runner.dir / "out" / "hello.txt").read_text() == "hello, world"


def test_hello_previewed_says_its_output_is_unavailable(runner: Runner) -> None:
    """Its outputs read the subprocess's stdout, which a preview does not run: the output says
    so (docs/cli.md, `--check`), the preview still succeeds, and nothing is written."""
    data = _succeeded(runner.run("hello.yaml", "--check"))
    (reason,) = data["output"].values()
    assert list(data["output"]) == ["unavailableInCheckMode"] and "tasks.say" in reason
    assert not (runner.dir / "out").exists()


def test_e10_extension_counts_words(runner: Runner) -> None:
    data = _succeeded(runner.run("e10-extension.yaml"))
    words = len((runner.dir / "notes.txt").read_text().split())
    assert data["output"] == {"words": words}
    report = (runner.dir / "artifacts" / "report.json").read_text()
    assert f'"words": {words}' in report


def test_e11_mcp_counts_and_keeps_a_note(runner: Runner, tmp_path: Path) -> None:
    server = start_server(tmp_path / "server", token=True)
    try:
        variant = runner.edit(
            "e11-mcp.yaml",
            ("allowedPorts: [8765]", f"allowedPorts: [{server.port}]"),
            ("http://127.0.0.1:8765/mcp", server.url),
        )
        argv = ("--output", "json", "run", str(runner.dir / variant), "--db", str(runner.db))
        data = _succeeded(runner.cli(*argv, env={"NOTES_TOKEN": TOKEN}))
        assert data["output"] == {"words": 4, "scribe": "noted"}
        assert server.calls() == ["word_count", "append_note"]
    finally:
        server.kill()


def test_e12_a2a_delegates_to_the_example_peer(runner: Runner) -> None:
    script = runner.dir / "peers" / "a2a_peer.py"
    with running_peer(runner.dir.parent, delay=0.1, script=script) as peer:
        port = str(peer.port)
        variant = runner.edit(
            "e12-a2a-delegate.yaml",
            ("allowedPorts: [8765]", f"allowedPorts: [{port}]"),
            ("127.0.0.1:8765/.well", f"127.0.0.1:{port}/.well"),
        )
        data = _succeeded(runner.run(variant))
        assert len(Peer.lines(peer.received)) == 1
    assert data["output"]["review"] == "reviewed: Release 2.3 adds resumable A2A delegation."
    assert data["output"]["remoteTask"]


def test_e1_dataflow_outputs_total(runner: Runner) -> None:
    data = _succeeded(runner.run("e1-dataflow.yaml"))
    assert data["output"] == {"total": 3}
    tasks = runner.tasks(data["runId"])
    assert tasks["stash"]["output"]["output"] == {"n": 3, "label": "n=3", "meta": {"ok": True}}
    assert tasks["gate"]["output"]["passed"] is True


def test_e2_agent_tool_handoff_router(runner: Runner) -> None:
    data = _succeeded(runner.run("e2-agent-router.yaml"))
    assert data["output"]["scan"] == {"verdict": "go"}
    tasks = runner.tasks(data["runId"])
    assert tasks["relay"]["output"]["output"]["payload"] == {"verdict": "go"}
    assert tasks["publish"]["state"] == "succeeded"
    assert tasks["shelve"]["state"] == "skipped"
    assert tasks["shelve"]["output"]["reason"] == "route not selected"
    effects = runner.inspect(data["runId"])["effects"]
    # model call → tool call (workspace read of notes.txt) → model call, each its own effect
    assert [(e["ordinal"], e["operation"]) for e in effects] == [
        (0, "fake"),
        (1, "builtin.read"),
        (2, "fake"),
    ]
    [call] = runner.inspect(data["runId"])["toolCalls"]
    assert call["tool"] == "peek" and call["status"] == "succeeded"


def test_e8_retry_then_budget_refusal(runner: Runner) -> None:
    run_id = _failed(runner.run("e8-retry-budget.yaml"))
    data = runner.inspect(run_id)
    tasks = {t["taskId"]: t for t in data["tasks"]}
    assert tasks["first"]["state"] == "succeeded" and tasks["first"]["attempt"] == 2
    assert tasks["first"]["output"]["text"] == "fake: one"
    assert tasks["second"]["state"] == "failed"
    assert "budget providerRequests exceeded" in tasks["second"]["error"]
    assert [e["status"] for e in data["effects"]] == ["failed", "succeeded"]
    assert data["budget"]["exceeded"]["dimension"] == "providerRequests"


def test_e3_fanout_succeeds(runner: Runner) -> None:
    data = _succeeded(runner.run("e3-fanout.yaml"))
    tasks = runner.tasks(data["runId"])
    assert {t["state"] for t in tasks.values()} == {"succeeded"}
    combos = [
        (item["output"]["output"]["arch"], item["output"]["output"]["os"])
        for item in tasks["build"]["output"]["items"]
    ]
    assert combos == [("amd64", "linux"), ("amd64", "mac"), ("arm64", "linux"), ("arm64", "mac")]
    assert tasks["build"]["output"]["items"][0]["taskId"] == "build--0000-f4109a71efaf"
    report = tasks["report"]["output"]["output"]
    assert report["seen"] == "L"
    assert [i["output"]["output"] for i in report["fan"]] == [
        {"env": "dev", "i": 0},
        {"env": "prod", "i": 1},
    ]


def test_e4_loop_runs_three_times(runner: Runner) -> None:
    data = _succeeded(runner.run("e4-loop.yaml"))
    assert data["output"] == {"runs": 3}
    tasks = runner.tasks(data["runId"])
    children = [t for t in tasks if t.startswith("poll--")]
    states = [tasks[c]["state"] for c in children]
    assert states == ["succeeded", "succeeded", "succeeded", "skipped"]
    assert tasks[children[3]]["output"]["reason"] == "when condition was false"
    assert tasks[children[1]]["output"]["output"]["prev"]["output"] == {"i": 0, "prev": {"n": 0}}


def test_e4_guard_still_true_fails_the_aggregate(runner: Runner) -> None:
    variant = runner.edit(
        "e4-loop.yaml",
        ("maxIterations: 4", "maxIterations: 3"),
        ("loopIndex < 3 }}", "loopIndex < 5 }}"),
    )
    run_id = _failed(runner.run(variant))
    tasks = runner.tasks(run_id)
    assert tasks["poll"]["state"] == "failed"
    assert [t["state"] for k, t in tasks.items() if k != "poll"] == ["succeeded"] * 3


def test_e5_subworkflow_outputs_loud(runner: Runner) -> None:
    data = _succeeded(runner.run("e5-subworkflow.yaml"))
    assert data["output"] == {"loud": "hi"}
    assert list(runner.tasks(data["runId"])) == ["wrap--inputs-a160ebeb", "wrap--echo", "wrap"]


def test_e6_pauses_for_approval(runner: Runner) -> None:
    done = runner.run("e6-approval.yaml")
    assert not (runner.dir / "out" / "a.txt").exists()
    assert done.rc == 3, (done.stdout, done.stderr)
    assert done.data["state"] == "paused"
    run_id = done.data["runId"]
    inspection = runner.inspect(run_id)
    assert inspection["tasks"][0]["state"] == "waiting_for_approval"
    assert [a["status"] for a in inspection["approvals"]] == ["pending"]
    # resuming without an approval stays paused and still writes nothing
    # (approve + resume belongs to the approvals commands, not to this file)
    again = runner.cli("--output", "json", "resume", run_id, "--db", str(runner.db))
    assert again.rc == 3 and again.data["state"] == "paused"
    assert not (runner.dir / "out" / "a.txt").exists()


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        ((" writableRoots:", " nonInteractive: fail\n    writableRoots:"), "nonInteractive"),
        (("policy:\n    writableRoots: [out]", "policy:\n    approval: never"), "writable"),
        ((" writableRoots:", " toolsDeny: [filesystem.write]\n    writableRoots:"), "toolsDeny"),
    ],
    ids=["non-interactive-fail", "no-writable-roots", "tools-deny"],
)
def test_e6_denied_variants(runner: Runner, edit: tuple[str, str], message: str) -> None:
    run_id = _failed(runner.run(runner.edit("e6-approval.yaml", edit)))
    assert runner.tasks(run_id)["save"]["state"] == "failed"
    assert message in runner.tasks(run_id)["save"]["error"]
    assert not (runner.dir / "out" / "a.txt").exists()


def test_e6_same_content_on_disk_is_no_effect(runner: Runner) -> None:
    (runner.dir / "out").mkdir()
    (runner.dir / "out" / "a.txt").write_text("hello")
    data = _succeeded(runner.run("e6-approval.yaml"))
    inspection = runner.inspect(data["runId"])
    assert inspection["effects"] == [] and inspection["approvals"] == []
    assert data["output"]["save"]["changed"] is False


def test_e7_fails_at_verify(runner: Runner) -> None:
    done = runner.run("e7-compensation.yaml")
    run_id = _failed(done)
    assert "boom" in done.error["error"]["message"]
    tasks = runner.tasks(run_id)
    assert tasks["make"]["state"] == "succeeded"
    assert tasks["verify"]["state"] == "failed" and "boom" in tasks["verify"]["error"]
    assert (runner.dir / "out" / "r.txt").read_text() == "made"


def test_e9_process_echoes(runner: Runner) -> None:
    data = _succeeded(runner.run("e9-process.yaml"))
    result = data["output"]["run"]
    assert result["exitCode"] == 0
    assert result["stdout"] == "hi\n"


def test_e9_empty_allowlist_is_denied(runner: Runner) -> None:
    variant = runner.edit("e9-process.yaml", ("    processAllowlist: [echo]\n", ""))
    run_id = _failed(runner.run(variant))
    assert "processAllowlist" in runner.tasks(run_id)["run"]["error"]


def test_e9_high_risk_approval_pauses(runner: Runner) -> None:
    variant = runner.edit("e9-process.yaml", ("approval: never", "approval: high_risk"))
    done = runner.run(variant)
    assert done.rc == 3, (done.stdout, done.stderr)
    assert done.data["state"] == "paused"


# --------------------------------------------------------------------------- extra examples


@pytest.mark.parametrize(
    ("extra", "ran", "skipped"),
    [
        ([], "send_email", ["send_sms", "log_only", "notify"]),
        (["--input", "channel=sms"], "send_sms", ["send_email", "log_only", "notify"]),
        (
            ["--input", "channel=fax", "--input", "notify=true"],
            "log_only",
            ["send_email", "send_sms"],
        ),
    ],
    ids=["default-input", "sms", "no-match"],
)
def test_router_example(runner: Runner, extra: list[str], ran: str, skipped: list[str]) -> None:
    data = _succeeded(runner.run("router.yaml", *extra))
    assert data["output"]["route"]["destinations"] == [ran]
    tasks = runner.tasks(data["runId"])
    assert tasks[ran]["state"] == "succeeded"
    assert sorted(t for t, rec in tasks.items() if rec["state"] == "skipped") == sorted(skipped)
    assert tasks[skipped[0]]["output"]["reason"] == "route not selected"


def test_memory_example(runner: Runner) -> None:
    data = _succeeded(runner.run("memory.yaml"))
    notes = (runner.dir / "notes.txt").read_text()
    assert data["output"] == {"notes": notes, "seen": 1, "stage": "reviewed"}


def test_long_term_memory_example(runner: Runner) -> None:
    data = _succeeded(runner.run("long-term-memory.yaml"))
    recalled = data["output"]["recalled"]
    # Only team: docs entries; the one sharing the most query words first.
    assert [r["key"] for r in recalled] == ["style", "changelog"]
    assert recalled[0]["score"] > recalled[1]["score"] > 0
    listed = runner.cli(
        *("--output", "json", "memory", "get", "releases", "window", "--db", str(runner.db))
    )
    assert listed.rc == 0 and listed.data["value"] == {"day": "friday", "hour": 14}


def test_foreach_files_example(runner: Runner) -> None:
    data = _succeeded(runner.run("foreach-files.yaml"))
    items = data["output"]["written"]
    ids = [i["taskId"] for i in items]
    # the first two are the spec/dsl.md §9 vectors: the id digests only the bindings
    assert ids[:2] == ["greet--0000-8cbaeab3680b", "greet--0001-e41cc1e0b8a6"]
    assert ids[2].startswith("greet--0002-")
    for index, name in enumerate(["ada", "lin", "grace"]):
        text = (runner.dir / "out" / f"{name}.txt").read_text()
        assert text == f"hello, {name} (#{index})"


def test_e7_compensate_writes_undone_and_records_the_reconciliation(runner: Runner) -> None:
    source = _failed(runner.run("e7-compensation.yaml"))
    plan = runner.cli("--output", "json", "compensate", source, "--plan", "--db", str(runner.db))
    assert plan.rc == 0, plan.stderr
    assert [t["sourceTaskId"] for t in plan.data["tasks"]] == ["make"]
    done = runner.cli("--output", "json", "compensate", source, "--db", str(runner.db))
    assert done.rc == 0, done.stderr
    assert (runner.dir / "out" / "r.txt").read_text() == "undone"
    effects = runner.cli("--output", "json", "effects", "list", source, "--db", str(runner.db))
    assert [r["status"] for r in effects.data["reconciliations"]] == ["compensated"]


def test_e2_check_mode_previews_without_calling_the_model(runner: Runner) -> None:
    data = _succeeded(runner.run("e2-agent-router.yaml", "--check"))
    statuses = {k: v.get("status") for k, v in data["output"].items()}
    assert statuses["scan"] == "requires_execution"
    assert statuses["pick"] == statuses["publish"] == statuses["shelve"] == "requires_execution"
    assert runner.inspect(data["runId"])["effects"] == []
