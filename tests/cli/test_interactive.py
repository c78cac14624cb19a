"""``--interactive``: approvals asked for at a real terminal (a pseudo-terminal), then the run
carried on in the same command; refused with exit 3 when stdin is not a terminal.

The CLI runs as a subprocess whose stdin and stderr are the slave side of a pty (so
``isatty()`` is true, as for a person at a terminal) and whose stdout is a pipe (so the JSON
result stays separate from the questions); the test answers each question it reads.
"""

from __future__ import annotations

import io
import json
import os
import select
import signal
import subprocess
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from agentctl.cli_interactive import _read_answer
from tests.clibackend import LedgerTarget
from tests.conftest import Cli
from tests.providers.fixtures import SAVE_TOOL

PROMPT = b"approve? [y]es / [n]o (reject) / [s]kip (leave pending): "
EOF_KEY = b"\x04"  # Ctrl-D at the start of a line: the end of input of a terminal
INTERRUPT = b""  # an answer that is SIGINT to the process, as Ctrl-C at its terminal would be

APPROVAL = """\
apiVersion: agentctl.dev/v1alpha1
kind: Workflow
metadata: { name: ask }
spec:
  policy: { writableRoots: [out], nonInteractive: NON_INTERACTIVE }
  actions:
    save: { kind: builtin.write }
  tasks:
    - { id: one, uses: "action:save", with: { path: out/one.txt, content: first } }
    - { id: two, uses: "action:save", needs: [one], with: { path: out/two.txt, content: second } }
"""


@dataclass
class TerminalRun:
    rc: int
    stdout: str
    terminal: str  # everything written to the terminal: questions, notes, echoed answers
    asked: int

    @property
    def data(self) -> dict[str, object]:
        return dict(json.loads(self.stdout)["data"])


def _at_terminal(
    target: LedgerTarget, cwd: Path, args: tuple[str, ...], answers: list[bytes]
) -> TerminalRun:
    how = target.invocation(("--output", "json", *args), cwd, None)
    master, slave = os.openpty()
    proc = subprocess.Popen(
        how.argv, cwd=cwd, env=how.env, stdin=slave, stdout=subprocess.PIPE, stderr=slave
    )
    os.close(slave)
    seen, asked, deadline = b"", 0, time.monotonic() + 120
    try:
        while time.monotonic() < deadline:
            ready, _, _ = select.select([master], [], [], 0.1)
            if not ready:
                if proc.poll() is not None:
                    break
                continue
            try:
                chunk = os.read(master, 4096)
            except OSError:  # EIO: every holder of the slave side closed it
                break
            seen += chunk
            while seen.count(PROMPT) > asked and asked < len(answers):
                if answers[asked] == INTERRUPT:
                    proc.send_signal(signal.SIGINT)  # what Ctrl-C at the terminal sends
                else:
                    os.write(master, answers[asked])
                asked += 1
        if proc.poll() is None:
            proc.kill()  # never answered as the test expected: fail, do not hang
        assert proc.stdout is not None
        out = proc.stdout.read().decode()
        rc = proc.wait(timeout=60)
    finally:
        os.close(master)
        if proc.poll() is None:
            proc.kill()
    return TerminalRun(rc, out, seen.decode(errors="replace"), seen.count(PROMPT))


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "wf.yaml").write_text(APPROVAL.replace("NON_INTERACTIVE", "pause"))
    return ws


def _inspect(cli: Cli, ws: Path, run_id: str) -> dict[str, Any]:
    shown = cli("--output", "json", "inspect", run_id, "--db", "st/r.db", cwd=ws)
    assert shown.rc == 0, shown.stderr
    return dict(shown.data)


def _decisions(cli: Cli, ws: Path, run_id: str) -> list[dict[str, Any]]:
    """The recorded decisions on the run's approvals (``inspect`` lists only pending ones)."""
    audit = _inspect(cli, ws, run_id)["audit"]
    return [
        e["payload"] for e in audit if e["eventType"] in ("approval.approved", "approval.rejected")
    ]


def _skipped_at_terminal(target: LedgerTarget, ws: Path) -> str:
    """``run --interactive`` with its one question skipped: the paused run's id."""
    args = ("run", "wf.yaml", "--db", "st/r.db", "--interactive")
    got = _at_terminal(target, ws, args, [b"s\n"])
    assert got.rc == 3, got.terminal
    return str(got.data["runId"])


