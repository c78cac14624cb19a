"""``--interactive``: a run's approvals answered at the terminal, and the run carried on.

A run that needs an approval pauses durably exactly as without the flag (the approval row and
the held effect are committed, the run is ``paused``). With ``--interactive`` the command then
asks the operator at the terminal about each pending approval of that run, records each answer
as ``approvals approve|reject`` would (actor, reason, time, a trace of its own) and continues
the run as ``resume`` would, until it ends or pauses with nothing left to ask.

Invariants:
- without a terminal on stdin the command refuses before it reads or creates anything
  (``BlockedError``, exit 3, spec/cli.md §2);
- nothing is decided without an explicit answer: an empty line asks again; ``skip`` or the end
  of input leaves the approval pending and the run paused (exit 3, resumable later); an
  interrupt at the prompt is exit 130 with the run paused;
- an answer is committed before the run continues, so a crash between the two loses nothing:
  ``resume`` finds the decision recorded;
- questions and notes go to stderr, so stdout keeps only the command's one result.
"""

from __future__ import annotations

import os
import select
import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TextIO

from agentctl.errors import BlockedError
from agentctl.render import dump_json, printable

ACTOR = "cli-user"  # as `approvals approve` records by default
_ANSWERS = {"y": True, "yes": True, "a": True, "approve": True}
_ANSWERS |= {"n": False, "no": False, "r": False, "reject": False}
_SKIPS = frozenset({"s", "skip"})
_INPUT_SHOWN = 600  # characters of an effect's redacted input shown in the question


def require_terminal(command: str) -> None:
    """Refuse ``--interactive`` when stdin is not a terminal (a script, a pipe, CI)."""
    if not sys.stdin.isatty():
        raise BlockedError(
            f"`{command} --interactive` needs a terminal to ask for approvals, and stdin is "
            "not one; run without --interactive (a run that needs approval pauses, exit 3) "
            "and decide with `agentctl approvals approve|reject`, then `agentctl resume`"
        )


@dataclass(frozen=True)
class Interactive:
    """How to ask about a paused run's approvals and carry the run on after the answers."""

    db: str
    # (run id, progress, on_created) -> the resumed run's RunOutcome
    resume: Callable[[str, Any, Any], Any]
    ask: Callable[[str], str | None] = lambda prompt: _read_answer(prompt, sys.stdin, sys.stderr)

    def settle(self, run_id: str) -> bool:
        """Ask about each pending approval of ``run_id``; True when at least one was decided
        (the run should go on), False when none was (it stays paused)."""
        from agentctl.ledger import open_ledger

        with open_ledger(self.db, verify=False) as ledger:
            pending = ledger.list_approvals(run_id).approvals
        decided = False
        for approval in pending:
            answer = self._answer(approval)
            if answer is None:
                break  # skipped or end of input: leave this and the rest pending
            _record(self.db, approval.approval_id, answer)
            decided = True
        return decided

    def _answer(self, approval: Any) -> bool | None:
        sys.stderr.write(printable(describe(approval.to_json())))
        while True:
            line = self.ask("approve? [y]es / [n]o (reject) / [s]kip (leave pending): ")
            if line is None:
                sys.stderr.write("\n(end of input: left pending)\n")
                return None
            word = line.strip().lower()
            if word in _SKIPS:
                return None
            if word in _ANSWERS:
                return _ANSWERS[word]


def describe(approval: dict[str, Any]) -> str:
    """What the operator is asked about: the task, what the effect does, why it needs asking."""
    shown = dump_json(approval.get("redactedInput"))
    if len(shown) > _INPUT_SHOWN:
        shown = shown[:_INPUT_SHOWN] + " …"
    lines = [
        "",
        f"approval {approval['approvalId']} — run {approval['runId']}, task {approval['taskId']}",
        f"  operation {approval.get('capability') or '-'}  risk {approval.get('risk')}"
        f"  effect {approval.get('expectedEffect')}",
        f"  why: {approval.get('reason')}",
        f"  input: {shown}",
    ]
    return "\n".join(lines) + "\n"


# The longest a pending SIGINT waits for its handler while the prompt waits for a line.
_WAKE_EVERY_S = 0.25


def _read_answer(prompt: str, stdin: TextIO, stderr: TextIO) -> str | None:
    stderr.write(prompt)
    stderr.flush()
    line = _read_line(stdin.fileno(), stdin.encoding or "utf-8")
    return line if line else None


def _read_line(fd: int, encoding: str) -> str:
    """One line from ``fd`` (with its newline; shorter at the end of input, empty there).

    Not ``readline``: a SIGINT that lands after the prompt is written but before a blocking
    read starts (or on another thread) only sets the interpreter's flag, and its handler would
    wait for the read to return — for the operator's next line. Here the wait wakes every
    ``_WAKE_EVERY_S`` so the handler runs, and the interrupt ends the command (exit 130).
    One byte at a time: nothing past the line is taken from the terminal.
    """
    data = bytearray()
    while True:
        ready, _, _ = select.select([fd], [], [], _WAKE_EVERY_S)
        if not ready:
            continue
        byte = os.read(fd, 1)
        data += byte
        if byte in (b"", b"\n"):
            return data.decode(encoding, errors="replace")


def _record(db: str, approval_id: str, approve: bool) -> None:
    from agentctl.coordinator.clock import Clock
    from agentctl.ledger import ApprovalDecision, open_ledger

    verb = "approved" if approve else "rejected"
    clock = Clock()
    reason = f"{verb} at the terminal (--interactive)"
    decision = ApprovalDecision(
        approval_id, approve, ACTOR, reason, clock.now(), clock.new_id("trace")
    )
    with open_ledger(db, verify=False) as ledger:
        record = ledger.resolve_approval(decision)
    sys.stderr.write(f"{record.approval_id} {record.status}\n")