def _approved_then_resumed(cli: Cli, ws: Path, run_id: str) -> Any:
    """The run's one pending approval approved, then a plain ``resume`` (no terminal)."""
    [approval] = _inspect(cli, ws, run_id)["approvals"]
    approve = ("approvals", "approve", str(approval["approvalId"]), "--reason", "ok")
    assert cli(*approve, "--db", "st/r.db", cwd=ws).rc == 0
    return cli("--output", "json", "resume", run_id, "--db", "st/r.db", cwd=ws)


def test_each_approval_is_asked_for_and_the_run_carried_on(
    cli: Cli, ledger_target: LedgerTarget, workspace: Path
) -> None:
    args = ("run", "wf.yaml", "--db", "st/r.db", "--interactive")
    got = _at_terminal(ledger_target, workspace, args, [b"y\n", b"yes\n"])
    assert got.rc == 0, got.terminal
    assert got.asked == 2  # one question per held effect, each after the run paused on it
    assert got.data["state"] == "succeeded"
    assert (workspace / "out" / "two.txt").read_text() == "second"
    assert "task one" in got.terminal and '"path":"out/one.txt"' in got.terminal
    decided = _decisions(cli, workspace, str(got.data["runId"]))
    assert [(d["status"], d["actor"]) for d in decided] == [("approved", "cli-user")] * 2
    assert {d["reason"] for d in decided} == {"approved at the terminal (--interactive)"}


def test_a_rejection_fails_the_task_and_the_run(
    cli: Cli, ledger_target: LedgerTarget, workspace: Path
) -> None:
    args = ("run", "wf.yaml", "--db", "st/r.db", "--interactive")
    got = _at_terminal(ledger_target, workspace, args, [b"maybe\n", b"\n", b"n\n"])
    assert got.rc == 4, got.terminal
    assert got.asked == 3  # an answer it does not know, or none, is asked again
    assert not (workspace / "out").exists()
    assert got.data["state"] == "failed"  # as `resume` after `approvals reject` reports it
    [decided] = _decisions(cli, workspace, str(got.data["runId"]))
    assert decided["status"] == "rejected"


@pytest.mark.parametrize("answer", [b"s\n", EOF_KEY], ids=["skip", "end-of-input"])
def test_a_skipped_approval_leaves_the_run_paused_for_later(
    cli: Cli, ledger_target: LedgerTarget, workspace: Path, answer: bytes
) -> None:
    args = ("run", "wf.yaml", "--db", "st/r.db", "--interactive")
    got = _at_terminal(ledger_target, workspace, args, [answer])
    assert got.rc == 3, got.terminal
    assert got.data["state"] == "paused"
    run_id = str(got.data["runId"])
    [approval] = _inspect(cli, workspace, run_id)["approvals"]
    assert approval["status"] == "pending"
    assert _decisions(cli, workspace, run_id) == []
    # Nothing was decided for the operator: the ordinary path takes it from here.
    approve = ("approvals", "approve", str(approval["approvalId"]), "--reason", "ok")
    decided = cli(*approve, "--db", "st/r.db", cwd=workspace)
    assert decided.rc == 0, decided.stderr
    again = ("resume", run_id, "--db", "st/r.db", "--interactive")
    resumed = _at_terminal(ledger_target, workspace, again, [b"y\n"])
    assert resumed.rc == 0, resumed.terminal
    assert (workspace / "out" / "two.txt").read_text() == "second"


def test_non_interactive_policy_does_not_deny_what_a_terminal_can_be_asked(
    cli: Cli, ledger_target: LedgerTarget, workspace: Path
) -> None:
    (workspace / "wf.yaml").write_text(APPROVAL.replace("NON_INTERACTIVE", "fail"))
    denied = cli("--output", "json", "run", "wf.yaml", "--db", "st/a.db", cwd=workspace)
    assert denied.rc == 4 and "nonInteractive is fail" in denied.stderr
    args = ("run", "wf.yaml", "--db", "st/r.db", "--interactive")
    got = _at_terminal(ledger_target, workspace, args, [b"y\n", b"y\n"])
    assert got.rc == 0, got.terminal
    assert (workspace / "out" / "one.txt").read_text() == "first"


@pytest.mark.parametrize(
    "command",
    [
        ("run", "wf.yaml"),
        ("resume", "run-x"),
        ("fork", "run-x"),
        ("retry", "wf.yaml", "run-x", "--failed"),
        ("repair", "wf.yaml", "run-x", "--from", "one"),
        ("compensate", "run-x"),
    ],
    ids=lambda c: c[0],
)
def test_without_a_terminal_it_is_refused_and_nothing_is_created(
    cli: Cli, workspace: Path, command: tuple[str, ...]
) -> None:
    got = cli("--output", "json", *command, "--db", "st/r.db", "--interactive", cwd=workspace)
    assert got.rc == 3, got.stderr
    assert "needs a terminal" in got.error["error"]["message"]
    assert not (workspace / "st").exists()
    assert not (workspace / "out").exists()


def test_a_repair_run_held_for_approval_is_carried_on(
    cli: Cli, ledger_target: LedgerTarget, workspace: Path
) -> None:
    # The source ran without approvals and failed at its check; the corrected workflow asks
    # for approval of its write, which the repair run re-executes: asked, approved, carried on.
    broken = APPROVAL.replace("nonInteractive: NON_INTERACTIVE", "approval: never")
    broken = broken.replace(
        "content: second } }",
        "content: second } }\n"
        '    - { id: gate, uses: "action:gate", needs: [two], with: { that: false } }',
    )
    broken = broken.replace(
        "save: { kind: builtin.write }",
        "save: { kind: builtin.write }\n    gate: { kind: builtin.assert }",
    )
    (workspace / "src.yaml").write_text(broken)
    first = cli("--output", "json", "run", "src.yaml", "--db", "st/r.db", cwd=workspace)
    assert first.rc == 4, first.stderr
    fixed = broken.replace("approval: never", "approval: mutations").replace("false", "true")
    (workspace / "fixed.yaml").write_text(fixed.replace("content: second", "content: mended"))
    source = str(first.error["error"]["runId"])
    args = ("repair", "fixed.yaml", source, "--from", "two", "--restart-successful")
    got = _at_terminal(
        ledger_target, workspace, (*args, "--db", "st/r.db", "--interactive", "--diff"), [b"y\n"]
    )
    assert got.rc == 0, got.terminal
    assert got.asked == 1
    assert got.data["state"] == "succeeded" and got.data["executedTasks"] == ["two", "gate"]
    assert (workspace / "out" / "two.txt").read_text() == "mended"
    assert "two" in [r["taskId"] for r in got.data["artifacts"]]  # read after the answers
    assert "-second\n+mended" in got.data["output"]["two"]["diff"]  # --diff carried on too


def test_a_fork_carried_on_writes_in_its_own_workspace(
    cli: Cli, ledger_target: LedgerTarget, workspace: Path, tmp_path: Path
) -> None:
    # Each part driven after an answer runs where the command said (--workspace), not in the
    # source run's workspace that the fork would otherwise inherit.
    args = ("run", "wf.yaml", "--db", "st/r.db", "--interactive")
    first = _at_terminal(ledger_target, workspace, args, [b"y\n", b"y\n"])
    assert first.rc == 0, first.terminal
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    fork = ("fork", str(first.data["runId"]), "--db", "st/r.db", "--workspace", str(elsewhere))
    forked = _at_terminal(ledger_target, workspace, (*fork, "--interactive"), [b"y\n", b"y\n"])
    assert forked.rc == 0, forked.terminal
    assert forked.asked == 2
    assert (elsewhere / "out" / "one.txt").read_text() == "first"
    assert (elsewhere / "out" / "two.txt").read_text() == "second"


def test_a_skipped_approval_under_non_interactive_fail_runs_once_approved_later(
    cli: Cli, ledger_target: LedgerTarget, workspace: Path
) -> None:
    # The prompt was skipped; the operator approves later and resumes without a terminal. The
    # effect was held when the run was asked with --interactive: nonInteractive (what to do
    # when nobody can be asked) must not turn the approved effect into a denial now.
    (workspace / "wf.yaml").write_text(APPROVAL.replace("NON_INTERACTIVE", "fail"))
    run_id = _skipped_at_terminal(ledger_target, workspace)
    resumed = _approved_then_resumed(cli, workspace, run_id)
    # The approved write runs; the next one, asked of nobody, is failed as the policy says.
    assert resumed.rc == 4, resumed.stderr
    assert (workspace / "out" / "one.txt").read_text() == "first"
    assert "nonInteractive is fail" in resumed.stdout + resumed.stderr


def test_an_interrupt_at_the_prompt_names_the_paused_run(
    cli: Cli, ledger_target: LedgerTarget, workspace: Path
) -> None:
    args = ("run", "wf.yaml", "--db", "st/r.db", "--interactive")
    got = _at_terminal(ledger_target, workspace, args, [INTERRUPT])
    assert got.rc == 130, got.terminal
    envelope = json.loads(got.terminal[got.terminal.rindex('{"apiVersion"') :].splitlines()[0])
    [run] = cli("--output", "json", "runs", "list", "--db", "st/r.db", cwd=workspace).data["runs"]
    assert run["state"] == "paused"
    assert envelope["error"]["runId"] == run["runId"]  # the script can find it to resume


class _Interrupted(Exception):
    pass


def _raise_interrupted(_signum: int, _frame: object) -> None:
    raise _Interrupted


def _blocked_in_a_call(native_id: int) -> bool:
    """Whether the thread sits in a system call (``/proc``: its number, not ``running``)."""
    with open(f"/proc/self/task/{native_id}/syscall", encoding="ascii") as status:
        return status.read().split(" ", 1)[0].isdigit()


def test_an_interrupt_pending_while_the_prompt_waits_ends_the_wait() -> None:
    """The race of the interrupt test above, made certain: a SIGINT taken on another thread
    interrupts no read of the main thread; only the interpreter's flag is set, exactly as for
    a SIGINT landing between the prompt's write and the read's start. The wait must still end
    with the handler's exception, not only when the operator's next line arrives."""
    main = threading.main_thread().native_id
    assert main is not None
    read_end, write_end = os.pipe()
    answered, gave_a_line = threading.Event(), []

    def interrupt_once_waiting() -> None:
        while not _blocked_in_a_call(main):
            time.sleep(0.01)
        signal.pthread_kill(threading.get_ident(), signal.SIGINT)  # taken on this thread
        if not answered.wait(30):  # the prompt did not end: unblock it, and fail below
            gave_a_line.append(True)
            os.write(write_end, b"y\n")

    previous = signal.signal(signal.SIGINT, _raise_interrupted)
    poker = threading.Thread(target=interrupt_once_waiting)
    poker.start()
    try:
        with (
            open(read_end, encoding="utf-8", closefd=False) as stdin,
            pytest.raises(_Interrupted),
        ):
            _read_answer("approve? ", stdin, io.StringIO())
    finally:
        answered.set()
        poker.join()
        signal.signal(signal.SIGINT, previous)
        os.close(read_end)
        os.close(write_end)
    assert not gave_a_line, "the interrupt waited for the next line"


def test_the_prompt_reads_one_line_and_nothing_past_it() -> None:
    read_end, write_end = os.pipe()
    os.write(write_end, "yes\nnö\n".encode())
    os.close(write_end)
    with open(read_end, encoding="utf-8") as stdin:
        shown = io.StringIO()
        assert _read_answer("approve? ", stdin, shown) == "yes\n"
        assert shown.getvalue() == "approve? "
        assert _read_answer("again? ", stdin, shown) == "nö\n"
        assert _read_answer("again? ", stdin, shown) is None  # the end of input


AGENT_TOOL = """\
apiVersion: agentctl.dev/v1alpha1
kind: Workflow
metadata: { name: ask-in-turn }
spec:
  policy: { approval: mutations, writableRoots: ["."], nonInteractive: fail }
  providers:
    sim: { kind: fake }
  tools:
SAVE_TOOL
  agents:
    first:
      provider: sim
      model: m
      instructions: Write.
      tools: [save]
      providerOptions: { toolInput: { path: one.txt, content: first }, finalText: done }
    second:
      provider: sim
      model: m
      instructions: Write.
      tools: [save]
      providerOptions: { toolInput: { path: two.txt, content: second }, finalText: done }
  tasks:
    - { id: a, uses: "agent:first", with: { prompt: go } }
    - { id: b, uses: "agent:second", needs: [a], with: { prompt: go } }
""".replace("SAVE_TOOL\n", SAVE_TOOL)


def test_an_agent_tool_call_held_at_a_terminal_runs_once_approved_on_a_plain_resume(
    cli: Cli, ledger_target: LedgerTarget, workspace: Path
) -> None:
    # As above, but the held effect is an agent's tool call, decided inside the turn loop: a
    # plain resume re-enters the loop, and the call it reaches again was held (someone could
    # be asked then) — only a call not yet recorded meets nonInteractive's denial.
    (workspace / "wf.yaml").write_text(AGENT_TOOL)
    run_id = _skipped_at_terminal(ledger_target, workspace)
    [approval] = _inspect(cli, workspace, run_id)["approvals"]
    assert approval["tool"] == "save" and approval["taskId"] == "a"
    # Undecided, a plain resume leaves the held call held: paused, not denied.
    again = cli("--output", "json", "resume", run_id, "--db", "st/r.db", cwd=workspace)
    assert again.rc == 3 and again.data["state"] == "paused", again.stderr
    resumed = _approved_then_resumed(cli, workspace, run_id)
    assert resumed.rc == 4, resumed.stderr
    assert (workspace / "one.txt").read_text() == "first"
    assert not (workspace / "two.txt").exists()
    shown = _inspect(cli, workspace, run_id)
    states = {t["taskId"]: (t["state"], t.get("error") or "") for t in shown["tasks"]}
    assert states["a"][0] == "succeeded"
    assert states["b"][0] == "failed" and "nonInteractive is fail" in states["b"][1]
    # The denied call left no effect and no approval; the approved one ran exactly once.
    writes = [e for e in shown["effects"] if e["operation"] != "fake"]
    assert [(e["taskId"], e["status"]) for e in writes] == [("a", "succeeded")]


def test_an_agent_tool_call_needing_approval_is_denied_when_nobody_can_be_asked(
    cli: Cli, workspace: Path
) -> None:
    (workspace / "wf.yaml").write_text(AGENT_TOOL)
    denied = cli("--output", "json", "run", "wf.yaml", "--db", "st/r.db", cwd=workspace)
    assert denied.rc == 4, denied.stderr
    run_id = str(denied.data["runId"]) if denied.stdout else None
    [run] = cli("--output", "json", "runs", "list", "--db", "st/r.db", cwd=workspace).data["runs"]
    shown = _inspect(cli, workspace, run_id or str(run["runId"]))
    assert shown["approvals"] == []
    assert [e["operation"] for e in shown["effects"]] == ["fake"]
    [task_a] = [t for t in shown["tasks"] if t["taskId"] == "a"]
    assert task_a["state"] == "failed" and "nonInteractive is fail" in task_a["error"]
    assert not (workspace / "one.txt").exists()


def test_under_approval_always_the_recorded_model_calls_are_reused_on_a_plain_resume(
    cli: Cli, ledger_target: LedgerTarget, workspace: Path
) -> None:
    # approval: always asks for the model calls too: the first is approved at the terminal,
    # the tool call's question skipped. A plain resume re-enters the loop and must reuse the
    # model call recorded under --interactive (not deny it as needing an approval nobody can
    # give), so the approved tool call runs; the loop's next model call is new, and that one
    # nonInteractive: fail denies.
    (workspace / "wf.yaml").write_text(
        AGENT_TOOL.replace("approval: mutations", "approval: always")
    )
    args = ("run", "wf.yaml", "--db", "st/r.db", "--interactive")
    got = _at_terminal(ledger_target, workspace, args, [b"y\n", b"s\n"])
    assert (got.rc, got.asked) == (3, 2), got.terminal
    run_id = str(got.data["runId"])
    resumed = _approved_then_resumed(cli, workspace, run_id)
    assert resumed.rc == 4, resumed.stderr
    assert (workspace / "one.txt").read_text() == "first"
    shown = _inspect(cli, workspace, run_id)
    [task_a] = [t for t in shown["tasks"] if t["taskId"] == "a"]
    assert task_a["state"] == "failed"
    assert "model call denied" in task_a["error"] and "nonInteractive is fail" in task_a["error"]
    ops = [(e["operation"], e["status"]) for e in shown["effects"]]
    assert ops == [("fake", "succeeded"), ("builtin.write", "succeeded")]


def test_a_compensation_held_for_approval_is_carried_on(
    cli: Cli, ledger_target: LedgerTarget, workspace: Path
) -> None:
    # spec.compensation.approval: always holds the inverse write; `compensate --interactive`
    # asks about it and carries the compensation run on, as retry and repair do.
    source_text = """\
apiVersion: agentctl.dev/v1alpha1
kind: Workflow
metadata: { name: undo-asked }
spec:
  compensation: { approval: always }
  policy: { approval: never, writableRoots: [out] }
  actions: { save: { kind: builtin.write }, check: { kind: builtin.assert } }
  tasks:
    - { id: make, uses: "action:save", with: { path: out/r.txt, content: made },
        compensate: { uses: "action:save", with: { path: out/r.txt, content: undone } } }
    - { id: verify, uses: "action:check", needs: [make], with: { that: false, message: boom } }
"""
    (workspace / "undo.yaml").write_text(source_text)
    first = cli("--output", "json", "run", "undo.yaml", "--db", "st/r.db", cwd=workspace)
    assert first.rc == 4, first.stderr
    source = str(first.error["error"]["runId"])
    args = ("compensate", source, "--db", "st/r.db", "--interactive")
    got = _at_terminal(ledger_target, workspace, args, [b"y\n"])
    assert got.rc == 0, got.terminal
    assert got.asked == 1
    assert got.data["state"] == "succeeded" and got.data["compensatedTasks"] == ["make"]
    assert (workspace / "out" / "r.txt").read_text() == "undone"
